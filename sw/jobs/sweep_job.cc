#include "sweep_job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "check_port.h"
#include "pod_report.h"
#include "tpu/perf.h"

namespace tpu {

namespace {

// "4K" -> 4096; the unit is binary (K = 2^10, M = 2^20, G = 2^30). `what` names the part in
// the message.
uint64_t parse_size(const std::string& s, const std::string& flag, const std::string& text,
                    const char* what) {
  auto bad = [&](const std::string& rule) {
    return std::invalid_argument(flag + " " + text + ": " + what + " '" + s + "' " + rule +
                                 " (sizes: START:STOP:xFACTOR, START:STOP:+STEP or N, with an "
                                 "optional unit K, M or G = 2^10, 2^20, 2^30, e.g. 1K:4M:x2)");
  };
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 15) throw bad("is not a whole number of at most 15 digits");
  uint64_t v = std::stoull(s.substr(0, i));
  if (i < s.size()) {
    if (i + 1 != s.size()) throw bad("has more than one unit letter after the number");
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
    const int shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : -1;
    if (shift < 0) throw bad("has an unknown unit (K, M or G)");
    if (v > (std::numeric_limits<uint64_t>::max() >> shift)) throw bad("is too large");
    v <<= shift;
  }
  if (v == 0) throw bad("must be at least 1");
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (std::size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1)
    out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

std::string shape_name(const MatmulShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
}

// A number in a table column: `prec` decimals.
std::string fixed(double v, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

// Columns, right-aligned to the widest of header and cells, two spaces apart; the header line
// starts with '#', as nccl-tests prints it.
std::string format_table(const std::vector<std::string>& head,
                         const std::vector<std::vector<std::string>>& cells) {
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& r : cells) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r, bool hash) {
    std::string s = hash ? "#" : " ";
    for (std::size_t c = 0; c < r.size(); ++c)
      s += std::string(w[c] - r[c].size() + (c ? 2 : 1), ' ') + r[c];
    return s + "\n";
  };
  std::string out = line(head, true);
  for (const auto& r : cells) out += line(r, false);
  return out;
}

bool all_pass(const Json& rows) {
  for (const Json& r : rows)
    if (r.at("golden") != "pass") return false;
  return true;
}

}  // namespace

Json in_child_process(const std::function<Json()>& f) {
  int fd[2];
  if (::pipe(fd) != 0)
    throw std::runtime_error("sweep: pipe() failed: " + std::string(std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("sweep: fork() failed: " + std::string(std::strerror(errno)));
  if (pid == 0) {  // the child: the row, or the error's kind and message, as JSON on the pipe
    ::close(fd[0]);
    Json out;
    try {
      out = Json{{"ok", f()}};
    } catch (const HangError& e) {
      out = Json{{"error", "hang"}, {"what", e.what()}};
    } catch (const PodError& e) {
      out = Json{{"error", "pod"}, {"what", e.what()}};
    } catch (const std::exception& e) {
      out = Json{{"error", "usage"}, {"what", e.what()}};
    }
    const std::string text = json_text(out);
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd[1], text.data() + done, text.size() - done);
      if (n <= 0) ::_exit(4);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fd[1]);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || text.empty())
    throw PodError("sweep: the process that ran the row ended without a result (" +
                   (WIFSIGNALED(st) ? "signal " + std::to_string(WTERMSIG(st))
                                    : "exit " + std::to_string(WEXITSTATUS(st))) +
                   ")");
  const Json got = Json::parse(text);
  if (got.contains("ok")) return got.at("ok");
  const std::string kind = got.at("error").get<std::string>();
  const std::string what = got.at("what").get<std::string>();
  if (kind == "hang") throw HangError(what);
  if (kind == "pod") throw PodError(what);
  throw std::invalid_argument(what);
}

std::vector<uint64_t> parse_size_range(const std::string& text, const std::string& flag) {
  const std::vector<std::string> parts = split(text, ':');
  auto bad = [&](const std::string& rule) {
    return std::invalid_argument(flag + " " + text + ": " + rule);
  };
  if (parts.size() == 1) return {parse_size(parts[0], flag, text, "the size")};
  if (parts.size() != 3)
    throw bad("must be START:STOP:xFACTOR, START:STOP:+STEP or one size N (e.g. 1K:4M:x2)");
  const uint64_t start = parse_size(parts[0], flag, text, "START");
  const uint64_t stop = parse_size(parts[1], flag, text, "STOP");
  if (stop < start)
    throw bad("STOP (" + std::to_string(stop) + ") is below START (" + std::to_string(start) +
              "); the sizes grow from START to STOP");
  const std::string& inc = parts[2];
  if (inc.size() < 2 || (inc[0] != 'x' && inc[0] != '+'))
    throw bad("the step '" + inc + "' must be xFACTOR (multiply, FACTOR >= 2) or +STEP (add)");
  const bool mul = inc[0] == 'x';
  const uint64_t by = parse_size(inc.substr(1), flag, text, mul ? "FACTOR" : "STEP");
  if (mul && by < 2) throw bad("FACTOR must be at least 2 (x1 would never reach STOP)");
  std::vector<uint64_t> out;
  for (uint64_t v = start; v <= stop;) {
    if (out.size() == kMaxSweepRows)
      throw bad("more than " + std::to_string(kMaxSweepRows) +
                " sizes; take a larger step or a shorter range");
    out.push_back(v);
    if (mul ? v > stop / by : v > stop - by) break;  // the next one passes STOP (no overflow)
    v = mul ? v * by : v + by;
  }
  return out;
}

std::vector<MatmulShape> parse_shapes(const std::string& text, const std::string& flag) {
  std::vector<MatmulShape> out;
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> d = split(item, 'x');
    auto bad = [&](const std::string& rule) {
      return std::invalid_argument(flag + " " + text + ": '" + item + "' " + rule +
                                   " (shapes: MxKxN,MxKxN,..., e.g. 128x128x128,256x64x512)");
    };
    if (d.size() != 3) throw bad("is not MxKxN");
    std::size_t v[3];
    for (int i = 0; i < 3; ++i) {
      const std::string& s = d[static_cast<std::size_t>(i)];
      if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(s) == 0)
        throw bad("has a dimension '" + s + "' that is not a whole number from 1 to 999999");
      v[i] = std::stoul(s);
    }
    if (out.size() == kMaxSweepRows)
      throw bad("is past the limit of " + std::to_string(kMaxSweepRows) + " shapes");
    out.push_back({v[0], v[1], v[2]});
  }
  return out;
}

// ---- Collectives ----

CollectiveSweep::CollectiveSweep(PodConfig cfg, const CollectiveJobOptions& base,
                                 std::vector<uint64_t> bytes, std::string command)
    : cfg_(std::move(cfg)), base_(base), bytes_(std::move(bytes)), command_(std::move(command)) {
  for (uint64_t b : bytes_) {
    CollectiveJobOptions o = base_;
    o.bytes = b;
    const CollectiveJob job(cfg_, o);  // the size's rules, the mesh: before any run
    algorithm_ = job.spec().algorithm;
    group_chips_ = job.group_chips();
  }
}

Json CollectiveSweep::run_row(const EngineOptions& eng, uint64_t bytes) const {
  const double ghz = cfg_.chip.clock_ghz;
  CollectiveJobOptions o = base_;
  o.bytes = bytes;
  CollectiveJob job(cfg_, o);
  job.run(eng);
  const CollectiveSpec& s = job.spec();
  const uint64_t cyc = job.result().collective_cycles;
  const double S = static_cast<double>(o.bytes), c = static_cast<double>(cyc);
  const int p = job.group_chips();
  const CollectiveBound b = job.bound();  // the bound the single run's report gives
  Json r = Json::object();
  r["bytes"] = o.bytes;
  r["count"] = static_cast<uint64_t>(s.n);
  r["type"] = s.dtype == DType::kBf16 ? "bf16" : "f32";
  // nccl-tests' redop column: "none" for a collective that does not reduce.
  r["redop"] = !collective_reduces(s.collective) ? "none" : s.op == ReduceOp::kMax ? "max" : "sum";
  r["algorithm"] = s.algorithm;
  r["cycles"] = cyc;
  r["time_us"] = c / (ghz * 1e3);
  r["algbw_gbps"] = cyc ? algbw(S, c) * ghz : 0.0;
  r["busbw_gbps"] = cyc ? busbw(s.collective, p, S, c) * ghz : 0.0;
  r["bound_cycles"] = b.ici_cycles;
  r["bound_busbw_gbps"] = b.ici_cycles > 0 ? busbw(s.collective, p, S, b.ici_cycles) * ghz : 0.0;
  r["fraction_of_bound"] = cyc ? b.ici_cycles / c : 0.0;
  r["golden"] = job.pass() ? "pass" : "fail";
  r["mismatches"] = static_cast<uint64_t>(job.mismatches());
  const MachineInfo& mi = job.info();  // what the report's "pod" group says
  return Json{{"row", r},
              {"link_latency", mi.link_latency},
              {"link_bytes_per_cycle", mi.link_bytes_per_cycle},
              {"host_bytes_per_cycle", mi.host_bytes_per_cycle}};
}

void CollectiveSweep::run(const EngineOptions& eng, const SweepProgress& progress) {
  rows_ = Json::array();
  // SystemC elaborates one pod per process: each row of that engine runs in a child process.
  const bool child = eng.engine == "systemc";
  uint64_t cycles = 0;  // of the rows done
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if (progress) progress({cycles, i, bytes_.size(), "sizes", std::to_string(bytes_[i]) + " bytes"});
    auto row = [&] {
      try {
        return run_row(eng, bytes_[i]);
      } catch (const CheckStop&) {  // --check: this size's plan fits; nothing simulated
        return Json{{"checked", true}};
      }
    };
    const Json got = child ? in_child_process(row) : row();
    if (eng.check) continue;
    mi_.topo = cfg_.params.topo;
    mi_.link_latency = got.at("link_latency").get<unsigned>();
    mi_.link_bytes_per_cycle = got.at("link_bytes_per_cycle").get<double>();
    mi_.host_bytes_per_cycle = got.at("host_bytes_per_cycle").get<unsigned>();
    rows_.push_back(got.at("row"));
    cycles += rows_.back().at("cycles").get<uint64_t>();
  }
  if (eng.check)
    throw CheckStop("after the plans of all " + std::to_string(bytes_.size()) +
                    " sizes, before the first simulated cycle");
  if (progress) progress({cycles, bytes_.size(), bytes_.size(), "sizes", "done"});
}

bool CollectiveSweep::pass() const { return all_pass(rows_); }

std::string CollectiveSweep::table() const {
  const std::string kind = collective_name(base_.kind);
  std::string out = "# tpusim sweep " + command_ + ": " + kind + " (" + algorithm_ + ") on " +
                    cfg_.params.topo.name() + ", groups of " + std::to_string(group_chips_) +
                    " chips, clock " + real_text(cfg_.chip.clock_ghz) + " GHz\n# busbw = algbw x " +
                    (base_.kind == Collective::kAllReduce   ? "2(n-1)/n"
                     : base_.kind == Collective::kBroadcast ? "1"
                                                            : "(n-1)/n") +
                    "; bound: the ICI bound (every link of a chip busy), fraction = bound / "
                    "cycles\n";
  std::vector<std::vector<std::string>> cells;
  double bus_sum = 0;
  for (const Json& r : rows_) {
    bus_sum += r["busbw_gbps"].get<double>();
    cells.push_back(
        {std::to_string(r["bytes"].get<uint64_t>()), std::to_string(r["count"].get<uint64_t>()),
         r["type"].get<std::string>(), r["redop"].get<std::string>(),
         std::to_string(r["cycles"].get<uint64_t>()), fixed(r["time_us"].get<double>(), 3),
         fixed(r["algbw_gbps"].get<double>(), 2), fixed(r["busbw_gbps"].get<double>(), 2),
         fixed(r["fraction_of_bound"].get<double>(), 3), r["golden"].get<std::string>()});
  }
  out += format_table({"size(B)", "count", "type", "redop", "cycles", "time(us)", "algbw(GB/s)",
                       "busbw(GB/s)", "bound", "golden"},
                      cells);
  out += "# golden: " + std::string(pass() ? "pass" : "FAIL") + " (" +
         std::to_string(rows_.size()) + " sizes)\n";
  if (!rows_.empty())
    out +=
        "# Avg bus bandwidth: " + fixed(bus_sum / static_cast<double>(rows_.size()), 3) + " GB/s\n";
  return out;
}

Report CollectiveSweep::report(const EngineOptions& eng) const {
  const std::string kind = collective_name(base_.kind);
  Report rep("sweep of " + kind + " (" + algorithm_ + ") over " + std::to_string(bytes_.size()) +
             " sizes on " + cfg_.params.topo.name());
  rep.field("command", "sweep").field("sweep", command_);
  add_pod(rep, cfg_, mi_, eng);
  rep.field("kind", kind).field("algorithm", algorithm_);
  rep.field("dtype", base_.dtype == DType::kBf16 ? "bf16" : "f32");
  rep.field("op", base_.op == ReduceOp::kMax ? "max" : "sum");
  rep.field("axis", base_.axis.empty() ? "all" : base_.axis);
  rep.metric("group_chips", group_chips_, "", "chips in each group of the collective");
  rep.metric("clock_ghz", cfg_.chip.clock_ghz, "GHz", "the clock the times are at");
  rep.metric("busbw_factor", group_chips_ > 0 ? busbw_factor(base_.kind, group_chips_) : 0.0, "",
             "busbw / algbw (nccl-tests)");
  rep.field("rows", rows_);
  uint64_t mism = 0, outputs = 0;
  for (const Json& r : rows_) {
    mism += r["mismatches"].get<uint64_t>();
    outputs += r["count"].get<uint64_t>();
  }
  rep.metric("rows_run", rows_.size(), "", "sizes run", true);
  rep.set_golden(pass(), outputs, mism);
  return rep;
}

// ---- Matmul ----

MatmulSweep::MatmulSweep(ChipConfig cfg, std::string config_path, const MatmulJobOptions& base,
                         std::vector<MatmulShape> shapes)
    : cfg_(std::move(cfg)),
      config_path_(std::move(config_path)),
      base_(base),
      shapes_(std::move(shapes)) {
  variant_ = base_.variant.value_or(cfg_.variant);
  for (std::size_t i = 0; i < shapes_.size(); ++i) {  // every shape's capacity, before any run
    MatmulJobOptions o = base_;
    o.m = shapes_[i].m;
    o.k = shapes_[i].k;
    o.n = shapes_[i].n;
    o.check = true;
    MatmulJob job(cfg_, config_path_, o);
    if (i > 0 && !base_.check) continue;
    try {  // the variant (built or not) and the plan (every shape's with --check), no cycle
      job.run();
    } catch (const CheckStop&) {
    }
  }
  if (base_.check)
    throw CheckStop("after the plans of all " + std::to_string(shapes_.size()) +
                    " shapes, before the first simulated cycle");
}

void MatmulSweep::run(const SweepProgress& progress) {
  rows_ = Json::array();
  const double ghz = cfg_.clock_ghz;
  uint64_t cycles = 0;  // of the shapes done
  for (std::size_t i = 0; i < shapes_.size(); ++i) {
    const MatmulShape& s = shapes_[i];
    if (progress) progress({cycles, i, shapes_.size(), "shapes", shape_name(s)});
    MatmulJobOptions o = base_;
    o.m = s.m;
    o.k = s.k;
    o.n = s.n;
    MatmulJob job(cfg_, config_path_, o);
    job.run();
    const Json j = job.take_report().json();  // what `tpusim matmul --json` writes
    peak_macs_ = j.at("array_rows").get<uint64_t>() * j.at("array_cols").get<uint64_t>();
    peak_hbm_bytes_ = j.at("hbm").at("peak_bytes_per_cycle").get<double>();
    const uint64_t cyc = j.at("cycles").get<uint64_t>();
    const double flops =
        2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    const double hbm = static_cast<double>(j.at("hbm").at("bytes").get<uint64_t>());
    Json r = Json::object();
    r["shape"] = shape_name(s);
    r["m"] = static_cast<uint64_t>(s.m);
    r["k"] = static_cast<uint64_t>(s.k);
    r["n"] = static_cast<uint64_t>(s.n);
    r["cycles"] = cyc;
    cycles += cyc;
    r["ideal_cycles"] = j.at("ideal_cycles");
    r["bound_cycles"] = j.at("roofline").at("bound_cycles");
    r["time_us"] = static_cast<double>(cyc) / (ghz * 1e3);
    r["mfu"] = j.at("mfu");
    r["flops"] = flops;
    r["hbm_bytes"] = hbm;
    r["arithmetic_intensity"] = hbm > 0 ? flops / hbm : 0.0;
    r["achieved_gflops"] = cyc ? flops / static_cast<double>(cyc) * ghz : 0.0;
    r["peak_gflops"] = 2.0 * static_cast<double>(peak_macs_) * ghz;
    r["fraction_of_bound"] = j.at("roofline").at("achieved_fraction");
    r["golden"] = job.pass() ? "pass" : "fail";
    r["mismatches"] = j.at("golden").at("mismatches");
    rows_.push_back(std::move(r));
  }
  if (progress) progress({cycles, shapes_.size(), shapes_.size(), "shapes", "done"});
}

bool MatmulSweep::pass() const { return all_pass(rows_); }

std::string MatmulSweep::table() const {
  std::string out = "# tpusim sweep matmul on chip " + variant_ + " (" + config_path_ +
                    "), clock " + real_text(cfg_.clock_ghz) + " GHz, peak " +
                    fixed(2.0 * static_cast<double>(peak_macs_) * cfg_.clock_ghz, 1) +
                    " GFLOP/s, HBM " + fixed(peak_hbm_bytes_ * cfg_.clock_ghz, 1) +
                    " GB/s\n# intensity: FLOPs / HBM bytes the DMA moved; bound: roofline "
                    "cycles / cycles\n";
  std::vector<std::vector<std::string>> cells;
  for (const Json& r : rows_)
    cells.push_back(
        {r["shape"].get<std::string>(), std::to_string(r["cycles"].get<uint64_t>()),
         fixed(r["time_us"].get<double>(), 3), fixed(r["mfu"].get<double>(), 3),
         fixed(r["arithmetic_intensity"].get<double>(), 2),
         fixed(r["achieved_gflops"].get<double>(), 2), fixed(r["peak_gflops"].get<double>(), 1),
         fixed(r["fraction_of_bound"].get<double>(), 3), r["golden"].get<std::string>()});
  out += format_table(
      {"MxKxN", "cycles", "time(us)", "mfu", "flop/B", "GFLOP/s", "peak", "bound", "golden"},
      cells);
  out += "# golden: " + std::string(pass() ? "pass" : "FAIL") + " (" +
         std::to_string(rows_.size()) + " shapes)\n";
  return out;
}

Report MatmulSweep::report() const {
  Report rep("sweep of matmul over " + std::to_string(shapes_.size()) + " shapes on chip " +
             variant_);
  rep.field("tool", "tpusim").field("command", "sweep").field("sweep", "matmul");
  rep.field("config", config_path_).field("variant", variant_);
  rep.metric("clock_ghz", cfg_.clock_ghz, "GHz", "the clock the times are at");
  rep.metric("peak_macs_per_cycle", peak_macs_, "", "the array's MACs per cycle");
  rep.metric("peak_gflops", 2.0 * static_cast<double>(peak_macs_) * cfg_.clock_ghz, "GFLOP/s",
             "2 x MACs per cycle at the clock");
  rep.metric("hbm_peak_bytes_per_cycle", peak_hbm_bytes_, "B/cycle", "channels x 32 B");
  rep.metric("hbm_peak_gbps", peak_hbm_bytes_ * cfg_.clock_ghz, "GB/s", "at the clock");
  rep.field("rows", rows_);
  uint64_t mism = 0, outputs = 0;
  for (const Json& r : rows_) {
    mism += r["mismatches"].get<uint64_t>();
    outputs += r["m"].get<uint64_t>() * r["n"].get<uint64_t>();
  }
  rep.metric("rows_run", rows_.size(), "", "shapes run", true);
  rep.set_golden(pass(), outputs, mism);
  return rep;
}

}  // namespace tpu
