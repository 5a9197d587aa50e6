// The command line every tool shares (tpusim and the benches), on CLI11 (Debian's libcli11-dev):
// the tools declare typed options on a CLI::App, and parse() gives them one help layout, one
// error format (`tool: error: --flag: the rule`, exit 2) and the rules below. The validators here
// are what CLI11 2.1 lacks: strict decimal integers, finite reals, "a,b,c" lists that refuse an
// empty item, FROM:TO spans and output paths checked before a run.
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
