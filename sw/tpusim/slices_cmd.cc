#include "slices_cmd.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "chip_config.h"
#include "pod_cli.h"
#include "pod_slices.h"
#include "progress.h"
#include "report.h"
#include "source_file.h"
#include "tpu/ocs.h"
#include "tpusim_cmds.h"

namespace tpu {

std::vector<std::string> job_words(const std::string& line, const std::string& where) {
  std::vector<std::string> w;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (const char c : line) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) w.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote)
    throw std::invalid_argument(where + ": an unterminated " + quote + " in '" + line + "'");
  if (in_word) w.push_back(cur);
  return w;
}

namespace {

struct SlicesArgs {
  std::string config;
  std::vector<std::string> jobs;  // --job NAME=LINE
  unsigned threads = 1;
  std::string json;
  bool quiet = false, check = false;
};

// The commands a slice can run, and the flags that belong to tpusim slices rather than to a
// slice's job (the slice's pod is the config's). A job's --trace writes its slice's timeline.
const std::set<std::string> kSliceCommands = {"allreduce", "collective", "pod", "shard", "train"};
const std::set<std::string> kPodFlags = {"--config", "--engine",      "--threads",
                                         "--json",   "--waves-chips", "--fault",
                                         "--twist",  "--watchdog",    "--check"};

// One slice's job: its line as words, the command parsed on an App of its own.
struct SliceJob {
  std::string line;
  std::vector<std::string> args;
  std::unique_ptr<CLI::App> app;
  std::map<std::string, std::function<int()>> cmds;
};

// What a slice's job did: its exit code, its report, what stopped it, and the pod chip whose
// error it was (-1: none).
struct SliceRun {
  int code = 0;
  std::string error;
  int chip = -1;
  ReportSink report;
};

std::string slice_where(const OcsSlice& s) { return "slice '" + s.name + "'"; }

// The job line of a slice checked and parsed (before anything runs).
void parse_job(SliceJob& j, const OcsSlice& s, bool check, unsigned threads) {
  const std::string where = slice_where(s) + " job";
  j.args = job_words(j.line, where);
  if (!j.args.empty() && j.args[0] == "tpusim") j.args.erase(j.args.begin());
  if (j.args.empty()) throw std::invalid_argument(where + ": the line is empty");
  if (!kSliceCommands.count(j.args[0]))
    throw std::invalid_argument(where + ": '" + j.args[0] +
                                "' cannot run on a slice (one of allreduce, collective, pod, "
                                "shard, train)");
  for (const std::string& a : j.args) {
    const std::string flag = a.substr(0, a.find('='));
    if (kPodFlags.count(flag))
      throw std::invalid_argument(where + ": " + flag +
                                  " belongs to tpusim slices, not to a slice's job (the slice's "
                                  "pod, engine, faults and outputs are the sliced pod's)");
  }
  // The pod's engine and threads, as the job's report then says.
  j.args.insert(j.args.end(), {"--engine", "cpp", "--threads", std::to_string(threads), "--quiet"});
  if (check) j.args.push_back("--check");
  j.app = std::make_unique<CLI::App>("", "tpusim " + s.name);
  j.cmds = tpusim_commands(*j.app);
  if (cli::parse(*j.app, j.args) >= 0)
    throw std::invalid_argument(where + ": '" + j.line + "' does not parse (above)");
}

// Runs a parsed job on its slice's machine (on the calling thread); every error kept.
SliceRun run_job(SliceJob& j, HostPort& host, const PodConfig& cfg, const std::string& where) {
  SliceRun r;
  ScopedPodConfig scfg(cfg);
  ScopedHostPort shost(host, where);
  ScopedReportSink ssink(r.report);
  try {
    r.code = j.cmds.at(j.args[0])();
  } catch (...) {
    const CommandFailure f = command_failure(std::current_exception());
    r.code = f.code;
    r.error = f.kind.empty() ? "check passed (stopped " + f.what + ")" : f.what;
    r.chip = f.chip;
  }
  return r;
}

// Slice s of the pod as a pod configuration of its own (what its job's load_pod_config gives).
PodConfig slice_config(const PodConfig& pod, const OcsPod& ocs, int s) {
  PodConfig c = pod;
  c.ocs = OcsPod{};
  c.slice_jobs.clear();
  c.params.topo = slice_topology(ocs, s);
  c.params.wiring.clear();
  c.params.faults = FaultConfig{};
  c.params.twist = ocs.slices[static_cast<std::size_t>(s)].twist;
  return c;
}

std::string cubes_text(const std::vector<int>& cubes) {
  std::string t;
  for (int c : cubes) t += (t.empty() ? "" : ", ") + std::to_string(c);
  return t;
}

// The cubes of slice s that failed: the one of the chip whose error stopped its job, else those
// of its chips whose links the faults took down.
std::vector<int> failed_cubes(const OcsPod& ocs, const FaultConfig& f, const SliceRun& r, int s) {
  std::set<int> cubes;
  if (r.chip >= 0 && ocs.slice_of_cube(ocs.cube_of_chip(r.chip)) == s)
    cubes.insert(ocs.cube_of_chip(r.chip));
  if (cubes.empty())
    for (const LinkDown& ld : f.link_down)
      if (ocs.slice_of_cube(ocs.cube_of_chip(ld.chip)) == s)
        cubes.insert(ocs.cube_of_chip(ld.chip));
  return {cubes.begin(), cubes.end()};
}

Json map_json(const OcsPod& ocs) {
  Json m = Json::array();
  for (const OcsCircuit& c : ocs_map(ocs))
    m.push_back({{"from", ocs_face_name(c.a)},
                 {"to", ocs_face_name(c.b)},
                 {"links", c.links},
                 {"slice", c.slice}});
  return m;
}

// What each slice went through: its runs' errors before the last, the cubes it lost and got.
struct SliceHistory {
  std::vector<std::string> failures;
  std::vector<OcsRemap> moves;
  int attempts = 0;
};

// One round: the pod of `ocs` with `faults` built, the jobs of the slices in `todo` run at once
// on it, each one's outcome in runs.
void run_round(const PodConfig& cfg, const OcsPod& ocs, const FaultConfig& faults,
               const SlicesArgs& a, std::vector<SliceJob>& jobs, const std::vector<bool>& todo,
               std::vector<SliceRun>& runs) {
  PodParams p = cfg.params;
  p.faults = faults;
  p.threads = a.threads;
  SlicedPod pod(p, ocs);
  const std::size_t n = ocs.slices.size();
  std::vector<std::function<void(HostPort&)>> fns(n);
  for (std::size_t s = 0; s < n; ++s) {
    if (!todo[s]) continue;
    const PodConfig sc = slice_config(cfg, ocs, static_cast<int>(s));
    fns[s] = [&, s, sc](HostPort& h) {
      runs[s] = run_job(jobs[s], h, sc, slice_where(ocs.slices[s]));
    };
  }
  ProgressLine line("slices on " + std::to_string(ocs.cubes) + " cubes", a.quiet);
  pod.progress = [&line](uint64_t cycles) { line.update(cycles); };
  pod.run(fns);
}

// Each slice's job line: the config's, or --job NAME=LINE's; parsed (with --check if asked).
std::vector<SliceJob> jobs_of(const PodConfig& cfg, const std::string& path, const SlicesArgs& a) {
  const OcsPod& ocs = cfg.ocs;
  const std::size_t n = ocs.slices.size();
  std::vector<SliceJob> jobs(n);
  for (std::size_t s = 0; s < n; ++s) jobs[s].line = cfg.slice_jobs[s];
  std::string names;
  for (const OcsSlice& x : ocs.slices) names += (names.empty() ? "" : ", ") + x.name;
  for (const std::string& kv : a.jobs) {
    const auto eq = kv.find('=');
    std::size_t s = 0;
    while (s < n && ocs.slices[s].name != kv.substr(0, eq)) ++s;
    if (eq == std::string::npos || s == n)
      throw std::invalid_argument("--job " + kv + ": give NAME=LINE with NAME a slice of " + path +
                                  " (" + names + ")");
    jobs[s].line = kv.substr(eq + 1);
  }
  bool any = false;
  for (std::size_t s = 0; s < n; ++s) {
    if (jobs[s].line.empty()) continue;
    parse_job(jobs[s], ocs.slices[s], a.check, a.threads);
    any = true;
  }
  if (!any)
    throw std::invalid_argument(path +
                                ": no slice has a job (a slice's `job:` line, or --job "
                                "NAME=LINE)");
  return jobs;
}

// Every job with --check first, on a pod of its own: a bad line stops all before any run.
void check_jobs(const PodConfig& cfg, const SlicesArgs& a, const std::vector<SliceJob>& jobs) {
  const OcsPod& ocs = cfg.ocs;
  const std::size_t n = ocs.slices.size();
  std::vector<SliceJob> checks(n);
  std::vector<bool> has(n);
  for (std::size_t s = 0; s < n; ++s) {
    has[s] = !jobs[s].line.empty();
    checks[s].line = jobs[s].line;
    if (has[s]) parse_job(checks[s], ocs.slices[s], true, a.threads);
  }
  std::vector<SliceRun> runs(n);
  run_round(cfg, ocs, cfg.params.faults, a, checks, has, runs);
  for (std::size_t s = 0; s < n; ++s)
    if (has[s] && runs[s].code != 0)
      throw std::invalid_argument(slice_where(ocs.slices[s]) + " job '" + jobs[s].line +
                                  "': " + runs[s].error);
}

// What the jobs did, and the pod they ended on.
struct SlicesOutcome {
  OcsPod ocs;
  std::vector<SliceRun> runs;
  std::vector<SliceHistory> hist;
  std::vector<std::string> notes;
};

// Runs every job; while a job stops at a chip's failure and spare cubes are left, its slice is
// re-formed (the failed cubes out, spares in) and its job runs again.
SlicesOutcome run_with_spares(const PodConfig& cfg, const SlicesArgs& a,
                              std::vector<SliceJob>& jobs) {
  SlicesOutcome o;
  o.ocs = cfg.ocs;
  const std::size_t n = o.ocs.slices.size();
  o.runs.resize(n);
  o.hist.resize(n);
  FaultConfig faults = cfg.params.faults;
  std::vector<bool> todo(n);
  for (std::size_t s = 0; s < n; ++s) todo[s] = !jobs[s].line.empty();
  std::vector<int> failed;  // every cube that failed so far
  for (;;) {
    for (std::size_t s = 0; s < n; ++s)
      if (todo[s]) ++o.hist[s].attempts;
    run_round(cfg, o.ocs, faults, a, jobs, todo, o.runs);
    std::vector<std::size_t> again;
    for (std::size_t s = 0; s < n; ++s) {
      if (!todo[s] || o.runs[s].code != kExitSim || a.check) continue;
      const std::vector<int> cubes = failed_cubes(o.ocs, faults, o.runs[s], static_cast<int>(s));
      if (cubes.empty()) continue;
      o.hist[s].failures.push_back(o.runs[s].error);
      failed.insert(failed.end(), cubes.begin(), cubes.end());
      again.push_back(s);
    }
    if (again.empty()) break;
    try {
      for (const OcsRemap& m : ocs_replace(o.ocs, failed))
        o.hist[static_cast<std::size_t>(m.slice)].moves.push_back(m);
    } catch (const std::invalid_argument& e) {
      o.notes.push_back(std::string("not re-formed: ") + e.what());
      break;
    }
    for (const LinkDown& ld : take_unwired_link_downs(faults, o.ocs))
      o.notes.push_back("the link_down of chip " + std::to_string(ld.chip) + " " +
                        link_dir_name(ld.dir) + " is now on a spare cube, wired to no slice");
    std::fill(todo.begin(), todo.end(), false);
    for (std::size_t s : again) todo[s] = true;
  }
  return o;
}

// One slice in the report (its JSON) and in the text.
Json slice_json(const SlicesOutcome& o, std::size_t s, const std::string& line, std::string& text) {
  const OcsSlice& sl = o.ocs.slices[s];
  const std::string topo = slice_topology(o.ocs, static_cast<int>(s)).name();
  Json js{{"name", sl.name}, {"cubes", sl.cubes}, {"topology", topo}, {"job", line}};
  text += "== slice '" + sl.name + "' (cubes " + cubes_text(sl.cubes) + "; " + topo + ")" +
          (line.empty() ? ": no job\n" : ": " + line + "\n");
  if (line.empty()) return js;
  const SliceHistory& h = o.hist[s];
  Json moves = Json::array();
  for (const OcsRemap& m : h.moves) moves.push_back({{"from", m.from}, {"to", m.to}});
  for (std::size_t k = 0; k < h.failures.size(); ++k)
    text += "   run " + std::to_string(k + 1) + " stopped: " + h.failures[k] + "\n";
  for (const OcsRemap& m : h.moves)
    text += "   re-formed: cube " + std::to_string(m.from) + " out, spare cube " +
            std::to_string(m.to) + " in (the switches re-mapped); the job ran again\n";
  const SliceRun& r = o.runs[s];
  js["exit_code"] = r.code;
  js["attempts"] = h.attempts;
  js["remapped"] = moves;
  js["failures"] = h.failures;
  if (!r.error.empty()) js["error"] = r.error;
  if (r.report.filled) {
    js["report"] = r.report.json;
    text += r.report.summary;
  }
  if (!r.error.empty()) text += (r.code == 0 ? "   " : "   error: ") + r.error + "\n";
  return js;
}

int run_slices(const SlicesArgs& a) {
  const std::string path = a.config.empty() ? source_file("configs/pod_ocs_cubes.yaml") : a.config;
  const PodConfig cfg = load_sliced_pod_config(path);
  std::vector<SliceJob> jobs = jobs_of(cfg, path, a);
  if (!a.check) check_jobs(cfg, a, jobs);
  const SlicesOutcome o = run_with_spares(cfg, a, jobs);

  // The report: the pod, the switches' map (as first set and as it ended), each slice's run.
  const OcsPod& ocs = o.ocs;
  Report rep("tpusim slices: " + std::to_string(ocs.cubes) + " cubes of " +
             std::to_string(ocs.cube[0]) + "x" + std::to_string(ocs.cube[1]) + "x" +
             std::to_string(ocs.cube[2]) + " chips " + cfg.chip.variant + ", " +
             std::to_string(ocs.slices.size()) + " slices");
  rep.field("command", "slices");
  rep.field("config", path);
  rep.field("pod", Json{{"cube", ocs.cube}, {"cubes", ocs.cubes}, {"spares", ocs.spares()}});
  rep.field("ocs_map", map_json(cfg.ocs));
  Json slices = Json::array();
  int worst = 0;
  bool remapped = false;
  std::string text;
  for (std::size_t s = 0; s < ocs.slices.size(); ++s) {
    slices.push_back(slice_json(o, s, jobs[s].line, text));
    if (!jobs[s].line.empty()) worst = std::max(worst, o.runs[s].code);
    remapped = remapped || !o.hist[s].moves.empty();
  }
  rep.field("slices", slices);
  if (remapped) rep.field("ocs_map_after", map_json(ocs));
  rep.field("notes", o.notes);
  rep.metric("exit_code", worst, "", "the worst exit code of the slices' jobs", true);
  if (!a.json.empty() && !a.check) rep.write(a.json);
  std::fputs(rep.summary().c_str(), stdout);
  for (const std::string& note : o.notes) std::printf("  note: %s\n", note.c_str());
  std::fputs(text.c_str(), stdout);
  return worst;
}

}  // namespace

std::function<int()> slices_command(CLI::App& tool) {
  auto a = std::make_shared<SlicesArgs>();
  CLI::App* cmd = tool.add_subcommand(
      "slices",
      "a pod of cubes joined by optical circuit switches: each slice runs its own job\n"
      "(allreduce, collective, pod, shard or train) at once, isolated; a slice stopped by a\n"
      "chip's failure is re-formed from a spare cube and its job runs again");
  cmd->add_option("--config", a->config,
                  "pod of cubes with an ocs: section (default configs/pod_ocs_cubes.yaml)")
      ->type_name("FILE")
      ->check(cli::input_path());
  cli::repeatable(cmd->add_option("--job", a->jobs,
                                  "a slice's job, repeatable: NAME='allreduce --bytes 65536'\n"
                                  "(instead of its job: line in the config)"))
      ->type_name("NAME=LINE");
  cmd->add_option("--threads", a->threads, "threads stepping the pod's chips (the same bits)")
      ->type_name("N")
      ->check(cli::uint_in(1, 256));
  cmd->add_option("--json", a->json, "write the JSON report (each slice's report inside)")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_flag("--quiet", a->quiet, "no progress line");
  cmd->add_flag("--check", a->check,
                "check the config and every job line, then stop each job before its\n"
                "first simulated cycle: exit 0, no files written");
  cmd->footer(
      "exit codes: the worst of the slices': 0 pass, 1 golden mismatch, 2 bad input, 3 "
      "chip error or hang");
  return [a] { return run_slices(*a); };
}

}  // namespace tpu
