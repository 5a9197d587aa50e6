// tpusim: the command-line front door of the simulator (tpusim --help: the commands; each
// command's options are declared next to it, on CLI11: sw/common/cli.h).
//
//   tpusim allreduce | collective | pod | hang [options]   (sw/tpusim/pod_cmd.h)
//   tpusim shard [options]                                (sw/tpusim/shard_cmd.h)
//   tpusim train [options]                                (sw/tpusim/train_cmd.h)
//   tpusim sweep allreduce|collective|matmul [options]    (sw/tpusim/sweep_cmd.h)
//   tpusim traffic [options]                              (sw/tpusim/traffic.h)
//   tpusim vpu --op NAME --x X.npy [--y Y.npy] [options]   (sw/tpusim/vpu_cmd.h)
//   tpusim gather --table T.npy --ids I.npy [options]     (sw/tpusim/gather_cmd.h)
//   tpusim generate --load DIR --prompt TEXT [options]    (sw/tpusim/generate_cmd.h)
//   tpusim slices [--config FILE] [--job NAME=LINE] [options] (sw/tpusim/slices_cmd.h)
//   tpusim matmul [--config FILE] [--variant RxC] [--m M --k K --n N --seed S | --a A.npy --w W.npy]
//                 [--dist narrow|wide] [--out C.npy] [--json REPORT.json] [--waves FILE.fst]
//
// matmul runs C = A x W on the MXU of the configured chip variant, checks every output bit for bit
// against the golden model, and reports cycles, ideal cycles, utilization and mismatches.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "chip_config.h"
#include "check_port.h"
#include "engine_sc.h"
#include "matmul_job.h"
#include "mxu_dut.h"
#include "cli_util.h"
#include "example_cmd.h"
#include "json.h"
#include "pod_cli.h"
#include "pod_cmd.h"
#include "shard_cmd.h"
#include "sweep_cmd.h"
#include "tpusim_cmds.h"
#include "train_cmd.h"
#include "output.h"
#include "pod.h"
#include "pod_mpi.h"
#include "profile.h"
#include "report.h"
#include "trace.h"
#include "traffic.h"
#include "vpu_cmd.h"
#include "gather_cmd.h"
#include "generate_cmd.h"
#include "slices_cmd.h"

namespace {

using namespace tpu;

// The options of `tpusim matmul`.
struct MatmulArgs {
  const CLI::App* cmd = nullptr;  // the command, to ask which options were given
  std::string config, variant, a, w, out, json, waves, trace, trace_cycles, bias;
  std::string dist = "narrow", out_dtype = "f32";
  std::size_t m = 64, k = 64, n = 64;
  uint64_t seed = 1, watchdog = 0;
  bool quiet = false, relu = false, mxu_only = false, check = false;
  std::vector<std::string> faults;

  bool given(const char* flag) const { return cmd->count(flag) > 0; }
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// FST waves (docs/errors.md): Verilator's FST writer neither reports a failed write nor
// survives a full disk (its memory-mapped temporary files raise SIGBUS). So: the file system
// must have room before the run starts, a SIGBUS ends the tool with exit 2 and a message naming
// the dump, and a disk found full after the dump is an error.
constexpr uint64_t kWavesMinFree = 64ull << 20;
char g_sigbus_msg[512] = "tpusim: error: SIGBUS: a memory-mapped file could not be written\n";

extern "C" void on_sigbus(int) {
  const ssize_t n = ::write(2, g_sigbus_msg, std::strlen(g_sigbus_msg));
  (void)n;
  ::_exit(kExitUsage);
}

uint64_t free_bytes(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return ~0ull;  // unknown: the write itself will tell
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

void prepare_waves(const std::string& path) {
  const uint64_t room = free_bytes(path);
  if (room < kWavesMinFree)
    throw UsageError("--waves " + path + ": only " + std::to_string(room >> 20) +
                     " MiB free on its file system (an FST dump needs at least " +
                     std::to_string(kWavesMinFree >> 20) + " MiB)");
  std::snprintf(g_sigbus_msg, sizeof g_sigbus_msg,
                "tpusim: error: --waves %s: writing the FST dump failed (SIGBUS: is the disk "
                "full?); the run's summary is lost\n",
                path.c_str());
}

int run_matmul_cmd(const MatmulArgs& opt) {
  auto has = [&](const char* k) { return opt.given(k); };
  MatmulJobOptions o;
  if (has("--variant")) o.variant = opt.variant;
  o.m = opt.m;
  o.k = opt.k;
  o.n = opt.n;
  o.seed = opt.seed;
  o.dist = opt.dist;
  o.a_file = opt.a;  // --a and --w come together, without --m, --k, --n, --seed, --dist (CLI)
  o.w_file = opt.w;
  o.bias_file = opt.bias;
  o.relu = opt.relu;
  if (has("--out-dtype")) o.out_dtype = opt.out_dtype;
  o.mxu_only = opt.mxu_only;
  o.faults = opt.faults;
  if (has("--watchdog")) o.watchdog = opt.watchdog;
  o.waves = opt.waves;
  o.trace = opt.trace;
  o.out = opt.out;
  if (has("--trace-cycles")) o.trace_cycles = cli::split_span(opt.trace_cycles);
  o.check = opt.check;
  MatmulJob job(has("--config") ? opt.config : source_file("configs/default.yaml"), o);
  if (has("--waves") && !opt.check) prepare_waves(opt.waves);
  const bool pass = run_chip_job(job, opt.quiet, opt.json);
  // The dump is closed now: a disk found full after it is an error.
  if (has("--waves") && !opt.mxu_only && free_bytes(opt.waves) == 0)
    throw UsageError("--waves " + opt.waves +
                     ": the disk is full after the dump; the FST file may be cut short");
  return pass ? kExitOk : kExitMismatch;
}

// Declares `tpusim matmul` on tool; what it returns runs it once the line is parsed.
std::function<int()> matmul_command(CLI::App& tool) {
  auto a = std::make_shared<MatmulArgs>();
  CLI::App* cmd = tool.add_subcommand("matmul", "one bf16 matmul on one chip, golden-checked");
  a->cmd = cmd;
  add_chip_config(cmd, a->config, a->variant);
  std::vector<CLI::Option*> random = add_matmul_shape(
      cmd, a->m, a->k, a->n, a->seed, 1u << 16,
      {"rows of A (random inputs)", "the contraction (random inputs)",
       "columns of W (random inputs)"},
      "seed of the random inputs");
  random.push_back(cmd->add_option("--dist", a->dist, "value distribution of random inputs")
                       ->type_name("narrow|wide")
                       ->check(CLI::IsMember({"narrow", "wide"}))
                       ->capture_default_str());
  add_matmul_files(cmd, a->a, a->w,
                   "inputs from files (with --w): uint16 (bf16 bits) or float32\n"
                   "(rounded to bf16)",
                   "A.npy", random);
  // Output paths are checked before a long simulation, not after it.
  cmd->add_option("--out", a->out, "write the result as float32")
      ->type_name("C.npy")
      ->check(cli::output_path());
  cmd->add_option("--json", a->json, "write the JSON report")
      ->type_name("FILE")
      ->check(cli::output_path());
  cmd->add_option("--waves", a->waves,
                  "dump every signal of the chip (or the MXU) to an FST file")
      ->type_name("FILE.fst")
      ->check(cli::output_path());
  CLI::Option* trace =
      cmd->add_option("--trace", a->trace,
                      "write the timeline (Chrome trace-event JSON: ui.perfetto.dev)")
          ->type_name("FILE")
          ->check(cli::output_path());
  cmd->add_option("--trace-cycles", a->trace_cycles,
                  "only the events that overlap cycles [A, B) of the chip")
      ->option_text("A:B")
      ->check(cli::span())
      ->needs(trace);
  cmd->add_option("--bias", a->bias, "add a bias row (N float32 values) on the VPU")
      ->type_name("B.npy")
      ->check(cli::input_path());
  cmd->add_flag("--relu", a->relu, "ReLU after the bias (VPU)");
  cmd->add_option("--out-dtype", a->out_dtype, "result type (bf16 rounds on the VPU)")
      ->type_name("bf16|f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  cmd->add_flag("--mxu-only", a->mxu_only,
                "run on the bare MXU array (no HBM, DMA, sequencer, VPU)");
  cmd->add_flag("--quiet", a->quiet, "no progress line");
  cmd->add_flag("--check", a->check,
                "check the line, the config, the inputs and the plan (capacities),\n"
                "then stop before the first simulated cycle: exit 0, no files written");
  cli::repeatable(cmd->add_option("--fault", a->faults,
                                  "fault injection, repeatable, over the config's faults:\n"
                                  "section: seed=S, hbm_single_bit_rate=P,\n"
                                  "hbm_double_bit_rate=P (per 64-bit word read),\n"
                                  "hbm_flip_at=ADDR[:BITS] (docs/hbm.md)"))
      ->type_name("KEY=VALUE");
  cmd->add_option("--watchdog", a->watchdog,
                  "stop as hung (exit 3) after this many cycles without progress\n"
                  "(default: the config's chip.watchdog_cycles, 1000000; 0: off)")
      ->type_name("CYCLES")
      ->check(in_range(kWatchdogRange));
  cmd->footer("exit codes: 0 pass, 1 golden mismatch, 2 bad input or output, 3 hang or chip "
              "error");
  return [a] { return run_matmul_cmd(*a); };
}

}  // namespace

namespace tpu {

std::map<std::string, std::function<int()>> tpusim_commands(CLI::App& tool) {
  tool.require_subcommand(0, 1);
  tool.footer("tpusim help COMMAND (or tpusim COMMAND --help): a command's options; "
              "tpusim --version\n"
              "exit codes: 0 ok, 1 golden mismatch, 2 bad input, 3 simulation error or hang");
  return {{"matmul", matmul_command(tool)},         {"traffic", traffic_command(tool)},
          {"allreduce", allreduce_command(tool)},   {"collective", collective_command(tool)},
          {"pod", pod_command(tool)},               {"shard", shard_command(tool)},
          {"train", train_command(tool)},           {"hang", hang_command(tool)},
          {"vpu", vpu_command(tool)},               {"example-inputs", example_inputs_command(tool)},
          {"sweep", sweep_command(tool)},           {"gather", gather_command(tool)},
          {"generate", generate_command(tool)},     {"slices", slices_command(tool)}};
}

CommandFailure command_failure(const std::exception_ptr& e) {
  CommandFailure f;
  try {
    std::rethrow_exception(e);
  } catch (const CheckStop& x) {  // --check: everything before the first cycle passed
    f = {kExitOk, "", x.what()};
  } catch (const HangError& x) {
    f = {kExitSim, "hang", x.what()};
  } catch (const ChipError& x) {
    f = {kExitSim, "simulation error", x.what(), x.chip()};
  } catch (const PodError& x) {
    f = {kExitSim, "simulation error", x.what()};
  } catch (const ChipRtlError& x) {
    f = {kExitSim, "simulation error", x.what()};
  } catch (const RtlError& x) {
    f = {kExitSim, "simulation error", x.what()};
  } catch (const std::exception& x) {  // UsageError, ConfigError, NpyError, invalid_argument...
    f = {kExitUsage, "error", x.what()};
  }
  return f;
}

}  // namespace tpu

// tpusim links SystemC (the pod): main() (main.cc) starts SystemC, which calls sc_main (a C
// symbol).
extern "C" int sc_main(int argc, char** argv);

namespace {
int run_tool(std::vector<std::string> args);
std::string g_error;  // the error run_tool printed (for the other MPI ranks)
}  // namespace

// Under mpirun with several ranks (docs/scale.md) every rank runs the same command: the pod
// commands split the pod across the ranks (tb/pod/pod_mpi.h) and rank 0 alone prints and writes
// files; the other commands run in one process and refuse several ranks.
int sc_main(int argc, char** argv) {
  std::signal(SIGBUS, on_sigbus);
  use_systemc_engine();  // --engine systemc (the default of the pod commands)
  const int ranks = mpi_launch_size();
  if (ranks > 1 && !mpi_built()) {
    std::cerr << "tpusim: error: launched with " << ranks
              << " MPI ranks (OMPI_COMM_WORLD_SIZE), but this tpusim was built without MPI, so "
                 "every rank would run the whole job alone; install Open MPI "
                 "(libopenmpi-dev openmpi-bin: scripts/deps.sh) and rebuild, or run it without "
                 "mpirun\n";
    return kExitUsage;
  }
  mpi_init(&argc, &argv);
  if (mpi_world().rank > 0) {  // rank 0 speaks for all
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      return kExitUsage;
    set_files_muted(true);
  }
  const int rc = run_tool(std::vector<std::string>(argv + 1, argv + argc));
  std::fflush(stdout);
  if (rc >= kExitUsage && mpi_world().size > 1 && !mpi_started()) {
    // Failed before the pod ran: meet the others where a pod command meets them before its
    // first collective (each rank found the same bad input, or the others learn this one's
    // error there); then every rank finalizes and exits with the code, rank 0 having printed.
    mpi_agree_start(g_error.empty() ? "rank " + std::to_string(mpi_world().rank) +
                                          " failed before the pod ran (exit " +
                                          std::to_string(rc) + ")"
                                    : g_error);
  } else if (rc >= kExitUsage) {
    mpi_end_failed(rc);  // 1 (a golden mismatch) every rank computes alike
  }
  mpi_finalize();
  return rc;
}

namespace {

// The command of that name the help lists (hidden ones, group "", left out), or nullptr.
const CLI::App* listed_command(const CLI::App& tool, const std::string& name) {
  for (const CLI::App* c :
       tool.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    if (c->get_name() == name) return c;
  return nullptr;
}

// An option given before the command (`tpusim --quiet matmul`): the tool itself has none but
// --help and --version, so one that a command takes is named with where it goes. "" when the
// line does not start that way (the parser then says what is wrong).
std::string option_before_command(const CLI::App& tool, const std::vector<std::string>& args) {
  if (args.empty() || args[0].size() < 2 || args[0][0] != '-') return "";
  const std::string flag = args[0].substr(0, args[0].find('='));
  if (flag == "-h" || flag == "--help") return "";
  std::string cmd;  // the command on the line, if any
  for (const std::string& x : args)
    if (listed_command(tool, x) != nullptr) {
      cmd = x;
      break;
    }
  std::string takers;
  for (const CLI::App* c : tool.get_subcommands([](const CLI::App* s) {
         return !s->get_group().empty();
       }))
    if (c->get_option_no_throw(flag) != nullptr) {
      if (c->get_name() == cmd)
        return flag + " is an option of the commands: give it after the command, tpusim " + cmd +
               " " + flag;
      takers += (takers.empty() ? "" : ", ") + c->get_name();
    }
  if (takers.empty()) return "";
  return flag + " is an option of the commands (" + takers + "), not of tpusim: tpusim " +
         (cmd.empty() ? "COMMAND" : cmd) + " " + flag +
         (cmd.empty() ? "" : " does not take it either");
}

int run_tool(std::vector<std::string> args) {
  CLI::App tool("", "tpusim");
  const std::map<std::string, std::function<int()>> commands = tpusim_commands(tool);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << tpusim_version() << "\n";
    return kExitOk;
  }
  if (!args.empty() && args[0] == "help") {  // tpusim help [COMMAND]: the help, as --help gives it
    const CLI::App* outer = args.size() == 3 ? listed_command(tool, args[1]) : nullptr;
    auto named = [&](const CLI::App* c) { return c->get_name() == args[2]; };
    if (outer != nullptr && !outer->get_subcommands(named).empty()) {
      args = {args[1], args[2], "--help"};  // tpusim help sweep matmul
    } else if (args.size() > 2) {
      std::cerr << "tpusim: error: unexpected argument '" << args[2]
                << "' (tpusim help COMMAND: one command's options)\n";
      return kExitUsage;
    }
    if (args.size() == 2 && listed_command(tool, args[1]) == nullptr) {
      std::cerr << "tpusim: error: unknown command '" << args[1]
                << "' (tpusim --help: the commands)\n";
      return kExitUsage;
    }
    if (args.size() < 3)
      args = args.size() == 2 ? std::vector<std::string>{args[1], "--help"}
                              : std::vector<std::string>{"--help"};
  }
  const std::string before = option_before_command(tool, args);
  if (!before.empty()) {
    std::cerr << "tpusim: error: " << before << "\n";
    return kExitUsage;
  }
  const int parsed = cli::parse(tool, args);
  if (parsed >= 0) return parsed;
  const std::string cmd = tool.get_subcommands().front()->get_name();
  auto fail = [](const char* kind, const char* what, int code) {
    std::cerr << "tpusim: " << kind << ": " << what << "\n";
    g_error = what;
    return code;
  };
  const bool pod_cmd = cmd == "allreduce" || cmd == "collective" || cmd == "pod" ||
                       cmd == "shard" || cmd == "train" || cmd == "hang";
  try {
    if (!pod_cmd && mpi_world().size > 1)
      throw UsageError("tpusim " + cmd + " runs in one process, not across " +
                       std::to_string(mpi_world().size) +
                       " MPI ranks (the pod commands allreduce, collective, pod, shard and "
                       "train do)");
    return commands.at(cmd)();
  } catch (...) {
    const CommandFailure f = command_failure(std::current_exception());
    if (f.kind.empty()) {  // --check: everything before the first cycle passed
      std::cout << "tpusim " << cmd << ": check passed (stopped " << f.what << ")\n";
      return kExitOk;
    }
    return fail(f.kind.c_str(), f.what.c_str(), f.code);
  }
}
}  // namespace
