// The command line every tool shares (sw/common/cli.h, CLI11): the validators CLI11 lacks and
// the rules parse() adds (help anywhere, one error line, exit codes, options given twice).
#include "cli.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
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
  for (const char* ok : {"1", "0.3", "1e-3", ".5", "1.", "5E-1", "0.05e+1", "1e0"})
    EXPECT_EQ(check(open, ok), "") << ok;
  for (const char* bad : {"0", "1.5", "-0.1", "nan", "inf", "0.3x", ""})
    EXPECT_NE(check(open, bad).find("is not a number in (0, 1]"), std::string::npos) << bad;
  // Decimal only: strtod alone reads hex floats, inf and nan in any case, a leading sign or
  // blanks; each is refused, named like a number out of range.
  for (const char* bad : {"0x1p-1", "0X.8P0", "0x1", "INF", "infinity", "NaN", "+0.5", " 0.5",
                          "0.5 ", ".", "e-1", "1e", "1e+", "0.5.1", "1e-1.5", "0,5"})
    EXPECT_EQ(check(open, bad), std::string(bad) + " is not a number in (0, 1]") << bad;
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
  double lr;
};

Parsed parse_line(const std::vector<std::string>& args) {
  CLI::App tool("", "tool");
  tool.require_subcommand(0, 1);
  CLI::App* cmd = tool.add_subcommand("cmd", "the command");
  unsigned m = 64;
  bool quiet = false;
  double lr = 0.5;
  std::string out, in, in2, json, save;
  std::vector<std::string> faults;
  cmd->add_option("--m", m, "rows")->type_name("M")->check(cli::uint_in(1, 100));
  cmd->add_flag("--quiet", quiet, "no progress line");
  cmd->add_option("--out", out, "a file")->type_name("FILE")->check(cli::output_path());
  cli::repeatable(cmd->add_option("--fault", faults, "a fault"))->type_name("KEY=VALUE");
  cmd->add_option("--in", in, "an input")->type_name("FILE")->check(cli::input_path());
  cmd->add_option("--in2", in2, "another input")->type_name("FILE")->check(cli::input_path());
  cmd->add_option("--json", json, "another output")->type_name("FILE")->check(cli::output_path());
  cmd->add_option("--save", save, "an output directory")
      ->type_name("DIR")
      ->check(cli::output_dir());
  cmd->add_option("--lr", lr, "a real")->type_name("LR")->check(cli::real_in(0, 10, true));
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = cli::parse(tool, args);
  const std::string o = ::testing::internal::GetCapturedStdout();
  return Parsed{code, o, ::testing::internal::GetCapturedStderr(), m, faults, lr};
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

// Runs the test in a fresh directory of its own (restored at the end), so that a file a parse
// might make by mistake is seen.
class InTempDir {
 public:
  explicit InTempDir(const std::string& name)
      : dir_(::testing::TempDir() + "cli_test_" + name + "_" + std::to_string(::getpid())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    old_ = std::filesystem::current_path();
    std::filesystem::current_path(dir_);
  }
  ~InTempDir() {
    std::filesystem::current_path(old_);
    std::filesystem::remove_all(dir_);
  }
  InTempDir(const InTempDir&) = delete;
  InTempDir& operator=(const InTempDir&) = delete;
  const std::string& dir() const { return dir_; }
  // The names in the directory.
  std::vector<std::string> files() const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      v.push_back(e.path().filename().string());
    return v;
  }

 private:
  std::string dir_;
  std::filesystem::path old_;
};

TEST(CliParse, AValueThatStartsWithTwoDashesIsAMissingValue) {
  const InTempDir tmp("dashes");
  struct Case {
    std::vector<std::string> line;
    std::string err;
  };
  const std::string dash_path = "; a path that starts with a dash is written ./";
  const std::vector<Case> cases = {
      {{"cmd", "--out", "--quiet"},
       "tool: error: --out needs a value ('--quiet' is an option" + dash_path + "--quiet)\n"},
      {{"cmd", "--out=--quiet"},
       "tool: error: --out needs a value ('--quiet' is an option" + dash_path + "--quiet)\n"},
      {{"cmd", "--json", "--out", "x.json"},
       "tool: error: --json needs a value ('--out' is an option" + dash_path + "--out)\n"},
      {{"cmd", "--in", "--m=3"},
       "tool: error: --in needs a value ('--m=3' is an option" + dash_path + "--m=3)\n"},
      {{"cmd", "--save", "--bogus"},
       "tool: error: --save needs a value ('--bogus' looks like an option" + dash_path +
           "--bogus)\n"},
      {{"cmd", "--m", "--quiet"}, "tool: error: --m needs a value ('--quiet' is an option)\n"},
      {{"cmd", "--lr", "--"}, "tool: error: --lr needs a value ('--' looks like an option)\n"},
      {{"cmd", "--fault", "a=1", "--fault", "--quiet"},
       "tool: error: --fault needs a value ('--quiet' is an option)\n"},
  };
  for (const Case& c : cases) {
    const Parsed r = parse_line(c.line);
    EXPECT_EQ(r.code, 2) << c.err;
    EXPECT_EQ(r.err, c.err);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_TRUE(tmp.files().empty()) << "a parse made " << tmp.files().front();
  // Written as a path, it is one; "--" inside a value is no option; the help still wins.
  EXPECT_EQ(parse_line({"cmd", "--out", "./--quiet"}).code, -1);
  EXPECT_EQ(parse_line({"cmd", "--out", tmp.dir() + "/a--quiet"}).code, -1);
  EXPECT_EQ(parse_line({"cmd", "--fault", "link_down=1:-X@0"}).code, -1);
  const Parsed help = parse_line({"cmd", "--out", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out.find("usage: tool cmd [options]"), 0u) << help.out;
}

TEST(CliParse, AnEmptyValueIsAnError) {
  for (const char* flag : {"--m", "--out", "--in", "--save", "--lr", "--fault"}) {
    const Parsed r = parse_line({"cmd", flag, ""});
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_EQ(r.err, "tool: error: " + std::string(flag) + ": the value is empty\n");
    const Parsed eq = parse_line({"cmd", std::string(flag) + "="});
    EXPECT_EQ(eq.code, 2) << flag;
    EXPECT_EQ(eq.err, "tool: error: " + std::string(flag) + " needs a value\n");
  }
  // An empty word that is no option's value is a stray argument, as before.
  EXPECT_EQ(parse_line({"cmd", "--quiet", ""}).err,
            "tool: error: unexpected argument '' (tool cmd --help: the options)\n");
}

TEST(CliParse, AnOutputNeverNamesAnInputsOrAnotherOutputsFile) {
  const InTempDir tmp("paths");
  std::ofstream("in.npy") << "x";
  std::filesystem::create_directory("d");
  const std::string abs = tmp.dir() + "/in.npy";
  struct Case {
    std::vector<std::string> line;
    std::string err;
  };
  const std::string over = " (an output must not overwrite an input)\n";
  const std::string own = " (each output needs a path of its own)\n";
  const std::vector<Case> cases = {
      {{"cmd", "--in", "in.npy", "--out", "in.npy"},
       "tool: error: --out: in.npy is the file of --in in.npy" + over},
      {{"cmd", "--out", "./in.npy", "--in", abs},
       "tool: error: --out: ./in.npy is the file of --in " + abs + over},
      {{"cmd", "--in2", "in.npy", "--json", "d/../in.npy"},
       "tool: error: --json: d/../in.npy is the file of --in2 in.npy" + over},
      {{"cmd", "--out", "new.json", "--json", "./d/../new.json"},
       "tool: error: --json: ./d/../new.json is the file of --out new.json" + own},
      {{"cmd", "--save", "run", "--out", "run"},
       "tool: error: --save: run is the file of --out run" + own},
      {{"cmd", "--save", "d/../d", "--in", "d"},
       "tool: error: --save: d/../d is the file of --in d" + over},
  };
  for (const Case& c : cases) {
    const Parsed r = parse_line(c.line);
    EXPECT_EQ(r.code, 2) << c.err;
    EXPECT_EQ(r.err, c.err);
  }
  // A hard link is the file it links.
  std::filesystem::create_hard_link("in.npy", "link.npy");
  EXPECT_EQ(parse_line({"cmd", "--in", "in.npy", "--out", "link.npy"}).err,
            "tool: error: --out: link.npy is the file of --in in.npy" + over);
  EXPECT_EQ(std::ifstream("in.npy").get(), 'x') << "the input was touched";
  // What may share a path: two inputs; outputs to a character device.
  for (const std::vector<std::string>& ok :
       {std::vector<std::string>{"cmd", "--in", "in.npy", "--in2", "./in.npy"},
        {"cmd", "--out", "/dev/null", "--json", "/dev/null"},
        {"cmd", "--in", "in.npy", "--out", "d/in.npy", "--json", "in.json", "--save", "run"}}) {
    const Parsed r = parse_line(ok);
    EXPECT_EQ(r.code, -1) << r.err;
  }
}

TEST(CliParse, RealsAreDecimalOnTheLine) {
  EXPECT_EQ(parse_line({"cmd", "--lr", "2.5e-1"}).lr, 0.25);
  for (const char* bad : {"0x1p-1", "inf", "nan", "+1"}) {
    const Parsed r = parse_line({"cmd", "--lr", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(r.err, "tool: error: --lr: " + std::string(bad) + " is not a number in (0, 10]\n");
  }
}

}  // namespace
}  // namespace tpu
