// The command line every bench shares, parsed like tpusim's (sw/common/cli.h, CLI11): bench_cli
// parses a bench's options and runs its body (--help: the usage, exit 0; --check: the line
// checked, exit 0, nothing run; a bad option or value: the message, exit 2; a std::invalid_argument from the body: exit 2; any other failure: exit 1).
// bench_main is the case-list bench: `--list`, `--only CASE[,CASE...]`, and the output: one
// report per case (sw/common/report.h) as a JSON array on stdout, each summary on stderr.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>
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

// Parses argv into app (named after the bench, its options declared) and runs body; returns
// the exit code.
inline int bench_cli(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  bool check = false;
  app.add_flag("--check", check, "check the command line, then stop before the bench: exit 0");
  const int rc = cli::parse(app, argc, argv);
  if (rc >= 0) return rc;
  const std::string tool = app.get_name();
  if (check) {
    std::printf("%s: check passed (the command line; no case run)\n", tool.c_str());
    return 0;
  }
  try {
    return body();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return 1;
  }
}

// Runs the cases named in `only` (every default case when empty).
inline int run_cases(const char* tool, const std::vector<std::string>& only,
                     const std::vector<BenchCase>& cases) {
  bool first = true;
  std::printf("[\n");
  for (const BenchCase& c : cases) {
    if (only.empty() ? !c.by_default : std::find(only.begin(), only.end(), c.name) == only.end())
      continue;
    std::fprintf(stderr, "[%s] %s: %s ...\n", tool, c.name, c.what);  // before a long case
    const Report r = c.run();
    std::fputs(r.summary().c_str(), stderr);
    std::printf("%s%s", first ? "" : ",\n", json_text(r.json()).c_str());
    std::fflush(stdout);
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}

// Runs the cases `argv` selects (`what`: the bench in one line, for --help); returns the exit
// code (2: a bad option or case name). `options` adds a bench's own options to the command line
// (their help and checks from CLI11, as the common ones).
inline int bench_main(const char* tool, const char* what, int argc, char** argv,
                      const std::vector<BenchCase>& cases,
                      const std::function<void(CLI::App&)>& options = nullptr) {
  CLI::App app(what, tool);
  if (options) options(app);
  bool list = false;
  std::string only;
  app.add_flag("--list", list, "list the cases and what each measures");
  const CLI::Validator a_case(
      [&](std::string& v) {
        for (const BenchCase& c : cases)
          if (v == c.name) return std::string();
        return v + " is not a case (" + tool + " --list)";
      },
      "");
  app.add_option("--only", only, "run these cases (default: the bench's default cases)")
      ->type_name("CASE[,CASE...]")
      ->check(cli::list_of(a_case));
  return bench_cli(app, argc, argv, [&] {
    if (list) {
      for (const BenchCase& c : cases) std::printf("%-10s %s\n", c.name, c.what);
      return 0;
    }
    return run_cases(tool, only.empty() ? std::vector<std::string>{} : cli::split_list(only),
                     cases);
  });
}

}  // namespace tpu
