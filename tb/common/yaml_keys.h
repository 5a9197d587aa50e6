// A check every configuration loader runs after parsing: yaml-cpp keeps a mapping's duplicate
// keys (node[key] then finds the first, iteration sees both), so a key given twice would be
// taken silently, first-wins or last-wins depending on how a section is read.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <map>
#include <string>

namespace tpu {

namespace yaml_keys_detail {
inline std::string walk(const YAML::Node& n, const std::string& where, int depth,
                        std::size_t* budget) {
  // Aliases can make a small file a huge tree ("billion laughs"): bound the walk.
  if (depth > 256 || (*budget)-- == 0)
    return "the document nests too deeply or expands to too many nodes (through aliases)";
  if (n.IsMap()) {
    std::map<std::string, int> seen;  // key -> line (1-based)
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<a non-scalar key>";
      const std::string path = where.empty() ? key : where + "." + key;
      const int line = kv.first.Mark().line + 1;
      const auto it = seen.find(key);
      if (it != seen.end())
        return "key '" + path + "' is given twice: line " + std::to_string(it->second) +
               " and line " + std::to_string(line);
      seen.emplace(key, line);
      std::string e = walk(kv.second, path, depth + 1, budget);
      if (!e.empty()) return e;
    }
  } else if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) {
      std::string e = walk(n[i], where + "[" + std::to_string(i) + "]", depth + 1, budget);
      if (!e.empty()) return e;
    }
  }
  return "";
}
}  // namespace yaml_keys_detail

// The first key that a mapping anywhere in `root` holds twice, as "key 'hbm.timing.CL' is given
// twice: line 4 and line 9" (lines 1-based), or a tree too large to check; "" when all is well.
inline std::string yaml_duplicate_key(const YAML::Node& root) {
  std::size_t budget = 100'000;  // a configuration has hundreds
  return yaml_keys_detail::walk(root, "", 0, &budget);
}

}  // namespace tpu
