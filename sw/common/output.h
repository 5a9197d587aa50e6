// Whether this process writes the files a command asks for (reports, traces, npy). Off on the
// ranks other than 0 of a pod split across MPI processes (docs/scale.md): every rank runs the
// same command and computes the same results, and rank 0 alone writes them.
#pragma once

namespace tpu {

inline bool& files_muted_flag() {
  static bool muted = false;
  return muted;
}
inline bool files_muted() { return files_muted_flag(); }
inline void set_files_muted(bool m) { files_muted_flag() = m; }

}  // namespace tpu
