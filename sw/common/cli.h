// The command line every tool shares (tpusim and the benches): options with and without values,
// checked integer and real values, `--help`, and output paths checked before a run. A bad option
// or value is std::invalid_argument naming the flag and the rule; the tools turn it into exit 2.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {

using Opts = std::map<std::string, std::string>;

// Thrown by parse_cli for --help / -h: what() is the usage text (the tool prints it on stdout
// and exits 0).
struct HelpRequested : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CliSpec {
  std::vector<std::string> valued;      // options that take a value
  std::vector<std::string> flags;       // options without one
  std::vector<std::string> repeatable;  // valued options that may come again: values joined by '\n'
  std::vector<std::string> out_paths;   // output files, checked (directory exists, writable)
  std::string usage;                    // ends an unknown option's message; --help prints it
};

// Parses args (argv without the program or command name). An unknown option (the message ends
// with the usage), a missing value, an option given twice (unless repeatable) is
// std::invalid_argument; --help or -h throws HelpRequested.
Opts parse_cli(const std::vector<std::string>& args, const CliSpec& spec);
// Option `k`, or `d` when it was not given.
std::string get(const Opts& opt, const char* k, const std::string& d);

// The value of option `flag`: an integer from lo to hi, else std::invalid_argument naming both.
uint64_t parse_uint(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi);
// A finite real from lo to hi, else std::invalid_argument naming both.
double parse_real(const std::string& flag, const std::string& v, double lo, double hi);
// "a,b,c" -> {"a", "b", "c"}; an empty item is std::invalid_argument naming the flag.
std::vector<std::string> parse_list(const std::string& flag, const std::string& v);

// An output path, checked before a long run: its directory exists and is writable, and the
// path is not a directory or a read-only file. std::invalid_argument naming the flag and path.
void check_output_path(const std::string& flag, const std::string& path);

}  // namespace tpu
