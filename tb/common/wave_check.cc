#include "wave_check.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tpu {

std::vector<std::string> gtkw_signals(const std::string& gtkw_path) {
  std::ifstream in(gtkw_path);
  if (!in) throw std::runtime_error(gtkw_path + ": cannot open");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '[' || line[0] == '@' || line[0] == '-' || line[0] == '*')
      continue;
    out.push_back(line);
  }
  return out;
}

bool have_fst2vcd() { return std::system("fst2vcd --help >/dev/null 2>&1") == 0; }

std::vector<std::string> fst_signals(const std::string& fst_path) {
  const std::string cmd = "fst2vcd '" + fst_path + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) throw std::runtime_error("cannot run fst2vcd");
  std::vector<std::string> scope, out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p.get())) {
    std::istringstream ss(buf);
    std::string tok;
    ss >> tok;
    if (tok == "$scope") {
      std::string kind, name;
      ss >> kind >> name;
      scope.push_back(name);
    } else if (tok == "$upscope") {
      if (!scope.empty()) scope.pop_back();
    } else if (tok == "$var") {
      // "$var wire 16 # t_cl_i [15:0] $end": the range, when there is one, stays on the name.
      std::string kind, width, id, name, range;
      ss >> kind >> width >> id >> name >> range;
      std::string full;
      for (const auto& s : scope) full += s + ".";
      out.push_back(full + name + (range.rfind("[", 0) == 0 ? range : ""));
    } else if (tok == "$enddefinitions") {
      break;  // the value changes are not needed
    }
  }
  if (out.empty()) throw std::runtime_error(fst_path + ": fst2vcd found no signals");
  return out;
}

std::string without_range(const std::string& name) {
  if (name.empty() || name.back() != ']') return name;
  const auto open = name.rfind('[');
  if (open == std::string::npos || name.find(':', open) == std::string::npos) return name;
  return name.substr(0, open);
}

std::vector<std::string> missing_signals(const std::vector<std::string>& wanted,
                                         const std::vector<std::string>& present) {
  const std::set<std::string> have(present.begin(), present.end());
  std::vector<std::string> miss;
  for (const auto& w : wanted)
    if (!have.count(w)) miss.push_back(w);
  return miss;
}

}  // namespace tpu
