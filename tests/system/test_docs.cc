// Every command the README and docs/*.md show is run here, as a user would type it: each line of
// a code block (and each inline code span) that starts with build/sw/tpusim, tpusim, mpirun,
// build/bench/... or gtkwave, continuation lines joined, comments dropped. Each runs in a scratch
// directory of its own where build/, configs/ and waves/*.gtkw are those of this tree, with the
// .npy inputs the README's lines name (A.npy, W.npy, B.npy). It must exit 0.
// - gtkwave FST GTKW: checked after the command before it that writes FST: every signal the
//   .gtkw shows, bit range included, must be in the dump (tb/common/wave_check.h).
// - A command shown in several places runs once. Synopsis lines ("[...]", "a|b", "...",
//   "<test>"), a folder ("build/") and a bare "tpusim train" in prose are not
//   commands and are left out (is_command); so are scripts/*.sh
//   (scripts/test.sh is CI's own command, .ci/run; scripts/run.sh builds, then runs the train
//   and pod commands RunScriptsJob checks against its own text).
// - The GTKWave save files' headers too: "[*] Dump: CMD" and "[*] Open: gtkwave FST GTKW".
// - DocsChecks (label system, the default suite): every command with --check, which checks the
//   line, the config, the inputs and the plan and stops before the first simulated cycle (a few
//   seconds for all). DocsRuns (label soak): every command run in full, the dumps checked
//   against their save files (tens of minutes: 4 MiB all-reduces, 20 training steps, benches).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_run.h"
#include "npy.h"
#include "wave_check.h"

namespace tpu {
namespace {

namespace fs = std::filesystem;

struct DocCommand {
  std::string file;   // e.g. README.md, docs/pod.md
  int line = 0;       // where the command starts
  std::string text;   // the command, one line
  // The gtkwave lines that open what this command dumps: {dump, save file}. A gtkwave line
  // whose dump no command before it writes stays a command of its own (and fails).
  std::vector<std::pair<std::string, std::string>> waves;
  int nth = 0;        // the how-manieth command on its line (inline spans), from 0
};

// gtest's name for a parameter (else it prints the bytes).
void PrintTo(const DocCommand& c, std::ostream* os) {
  *os << c.file << ":" << c.line << ": " << c.text;
  for (const auto& w : c.waves) *os << "; gtkwave " << w.first << " " << w.second;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const auto b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

// "cmd args   # comment" -> "cmd args" (a '#' after a blank starts a comment).
std::string drop_comment(const std::string& s) {
  for (std::size_t i = 1; i < s.size(); ++i)
    if (s[i] == '#' && (s[i - 1] == ' ' || s[i - 1] == '\t')) return trim(s.substr(0, i));
  return trim(s);
}

// A command: build/..., gtkwave ..., or tpusim/mpirun with at least one flag ("tpusim train" in
// prose names the command, it is not one to run); never a synopsis or a placeholder ("[...]",
// "a|b", "...", "<test>").
bool is_command(const std::string& t) {
  for (const char* p : {"...", "<", "[", "|"})
    if (t.find(p) != std::string::npos) return false;
  const std::string first = t.substr(0, t.find(' '));
  if (first.rfind("build/", 0) == 0) return first.back() != '/';  // not a folder's name
  if (first == "gtkwave") return true;
  return (t.rfind("tpusim ", 0) == 0 || t.rfind("mpirun ", 0) == 0) &&
         t.find(" --") != std::string::npos;
}

// The inline code spans of a paragraph (its lines joined by blanks; a span may cross a line
// break) that are commands, each at the line where it starts.
void span_commands(const std::string& rel, const std::vector<std::pair<int, std::string>>& para,
                   std::vector<DocCommand>& out) {
  std::string text;
  std::vector<std::pair<std::size_t, int>> starts;  // offset in text -> line
  for (const auto& [n, l] : para) {
    starts.push_back({text.size(), n});
    text += l + " ";
  }
  static const std::regex span("`([^`]+)`");
  std::map<int, int> nth;
  for (std::sregex_iterator it(text.begin(), text.end(), span), end; it != end; ++it) {
    std::string c = trim((*it)[1].str());
    c = std::regex_replace(c, std::regex("  +"), " ");
    if (!is_command(c)) continue;
    int line = starts.front().second;
    for (const auto& [off, n] : starts)
      if (off <= static_cast<std::size_t>(it->position(0))) line = n;
    out.push_back({rel, line, c, {}, nth[line]++});
  }
}

// The commands of a Markdown file (code blocks, inline spans) or of a GTKWave save file (its
// "[*] Dump: CMD" and "[*] Open: gtkwave FST GTKW" header lines).
std::vector<DocCommand> commands_of(const std::string& rel) {
  std::ifstream in(std::string(TPU_SOURCE_DIR) + "/" + rel);
  std::vector<DocCommand> out;
  std::string raw;
  int n = 0;
  if (fs::path(rel).extension() == ".gtkw") {
    const std::regex head(R"(\[\*\] (Dump|Open): (.*))");
    std::smatch m;
    while (std::getline(in, raw))
      if (++n, std::regex_match(raw, m, head) && is_command(trim(m[2].str())))
        out.push_back({rel, n, trim(m[2].str()), {}, 0});
    return out;
  }
  bool fenced = false;
  std::string pending;  // a command continued with '\'
  int pending_line = 0;
  std::vector<std::pair<int, std::string>> para;  // prose lines up to a blank one
  while (std::getline(in, raw)) {
    ++n;
    const std::string t = trim(raw);
    if (t.rfind("```", 0) == 0) {
      span_commands(rel, para, out);
      para.clear();
      fenced = !fenced;
      continue;
    }
    if (!fenced) {
      if (t.empty()) {
        span_commands(rel, para, out);
        para.clear();
      } else {
        para.push_back({n, t});
      }
      continue;
    }
    std::string c = drop_comment(t.rfind("$ ", 0) == 0 ? t.substr(2) : t);
    const bool cont = !c.empty() && c.back() == '\\';
    if (cont) c = trim(c.substr(0, c.size() - 1));
    if (!pending.empty()) {
      pending += " " + c;
    } else if (!c.empty()) {
      pending = c;
      pending_line = n;
    }
    if (!cont && !pending.empty()) {
      if (is_command(pending)) out.push_back({rel, pending_line, pending, {}, 0});
      pending.clear();
    }
  }
  span_commands(rel, para, out);
  return out;
}

// Each gtkwave line goes to the command before it (in the same file) that writes its dump.
void pair_waves(std::vector<DocCommand>& cmds) {
  std::vector<DocCommand> out;
  for (const DocCommand& c : cmds) {
    if (c.text.rfind("gtkwave ", 0) != 0) {
      out.push_back(c);
      continue;
    }
    std::istringstream ss(c.text);
    std::string g, fst, gtkw;
    ss >> g >> fst >> gtkw;
    const bool pod = std::regex_match(fst, std::regex("waves/pod_chip[0-9]+\\.fst"));
    bool paired = false;
    for (std::size_t j = out.size(); j-- > 0 && !paired;) {
      const std::string& t = out[j].text;
      if (t.rfind("gtkwave ", 0) == 0) continue;
      if (t.find("--waves " + fst) != std::string::npos ||
          (pod && t.find("--waves-chips") != std::string::npos)) {
        out[j].waves.push_back({fst, gtkw});
        paired = true;
      }
    }
    if (!paired) out.push_back(c);
  }
  cmds = out;
}

std::vector<DocCommand> all_commands() {
  std::vector<std::string> files = {"README.md"};
  std::vector<std::string> docs;
  for (const auto& e : fs::directory_iterator(std::string(TPU_SOURCE_DIR) + "/docs"))
    if (e.path().extension() == ".md") docs.push_back("docs/" + e.path().filename().string());
  for (const auto& e : fs::directory_iterator(std::string(TPU_SOURCE_DIR) + "/waves"))
    if (e.path().extension() == ".gtkw") docs.push_back("waves/" + e.path().filename().string());
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  std::vector<DocCommand> all, picked;
  for (const auto& f : files) {
    auto c = commands_of(f);
    pair_waves(c);
    all.insert(all.end(), c.begin(), c.end());
  }
  // A command shown twice runs once (where it is first shown).
  std::set<std::string> seen;
  for (const auto& c : all) {
    std::string key = (c.text.rfind("tpusim ", 0) == 0 ? "build/sw/" : "") + c.text;
    for (const auto& w : c.waves) key += "\n" + w.first + " " + w.second;
    if (seen.insert(key).second) picked.push_back(c);
  }
  return picked;
}

// "README.md" line 42 -> "README_42"; "docs/pod.md" line 9 -> "pod_9", its second command on
// that line "pod_9_1"; "waves/chip.gtkw" line 3 -> "chip_gtkw_3".
std::string id_of(const DocCommand& c) {
  const fs::path p(c.file);
  std::string f = p.stem().string() + (p.extension() == ".gtkw" ? "_gtkw" : "");
  for (char& ch : f)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return f + "_" + std::to_string(c.line) + (c.nth ? "_" + std::to_string(c.nth) : "");
}

std::string test_name(const ::testing::TestParamInfo<DocCommand>& p) { return id_of(p.param); }

// A scratch directory like the source tree's root, for one command.
std::string scratch(const DocCommand& c) {
  const fs::path d =
      fs::temp_directory_path() / ("tpu_docs_" + std::to_string(::getpid()) + "_" + id_of(c));
  fs::remove_all(d);
  fs::create_directories(d / "waves");
  fs::create_directories(d / "out");
  fs::create_directory_symlink(TPU_BINARY_DIR, d / "build");
  fs::create_directory_symlink(std::string(TPU_SOURCE_DIR) + "/configs", d / "configs");
  for (const auto& e : fs::directory_iterator(std::string(TPU_SOURCE_DIR) + "/waves"))
    if (e.path().extension() == ".gtkw") fs::create_symlink(e.path(), d / "waves" / e.path().filename());
  // The README's inputs: A (20x12), W (12x9) and an 80-wide bias, f32 (rounded to bf16 on load).
  std::vector<float> a(20 * 12), w(12 * 9), b(80);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) / 16.0f;
  write_npy_f32((d / "A.npy").string(), a, {20, 12});
  write_npy_f32((d / "W.npy").string(), w, {12, 9});
  write_npy_f32((d / "B.npy").string(), b, {80});
  return d.string();
}

// A command line as the shell in `dir` runs it: bare `tpusim` is the one built here; mpirun may
// run as root (as CI does) and is bounded (Debian's launcher can hang in its own finalize).
std::string shell_line(const std::string& dir, std::string t) {
  if (t.rfind("tpusim ", 0) == 0) t = "build/sw/" + t;
  if (t.rfind("mpirun ", 0) == 0) {
    t = "timeout -k 10 600 mpirun" + std::string(::geteuid() == 0 ? " --allow-run-as-root" : "") +
        " --oversubscribe" + t.substr(6);
  }
  return "cd '" + dir + "' && " + t;
}

// Runs c in a scratch directory: in full (waves checked), or with --check.
void run_doc_command(const DocCommand& c, bool check) {
  const std::string dir = scratch(c);
  SCOPED_TRACE(c.file + ":" + std::to_string(c.line) + ": " + c.text);
  ASSERT_NE(c.text.rfind("gtkwave ", 0), 0u)
      << "no command before it in " << c.file << " writes the dump it opens";
  // --help is its own check: it prints the usage and runs nothing.
  const bool help = c.text.find(" --help") != std::string::npos;
  const bool has_check = c.text.find(" --check") != std::string::npos;
  const CliRun r =
      run_command(shell_line(dir, c.text + (check && !help && !has_check ? " --check" : "")));
  EXPECT_EQ(r.code, 0) << r.out;
  if (check && !help) {
    EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
  } else {
    for (const auto& [fst, gtkw] : c.waves) {
      const auto wanted = gtkw_signals(dir + "/" + gtkw);
      ASSERT_FALSE(wanted.empty()) << gtkw;
      EXPECT_EQ(missing_signals(wanted, fst_signals(dir + "/" + fst)),
                std::vector<std::string>{})
          << "gtkwave " << fst << " " << gtkw;
    }
  }
  fs::remove_all(dir);
}

class DocsChecks : public ::testing::TestWithParam<DocCommand> {};
TEST_P(DocsChecks, PassTheirCheck) { run_doc_command(GetParam(), true); }
INSTANTIATE_TEST_SUITE_P(Docs, DocsChecks, ::testing::ValuesIn(all_commands()), test_name);

class DocsRuns : public ::testing::TestWithParam<DocCommand> {};
TEST_P(DocsRuns, RunAsShown) { run_doc_command(GetParam(), false); }
INSTANTIATE_TEST_SUITE_P(Docs, DocsRuns, ::testing::ValuesIn(all_commands()), test_name);

// The extraction itself: the README's quick start and usage block are found, continuations
// joined, comments dropped, synopsis lines left out, every gtkwave line paired with its dump.
TEST(DocsExtraction, FindsTheReadmesCommands) {
  const auto c = all_commands();
  auto has = [&](const std::string& s) {
    return std::any_of(c.begin(), c.end(), [&](const DocCommand& d) { return d.text == s; });
  };
  EXPECT_TRUE(has("build/sw/tpusim matmul --m 300 --k 70 --n 40 --seed 7"));
  EXPECT_TRUE(has("build/sw/tpusim matmul --config configs/chip_4x4.yaml --a A.npy --w W.npy "
                  "--out C.npy --json report.json --waves waves/chip.fst"));
  std::size_t waves = 0;
  for (const auto& d : c) {
    EXPECT_EQ(d.text.find('#'), std::string::npos) << d.text;
    EXPECT_EQ(d.text.find('|'), std::string::npos) << d.text;
    EXPECT_NE(d.text.rfind("gtkwave ", 0), 0u) << d.file << ":" << d.line << " opens no dump";
    waves += d.waves.size();
  }
  EXPECT_GE(waves, 3u);  // the chip, the array, a pod chip
  EXPECT_GE(c.size(), 30u);
  EXPECT_GE(std::count_if(c.begin(), c.end(),
                          [](const DocCommand& d) { return d.text.rfind("build/bench/", 0) == 0; }),
            7);
}

}  // namespace
}  // namespace tpu
