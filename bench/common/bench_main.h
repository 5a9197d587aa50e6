// The command line every bench shares, parsed by the same code as tpusim's (sw/common/cli.h):
// bench_cli runs a bench's body with its parsed options (--help: the usage, exit 0; a bad option
// or value: the message, exit 2; any other failure: exit 1). bench_main is the case-list bench:
// `--list`, `--only CASE[,CASE...]`, and the output: one report per case (sw/common/report.h) as
// a JSON array on stdout, each summary on stderr.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "report.h"

namespace tpu {

struct BenchCase {
  const char* name;
  const char* what;                 // one line for --list
  std::function<Report()> run;
  bool by_default = true;           // run without --only
};

// Parses argv by `spec` and runs body; returns the exit code.
inline int bench_cli(const char* tool, int argc, char** argv, const CliSpec& spec,
                     const std::function<int(const Opts&)>& body) {
  try {
    const Opts opt = parse_cli(std::vector<std::string>(argv + 1, argv + argc), spec);
    return body(opt);
  } catch (const HelpRequested& h) {
    std::fputs(h.what(), stdout);
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return 1;
  }
}

// Runs the cases named in `only` (every default case when empty).
inline int run_cases(const char* tool, const std::vector<std::string>& only,
                     const std::vector<BenchCase>& cases) {
  for (const std::string& o : only) {
    if (std::none_of(cases.begin(), cases.end(), [&](const BenchCase& c) { return o == c.name; })) {
      std::fprintf(stderr, "%s: --only %s: not a case (%s --list)\n", tool, o.c_str(), tool);
      return 2;
    }
  }
  bool first = true;
  std::printf("[\n");
  for (const BenchCase& c : cases) {
    if (only.empty() ? !c.by_default : std::find(only.begin(), only.end(), c.name) == only.end())
      continue;
    std::fprintf(stderr, "[%s] %s: %s ...\n", tool, c.name, c.what);  // before a long case
    const Report r = c.run();
    std::fputs(r.summary().c_str(), stderr);
    std::printf("%s%s", first ? "" : ",\n", r.json().dump(2).c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}


// Runs the cases `argv` selects; returns the exit code (2: a bad option or case name).
inline int bench_main(const char* tool, int argc, char** argv,
                      const std::vector<BenchCase>& cases) {
  CliSpec spec;
  spec.valued = {"--only"};
  spec.flags = {"--list"};
  spec.usage = std::string("usage: ") + tool + " [--only CASE[,CASE...]] [--list]\n";
  return bench_cli(tool, argc, argv, spec, [&](const Opts& opt) {
    if (opt.count("--list")) {
      for (const BenchCase& c : cases) std::printf("%-10s %s\n", c.name, c.what);
      return 0;
    }
    const std::vector<std::string> only =
        opt.count("--only") ? parse_list("--only", opt.at("--only")) : std::vector<std::string>{};
    return run_cases(tool, only, cases);
  });
}

}  // namespace tpu
