#include "cli.h"

#include "output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace tpu {

namespace {
bool has(const std::vector<std::string>& v, const std::string& a) {
  return std::find(v.begin(), v.end(), a) != v.end();
}
}  // namespace

Opts parse_cli(const std::vector<std::string>& args, const CliSpec& spec) {
  Opts opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw HelpRequested(spec.usage);
    const bool flag = has(spec.flags, a);
    const bool rep = has(spec.repeatable, a);
    const bool val = rep || has(spec.valued, a);
    if (!flag && !val) throw std::invalid_argument("unknown option '" + a + "'\n" + spec.usage);
    if (opt.count(a) && !rep) throw std::invalid_argument(a + " is given twice");
    if (flag) {
      opt[a] = "1";
      continue;
    }
    if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
    const std::string& v = args[++i];
    opt[a] = rep && opt.count(a) ? opt[a] + "\n" + v : v;
  }
  for (const std::string& k : spec.out_paths)
    if (opt.count(k)) check_output_path(k, opt.at(k));
  return opt;
}

std::string get(const Opts& opt, const char* k, const std::string& d) {
  const auto it = opt.find(k);
  return it == opt.end() ? d : it->second;
}

uint64_t parse_uint(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi) {
  std::size_t pos = 0;
  unsigned long long x = 0;
  try {
    x = std::stoull(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v.size() || v.empty() || v[0] == '-' || v[0] == '+' || x < lo || x > hi)
    throw std::invalid_argument(flag + " " + v + ": must be an integer from " +
                                std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}

double parse_real(const std::string& flag, const std::string& v, double lo, double hi) {
  std::size_t pos = 0;
  double x = 0;
  try {
    x = std::stod(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v.size() || v.empty() || !std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream s;
    s << flag << " " << v << ": must be a number from " << lo << " to " << hi;
    throw std::invalid_argument(s.str());
  }
  return x;
}

std::vector<std::string> parse_list(const std::string& flag, const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  if (out.empty() || (!v.empty() && v.back() == ',') ||
      std::any_of(out.begin(), out.end(), [](const std::string& s) { return s.empty(); }))
    throw std::invalid_argument(flag + " " + v + ": must be a comma-separated list, no empty item");
  return out;
}

void check_output_path(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(flag + " " + path + ": directory '" + dir.string() +
                                "' does not exist");
  if (fs::is_directory(p, ec)) throw std::invalid_argument(flag + " " + path + ": is a directory");
  // Rank 0 alone writes files (several MPI ranks): the others would race it on the test file.
  if (files_muted()) return;
  // Opened for writing now (not truncated; a file made for the test is removed again), which
  // also catches what permission bits do not say (a read-only file system, root's rights).
  const bool existed = fs::exists(p, ec);
  if (existed && !fs::is_regular_file(p, ec) && !fs::is_character_file(p, ec)) return;
  const int fd = existed ? ::open(path.c_str(), O_WRONLY | O_NONBLOCK)
                         : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw std::invalid_argument(flag + " " + path + ": cannot be written (" +
                                std::strerror(errno) + ")");
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

}  // namespace tpu
