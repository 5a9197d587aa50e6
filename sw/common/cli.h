// The command line every tool shares (tpusim and the benches), on CLI11 (Debian's libcli11-dev):
// the tools declare typed options on a CLI::App, and parse() gives them one help layout, one
// error format (`tool: error: --flag: the rule`, exit 2) and the rules below. The validators here
// are what CLI11 2.1 lacks: strict decimal integers, finite reals, "a,b,c" lists that refuse an
// empty item, FROM:TO spans and output paths checked before a run.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// The hand-rolled parser the tools used before CLI11, until each has moved (then deleted).
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

namespace tpu::cli {

// Parses args (argv without the program name) into `app`, whose options and commands are
// declared. Every option and command gets the shared rules first: -h or --help anywhere on the
// line prints the help (on stdout) and stops; an option given twice is an error unless
// repeatable(); a flag takes no value; an unknown option, command or stray argument is an error
// naming it; an option that needs a value and has none is an error. Returns -1 when the tool is
// to run, 0 after the help, 2 after an error (printed on stderr as "NAME: error: ...", NAME the
// app's name).
int parse(CLI::App& app, const std::vector<std::string>& args);
inline int parse(CLI::App& app, int argc, char** argv) {
  return parse(app, std::vector<std::string>(argv + 1, argv + argc));
}

// The help text of `app` (a tool or one of its commands; `name`: how it is called, e.g.
// "tpusim matmul"): "usage: NAME [options]", the description, the options, the footer. A tool
// with commands lists them after its usage line, then gives each command's help.
std::string help(const CLI::App& app, const std::string& name);

// `opt` may be given again and again (--fault KEY=VALUE): one value each time, all kept in order.
CLI::Option* repeatable(CLI::Option* opt);

// A decimal integer from lo to hi. CLI11 2.1 alone reads "010" as octal, "0x10" as hex and "-1"
// as 2^64 - 1; here each is an error or ten, and the value reaches the option normalized.
CLI::Validator uint_in(uint64_t lo, uint64_t hi);
// A finite number from lo to hi; above lo (not equal) when open_lo.
CLI::Validator real_in(double lo, double hi, bool open_lo = false);
// "a,b,c": at least one item, none empty (CLI11's delimiter drops empty items silently), each
// passing `item` when given.
CLI::Validator list_of();
CLI::Validator list_of(const CLI::Validator& item);
// The items of a list that list_of() accepted.
std::vector<std::string> split_list(const std::string& v);
// "FROM:TO", two decimal integers, FROM < TO.
CLI::Validator span();
// FROM and TO of a span that span() accepted.
std::pair<uint64_t, uint64_t> split_span(const std::string& v);
// An output file, checked when the line is parsed (before a long run): its directory exists, it
// is not a directory, and it can be opened for writing (a file made for the check is removed).
CLI::Validator output_path();

}  // namespace tpu::cli
