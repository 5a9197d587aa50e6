// The command line every tool shares (sw/common/cli.h, CLI11): the validators CLI11 lacks and
// the rules parse() adds (help anywhere, one error line, exit codes, options given twice).
#include "cli.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tpu {
namespace {

std::string check(const CLI::Validator& v, std::string s) { return v(s); }

TEST(CliValidators, UintInIsDecimalAndInRange) {
  const CLI::Validator v = cli::uint_in(1, 65536);
  for (const char* ok : {"1", "64", "65536"}) EXPECT_EQ(check(v, ok), "") << ok;
  // Octal, hex, signs, blanks, exponents, out of range: all refused (CLI11 2.1 alone reads "010"
  // as 8, "0x10" as 16 and "-1" as 2^64 - 1).
  for (const char* bad : {"0", "65537", "010", "0x10", "-1", "+1", "", " 1", "1 ", "1e3", "abc"})
    EXPECT_EQ(check(v, bad), (*bad ? std::string(bad) : "''") + " is not an integer in [1, 65536]")
        << bad;
  const CLI::Validator all = cli::uint_in(0, ~uint64_t{0});
  EXPECT_EQ(check(all, "0"), "");
  EXPECT_EQ(check(all, "18446744073709551615"), "");
  EXPECT_NE(check(all, "18446744073709551616"), "");
}

TEST(CliValidators, RealInIsFiniteAndInRange) {
  const CLI::Validator open = cli::real_in(0, 1, true);
  for (const char* ok : {"1", "0.3", "1e-3"}) EXPECT_EQ(check(open, ok), "") << ok;
  for (const char* bad : {"0", "1.5", "-0.1", "nan", "inf", "0.3x", ""})
    EXPECT_NE(check(open, bad).find("is not a number in (0, 1]"), std::string::npos) << bad;
  EXPECT_EQ(check(cli::real_in(0, 1), "0"), "");
  EXPECT_EQ(check(cli::real_in(0, 1), "2"), "2 is not a number in [0, 1]");
}

TEST(CliValidators, ListsRefuseEmptyItemsAndCheckEach) {
  EXPECT_EQ(check(cli::list_of(), "a,b,c"), "");
  for (const char* bad : {"", ",", "a,,b", ",a", "a,"})
    EXPECT_NE(check(cli::list_of(), bad).find("is not a comma-separated list"), std::string::npos)
        << bad;
  const CLI::Validator chips = cli::list_of(cli::uint_in(0, 3));
  EXPECT_EQ(check(chips, "0,3"), "");
  EXPECT_EQ(check(chips, "0,4"), "4 is not an integer in [0, 3]");
  EXPECT_EQ(cli::split_list("0,3,12"), (std::vector<std::string>{"0", "3", "12"}));
}

TEST(CliValidators, SpansAreFromBelowTo) {
  EXPECT_EQ(check(cli::span(), "0:10"), "");
  for (const char* bad : {"5:3", "3:3", "3", ":3", "3:", "a:b", "-1:3"})
    EXPECT_EQ(check(cli::span(), bad), std::string(bad) + " is not FROM:TO (integers, FROM < TO)")
        << bad;
  EXPECT_EQ(cli::split_span("20000:30000"), (std::pair<uint64_t, uint64_t>{20000, 30000}));
}

TEST(CliValidators, OutputPathsAreCheckedAndLeaveNothingBehind) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/cli_test_out.json";
  std::remove(file.c_str());
  EXPECT_EQ(check(cli::output_path(), file), "");
  EXPECT_FALSE(std::ifstream(file).good()) << "the check left its file";
  EXPECT_EQ(check(cli::output_path(), "/nonexistent_dir/x.json"),
            "/nonexistent_dir/x.json: directory '/nonexistent_dir' does not exist");
  EXPECT_EQ(check(cli::output_path(), dir), dir + ": is a directory");
  EXPECT_NE(check(cli::output_path(), "/proc/cli_test.json").find("cannot be written"),
            std::string::npos);
}

// A tool with one command and a few options, parsed with its output captured.
struct Parsed {
  int code;
  std::string out, err;
  unsigned m;
  std::vector<std::string> faults;
};

Parsed parse_line(const std::vector<std::string>& args) {
  CLI::App tool("", "tool");
  tool.require_subcommand(0, 1);
  CLI::App* cmd = tool.add_subcommand("cmd", "the command");
  unsigned m = 64;
  bool quiet = false;
  std::string out;
  std::vector<std::string> faults;
  cmd->add_option("--m", m, "rows")->type_name("M")->check(cli::uint_in(1, 100));
  cmd->add_flag("--quiet", quiet, "no progress line");
  cmd->add_option("--out", out, "a file")->type_name("FILE");
  cli::repeatable(cmd->add_option("--fault", faults, "a fault"))->type_name("KEY=VALUE");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = cli::parse(tool, args);
  const std::string o = ::testing::internal::GetCapturedStdout();
  return Parsed{code, o, ::testing::internal::GetCapturedStderr(), m, faults};
}

TEST(CliParse, HelpAnywhereOnTheLineWinsAndGoesToStdout) {
  for (const std::vector<std::string>& line :
       {std::vector<std::string>{"cmd", "--help"}, {"cmd", "-h"}, {"cmd", "--m", "abc", "-h"},
        {"cmd", "--bogus", "--help"}, {"cmd", "--m", "5", "--m", "6", "--help"}}) {
    const Parsed r = parse_line(line);
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out.find("usage: tool cmd [options]\nthe command\noptions:\n"), 0u) << r.out;
    EXPECT_NE(r.out.find("  --m M"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
  }
  const Parsed top = parse_line({"--help"});
  EXPECT_EQ(top.code, 0);
  EXPECT_EQ(top.out.find("usage: tool COMMAND [options]"), 0u) << top.out;
  EXPECT_LT(top.out.find("commands:\n  cmd"), top.out.find("usage: tool cmd")) << top.out;
}

TEST(CliParse, EveryErrorIsOneLineNamingTheFlagExitTwo) {
  struct Case {
    std::vector<std::string> line;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"cmd", "--m", "0"}, "tool: error: --m: 0 is not an integer in [1, 100]\n"},
      {{"cmd", "--m"}, "tool: error: --m needs a value\n"},
      {{"cmd", "--m="}, "tool: error: --m needs a value\n"},
      {{"cmd", "--m", "5", "--m", "6"}, "tool: error: --m is given twice\n"},
      {{"cmd", "--quiet", "--quiet"}, "tool: error: --quiet is given twice\n"},
      {{"cmd", "--quiet=0"}, "tool: error: --quiet takes no value (--quiet=0)\n"},
      {{"cmd", "--bogus", "1"},
       "tool: error: unknown option '--bogus' (tool cmd --help: the options)\n"},
      {{"cmd", "7"}, "tool: error: unexpected argument '7' (tool cmd --help: the options)\n"},
      {{"cmd", "cmd"}, "tool: error: unexpected argument 'cmd' (tool cmd --help: the options)\n"},
      {{"other"}, "tool: error: unknown command 'other' (tool --help: the commands)\n"},
      {{"--bogus"}, "tool: error: unknown option '--bogus' (tool --help: the options)\n"},
  };
  for (const Case& c : cases) {
    const Parsed r = parse_line(c.line);
    EXPECT_EQ(r.code, 2) << c.err;
    EXPECT_EQ(r.err, c.err);
    EXPECT_EQ(r.out, "");
  }
  // No command: the help, on stderr.
  const Parsed none = parse_line({});
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err.find("usage: tool COMMAND"), 0u) << none.err;
}

TEST(CliParse, AGoodLineRunsRepeatableOptionsKeptInOrder) {
  const Parsed r = parse_line({"cmd", "--m=7", "--fault", "a=1", "--quiet", "--fault", "b=2"});
  EXPECT_EQ(r.code, -1) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.m, 7u);
  EXPECT_EQ(r.faults, (std::vector<std::string>{"a=1", "b=2"}));
  // One value per --fault: a second word is a stray argument, not a second fault.
  EXPECT_EQ(parse_line({"cmd", "--fault", "a=1", "b=2"}).code, 2);
}

}  // namespace
}  // namespace tpu
