// source_file: where a file of the source tree (e.g. "configs/default.yaml") is read from, for
// the tools that default to one (tpusim, the Python module): relative to the working directory
// when it is there, else in the tree the tool was built from (TPU_SOURCE_DIR, which the
// including target defines).
#pragma once

#include <cstdio>
#include <string>

namespace tpu {

inline std::string source_file(const std::string& rel) {
  if (FILE* f = std::fopen(rel.c_str(), "r")) {
    std::fclose(f);
    return rel;
  }
  return std::string(TPU_SOURCE_DIR) + "/" + rel;
}

}  // namespace tpu
