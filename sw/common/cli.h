// The command line every tool shares (tpusim and the benches), on CLI11 (Debian's libcli11-dev):
// the tools declare typed options on a CLI::App, and parse() gives them one help layout, one
// error format (`tool: error: --flag: the rule`, exit 2) and the rules below. The validators here
// are what CLI11 2.1 lacks: strict decimal integers, finite decimal reals, "a,b,c" lists that
// refuse an empty item, FROM:TO spans, and the files a tool reads and writes (input_path,
// output_path, output_dir), checked before a run and against each other.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpu::cli {

// Parses args (argv without the program name) into `app`, whose options and commands are
// declared. Every option and command gets the shared rules first: -h or --help anywhere on the
// line prints the help (on stdout) and stops; an option given twice is an error unless
// repeatable(); a flag takes no value; an unknown option, command or stray argument is an error
// naming it; an option that needs a value and has none is an error. A value is never empty and
// never starts with "--" (`--json --quiet` is a missing value, not a file named --quiet; a path
// that starts with a dash is written ./--quiet), checked before any validator runs. Every output
// (output_path, output_dir) must name another file than every input (input_path) and every other
// output, compared as resolved paths (./x, x and d/../x are one file; a hard link is its
// target; character devices such as /dev/null are exempt). Returns -1 when the tool is to run,
// 0 after the help, 2 after an error (printed on stderr as "NAME: error: ...", NAME the app's
// name).
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
// A number from lo to hi written in decimal (digits, at most one point, an optional exponent
// e or E with an optional sign; no sign in front, no hex, inf or nan); above lo when open_lo.
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
// It also marks the option as an output for parse()'s rule that outputs and inputs differ.
CLI::Validator output_path();
// An output directory (a run saved as files in it), checked when the line is parsed (before a
// long run): a directory this process can write into (a file made in it and removed), or one
// that does not exist and can be made (made and removed again; /proc/run cannot). Marks the
// option as an output, like output_path().
CLI::Validator output_dir();
// Marks an option as a file the tool reads (checks nothing itself: the reader names the file
// and the rule), for parse()'s rule that no output overwrites it.
CLI::Validator input_path();

}  // namespace tpu::cli
