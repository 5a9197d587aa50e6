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

namespace {

using Pipe = std::unique_ptr<FILE, int (*)(FILE*)>;

Pipe fst2vcd(const std::string& fst_path) {
  const std::string cmd = "fst2vcd '" + fst_path + "' 2>/dev/null";
  Pipe p(popen(cmd.c_str(), "r"), pclose);
  if (!p) throw std::runtime_error("cannot run fst2vcd");
  return p;
}

// Reads the declarations of fst2vcd's output, up to $enddefinitions: `on_var` gets each
// variable's full name ("scope.sub.name", with its bit range when it has one) and its id code.
// `timescale`, when given, gets the $timescale ("1ps").
template <class OnVar>
void read_declarations(FILE* p, OnVar on_var, std::string* timescale = nullptr) {
  std::vector<std::string> scope;
  char buf[4096];
  bool in_timescale = false;
  while (std::fgets(buf, sizeof buf, p)) {
    std::istringstream ss(buf);
    std::string tok;
    ss >> tok;
    if (tok == "$timescale" || in_timescale) {  // "$timescale 1ps $end", or over three lines
      in_timescale = true;
      for (std::string t = tok; !t.empty() || ss >> t; t.clear()) {
        if (t == "$end") {
          in_timescale = false;
          break;
        }
        if (t != "$timescale" && timescale) *timescale += t;
      }
    } else if (tok == "$scope") {
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
      on_var(full + name + (range.rfind("[", 0) == 0 ? range : ""), id);
    } else if (tok == "$enddefinitions") {
      return;
    }
  }
}

// A VCD value change: "b0101 id" for a vector (or "r1.5 id"), "1id" for a scalar. False for a
// vector line without its id.
bool value_change(const std::string& line, std::string& value, std::string& id) {
  if (line[0] == 'b' || line[0] == 'r') {
    const auto sp = line.find(' ');
    if (sp == std::string::npos) return false;
    value = line.substr(1, sp - 1);
    id = line.substr(sp + 1);
  } else {
    value = line.substr(0, 1);
    id = line.substr(1);
  }
  return true;
}

}  // namespace

std::vector<std::string> fst_signals(const std::string& fst_path) {
  Pipe p = fst2vcd(fst_path);
  std::vector<std::string> out;
  read_declarations(p.get(), [&](const std::string& name, const std::string&) {
    out.push_back(name);
  });  // the value changes are not needed
  if (out.empty()) throw std::runtime_error(fst_path + ": fst2vcd found no signals");
  return out;
}

std::map<std::string, std::string> fst_last_values(const std::string& fst_path,
                                                   const std::vector<std::string>& names) {
  const std::set<std::string> wanted(names.begin(), names.end());
  std::map<std::string, std::vector<std::string>> by_id;  // id code -> wanted names (aliases)
  Pipe p = fst2vcd(fst_path);
  bool any = false;
  read_declarations(p.get(), [&](const std::string& name, const std::string& id) {
    any = true;
    const std::string bare = without_range(name);
    if (wanted.count(bare)) by_id[id].push_back(bare);
  });
  if (!any) throw std::runtime_error(fst_path + ": fst2vcd found no signals");
  std::map<std::string, std::string> out;
  char buf[8192];
  while (std::fgets(buf, sizeof buf, p.get())) {
    // "b0101 id" for a vector, "1id" for a scalar; times (#t) and keywords ($...) carry none.
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[0] == '#' || line[0] == '$') continue;
    std::string value, id;
    if (!value_change(line, value, id)) continue;
    const auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    for (const auto& n : it->second) out[n] = value;
  }
  return out;
}

FstChanges fst_changes(const std::string& fst_path, const std::vector<std::string>& names) {
  const std::set<std::string> wanted(names.begin(), names.end());
  std::map<std::string, std::vector<std::string>> by_id;  // id code -> wanted names (aliases)
  Pipe p = fst2vcd(fst_path);
  FstChanges out;
  bool any = false;
  read_declarations(
      p.get(),
      [&](const std::string& name, const std::string& id) {
        any = true;
        const std::string bare = without_range(name);
        if (wanted.count(bare)) by_id[id].push_back(bare);
      },
      &out.timescale);
  if (!any) throw std::runtime_error(fst_path + ": fst2vcd found no signals");
  uint64_t now = 0;
  char buf[8192];
  while (std::fgets(buf, sizeof buf, p.get())) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[0] == '$') continue;
    if (line[0] == '#') {
      now = std::stoull(line.substr(1));
      out.times.push_back(now);
      continue;
    }
    std::string value, id;
    if (!value_change(line, value, id)) continue;
    const auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    for (const auto& n : it->second) out.changes[n].push_back({now, value});
  }
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
