#include "pod_mpi.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#ifdef TPU_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI's C++ bindings are deprecated)
#include <mpi.h>
#endif

namespace tpu {

// ---------------------------------------------------------------------------------------------
// PodPartition
// ---------------------------------------------------------------------------------------------
PodPartition PodPartition::slabs(const Topology& topo, int ranks) {
  const int n = topo.num_chips();
  if (ranks < 1 || ranks > n)
    throw std::invalid_argument("pod: " + std::to_string(ranks) + " MPI ranks for " +
                                std::to_string(n) + " chips (" + topo.name() +
                                "): a rank owns at least one chip, so use at most " +
                                std::to_string(n) + " ranks");
  PodPartition p;
  p.ranks = ranks;
  int best = 0;
  for (int d = 0; d < kPodMaxDims; ++d)
    if (topo.extent(d) >= topo.extent(best)) best = d;
  p.dim = topo.extent(best) >= ranks ? best : -1;
  p.owner.assign(static_cast<std::size_t>(n), 0);
  p.chips.assign(static_cast<std::size_t>(ranks), {});
  for (int i = 0; i < n; ++i) {
    const int r = p.dim >= 0
                      ? topo.coord(i)[static_cast<std::size_t>(p.dim)] * ranks / topo.extent(p.dim)
                      : static_cast<int>(static_cast<int64_t>(i) * ranks / n);
    p.owner[static_cast<std::size_t>(i)] = r;
    p.chips[static_cast<std::size_t>(r)].push_back(i);
  }
  return p;
}

void PodPartition::find_cuts(const PodCore& core) {
  cut.clear();
  for (int l = 0; l < core.num_links(); ++l) {
    const int s = owner[static_cast<std::size_t>(core.link_sender(l))];
    const int r = owner[static_cast<std::size_t>(core.link_receiver(l))];
    if (s != r) cut.push_back({l, s, r});
  }
}

// ---------------------------------------------------------------------------------------------
// The MPI world
// ---------------------------------------------------------------------------------------------
namespace {
MpiWorld g_world;
[[maybe_unused]] bool g_inited = false;
// Whether the last error raised came from agree_errors (every rank raised it).
[[maybe_unused]] bool g_agreed_error = false;
bool g_started = false;  // mpi_agree_start was met

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::max(1, std::atoi(v));
}
}  // namespace

const MpiWorld& mpi_world() { return g_world; }
int mpi_launch_size() { return env_int("OMPI_COMM_WORLD_SIZE", 1); }
MpiStats& mpi_stats() {
  static MpiStats s;
  return s;
}

bool mpi_built() {
#ifdef TPU_HAVE_MPI
  return true;
#else
  return false;
#endif
}

void mpi_init(int* argc, char*** argv) {
#ifdef TPU_HAVE_MPI
  if (mpi_launch_size() <= 1 || g_inited) return;
  MPI_Init(argc, argv);
  g_inited = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  g_world.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
#else
  (void)argc;
  (void)argv;
#endif
}

int mpi_end_failed(int code) {
#ifdef TPU_HAVE_MPI
  if (g_inited && g_world.size > 1 && g_world.rank == 0 && !g_agreed_error) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  return code;
}

bool mpi_started() { return g_started; }

#ifdef TPU_HAVE_MPI
namespace {
std::string agree_start(const std::string& error);
}  // namespace
#endif

std::string mpi_agree_start(const std::string& error) {
#ifdef TPU_HAVE_MPI
  if (g_inited && g_world.size > 1) return agree_start(error);
#endif
  g_started = true;
  return error;
}

void mpi_finalize() {
#ifdef TPU_HAVE_MPI
  if (g_inited) MPI_Finalize();
  g_inited = false;
#endif
}

#ifdef TPU_HAVE_MPI
namespace {

// A byte buffer for what ranks send each other: integers and strings, read back in order.
struct Buf {
  std::vector<uint8_t> b;
  std::size_t at = 0;
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string get_str() {
    const auto n = static_cast<std::size_t>(get<uint64_t>());
    std::string s(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
    return s;
  }
};

// Every rank's buffer, in rank order, on every rank.
std::vector<Buf> allgather(const Buf& mine) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = static_cast<int>(mine.b.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(counts.size());
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<uint8_t> all(static_cast<std::size_t>(std::max(total, 1)));
  MPI_Allgatherv(mine.b.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  std::vector<Buf> out(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r)
    out[r].b.assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
  return out;
}

void bcast(void* data, std::size_t n, int root) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {  // MPI counts are ints
    const int k = static_cast<int>(std::min<std::size_t>(n, 1u << 30));
    MPI_Bcast(p, k, MPI_BYTE, root, MPI_COMM_WORLD);
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

uint64_t allreduce_max(uint64_t v) {
  uint64_t r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return r;
}

std::string agree_start(const std::string& error) {
  Buf mine;
  mine.put<uint8_t>(error.empty() ? 0 : 1);
  mine.put_str(error);
  g_started = true;
  for (Buf& b : allgather(mine)) {
    const bool failed = b.get<uint8_t>() != 0;
    std::string what = b.get_str();
    if (failed) {
      g_agreed_error = true;
      return what;
    }
  }
  return "";
}

// An error as it crosses processes: its type, ChipError's fields and the message.
enum class ErrKind : uint8_t { kChip, kHang, kPod, kInvalid, kOther };

[[noreturn]] void rethrow_as(ErrKind k, const std::string& what, unsigned code, int chip,
                             uint32_t cmd) {
  switch (k) {
    case ErrKind::kChip:
      throw ChipError(what, code, chip, cmd);
    case ErrKind::kHang:
      throw HangError(what);
    case ErrKind::kPod:
      throw PodError(what);
    case ErrKind::kInvalid:
      throw std::invalid_argument(what);
    default:
      throw std::runtime_error(what);
  }
}

double now() { return MPI_Wtime(); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// WindowExchange
// ---------------------------------------------------------------------------------------------
WindowExchange::WindowExchange(PodCore& core, const PodPartition& part, int rank)
    : core_(core), words_(core.flit_words()) {
  auto peer = [&](int r) -> Peer& {
    for (Peer& p : peers_)
      if (p.rank == r) return p;
    peers_.push_back(Peer{});
    peers_.back().rank = r;
    return peers_.back();
  };
  for (const PodPartition::Cut& c : part.cut) {
    if (c.sender == rank) {
      Peer& p = peer(c.receiver);
      p.flits_out.push_back(c.link);
      p.credits_in.push_back(c.link);
    } else if (c.receiver == rank) {
      Peer& p = peer(c.sender);
      p.flits_in.push_back(c.link);
      p.credits_out.push_back(c.link);
    }
  }
}

void WindowExchange::exchange(uint64_t t, unsigned w) {
  if (w == 0 || peers_.empty()) return;
  const uint64_t a0 = t + core_.params().link_latency;
  std::vector<MPI_Request> req;
  req.reserve(2 * peers_.size());
  const std::size_t flit_bytes = std::size_t{4} * words_;
  const std::size_t ctl_bytes = std::size_t{4} * IciLink::kCtlWords;
  for (Peer& p : peers_) {
    // Per arrival cycle: each outgoing link's flit slot (a byte: valid, vc, sent, new; then the
    // words when valid), then each control slot (a byte: valid, sent, credit valid, credit vc;
    // then the control words when valid): what the sender's copy of the link holds.
    p.tx.clear();
    for (uint64_t a = a0; a < a0 + w; ++a) {
      for (int l : p.flits_out) {
        unsigned vc = 0;
        const uint32_t* f = nullptr;
        const bool v = core_.link(l).flit_at(a, &vc, &f);
        const IciLink::SlotMeta m = core_.link(l).flit_meta(a);
        p.tx.push_back(static_cast<uint8_t>((v ? 1u : 0u) | (vc & 3u) << 1 |
                                            (m.sent ? 8u : 0u) | (m.fresh ? 16u : 0u)));
        if (v) {
          const auto* fb = reinterpret_cast<const uint8_t*>(f);
          p.tx.insert(p.tx.end(), fb, fb + flit_bytes);
        }
      }
      for (int l : p.credits_out) {
        const uint32_t* c = nullptr;
        const bool v = core_.link(l).ctl_at(a, &c);
        const IciLink::SlotMeta m = core_.link(l).ctl_meta(a);
        p.tx.push_back(static_cast<uint8_t>((v ? 1u : 0u) | (m.sent ? 2u : 0u) |
                                            (m.cr_valid ? 4u : 0u) | (m.cr_vc & 3u) << 3));
        if (v) {
          const auto* cb = reinterpret_cast<const uint8_t*>(c);
          p.tx.insert(p.tx.end(), cb, cb + ctl_bytes);
        }
      }
    }
    // The size is known only from the headers: receive the largest and read what came.
    p.rx.resize(w * (p.flits_in.size() * (1 + flit_bytes) + p.credits_in.size() * (1 + ctl_bytes)));
    req.emplace_back();
    MPI_Irecv(p.rx.data(), static_cast<int>(p.rx.size()), MPI_BYTE, p.rank, 7, MPI_COMM_WORLD,
              &req.back());
    req.emplace_back();
    MPI_Isend(p.tx.data(), static_cast<int>(p.tx.size()), MPI_BYTE, p.rank, 7, MPI_COMM_WORLD,
              &req.back());
    mpi_stats().bytes_sent += p.tx.size();
  }
  MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  std::vector<uint32_t> flit(words_), ctl(IciLink::kCtlWords);
  for (Peer& p : peers_) {
    std::size_t at = 0;
    for (uint64_t a = a0; a < a0 + w; ++a) {
      for (int l : p.flits_in) {
        const uint8_t h = p.rx[at++];
        if (h & 1u) {
          std::memcpy(flit.data(), &p.rx[at], flit_bytes);
          at += flit_bytes;
        }
        core_.link(l).import_flit(a, h & 1u, (h >> 1) & 3u, flit.data(), (h & 8u) != 0,
                                  (h & 16u) != 0);
      }
      for (int l : p.credits_in) {
        const uint8_t h = p.rx[at++];
        if (h & 1u) {
          std::memcpy(ctl.data(), &p.rx[at], ctl_bytes);
          at += ctl_bytes;
        }
        core_.link(l).import_ctl(a, h & 1u, ctl.data(), (h & 2u) != 0, (h & 4u) != 0,
                                 (h >> 3) & 3u);
      }
    }
  }
}

namespace {

// Every rank: throws the earliest error any rank holds (cycle `at`, then chip; `no_chip` for an
// error of no chip), the same message and type on all; returns when no rank holds one.
void agree_error(std::exception_ptr e, uint64_t at, int no_chip) {
  if (allreduce_max(e ? 1 : 0) == 0) return;
  ErrKind kind = ErrKind::kOther;
  std::string what;
  unsigned code = 0;
  int chip = no_chip;
  uint32_t cmd = 0;
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const ChipError& x) {
      kind = ErrKind::kChip, what = x.what(), code = x.code(), chip = x.chip(), cmd = x.cmd();
    } catch (const HangError& x) {
      kind = ErrKind::kHang, what = x.what();
    } catch (const PodError& x) {
      kind = ErrKind::kPod, what = x.what();
    } catch (const std::invalid_argument& x) {
      kind = ErrKind::kInvalid, what = x.what();
    } catch (const std::exception& x) {
      kind = ErrKind::kOther, what = x.what();
    } catch (...) {
      what = "unknown error";
    }
  }
  Buf mine;
  mine.put<uint64_t>(e ? at : ~0ull);
  mine.put<int>(chip);
  mine.put<uint8_t>(static_cast<uint8_t>(kind));
  mine.put<unsigned>(code);
  mine.put<uint32_t>(cmd);
  mine.put_str(what);
  std::vector<Buf> all = allgather(mine);
  std::size_t best = all.size();
  uint64_t best_at = ~0ull;
  int best_chip = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto a = all[r].get<uint64_t>();
    const int c = all[r].get<int>();
    if (a == ~0ull) continue;
    if (best == all.size() || a < best_at || (a == best_at && c < best_chip)) {
      best = r, best_at = a, best_chip = c;
    }
  }
  Buf& b = all[best];
  g_agreed_error = true;
  const auto k = static_cast<ErrKind>(b.get<uint8_t>());
  const auto cd = b.get<unsigned>();
  const auto cm = b.get<uint32_t>();
  rethrow_as(k, b.get_str(), cd, best_chip, cm);
}

// This rank's core, or on every rank the error of a rank that could not build its own (a wave
// file only its owner opens, memory): a failure on one rank alone left the others waiting in
// their first collective.
std::unique_ptr<PodCore> build_core(const PodParams& p, const std::vector<int>& owned) {
  std::unique_ptr<PodCore> core;
  std::exception_ptr err;
  try {
    core = std::make_unique<PodCore>(p, owned);
  } catch (...) {
    err = std::current_exception();
  }
  agree_error(err, 0, p.topo.num_chips());
  return core;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// MpiPodHost
// ---------------------------------------------------------------------------------------------
namespace {
const PodParams& rank_params(const PodParams& p, const PodPartition& part) {
  if (p.link_latency == 0)
    throw std::invalid_argument(
        "pod: link_latency 0 with " + std::to_string(part.ranks) +
        " MPI ranks: the pod split across processes needs a link latency of >= 1 cycle (the "
        "window in which no process can affect another)");
  return p;
}
}  // namespace

// The core holds this rank's chips alone (and their links and host agents; each dumps waves,
// if asked, on its owner): a rank's memory and set-up grow with its part, not with the pod.
MpiPodHost::MpiPodHost(const PodParams& p)
    : rank_(mpi_world().rank),
      part_(PodPartition::slabs(p.topo, mpi_world().size)),
      own_(build_core(rank_params(p, part_), part_.chips[static_cast<std::size_t>(rank_)])),
      core_(*own_) {
  part_.find_cuts(core_);
  const auto built = static_cast<uint64_t>(core_.built_chips());
  uint64_t total = 0;
  MPI_Allreduce(&built, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  mpi_stats().chip_models = built;
  mpi_stats().chip_models_total = total;
  xch_ = std::make_unique<WindowExchange>(core_, part_, rank_);
  born_ = now();
}

MpiPodHost::~MpiPodHost() { mpi_stats().host_seconds += now() - born_; }

void MpiPodHost::agree_errors(std::exception_ptr e, uint64_t at) {
  agree_error(e, at, core_.num_chips());
}


template <class F>
void MpiPodHost::on_owner(int chip, F f) {
  if (chip < 0 || chip >= core_.num_chips())
    throw std::invalid_argument("host port: chip " + std::to_string(chip) +
                                " is not in the pod (0.." + std::to_string(core_.num_chips() - 1) +
                                ")");
  std::exception_ptr e;
  if (owns(chip)) {
    try {
      f();
    } catch (...) {
      e = std::current_exception();
    }
  }
  agree_errors(e, core_.cycle());
}

void MpiPodHost::step_one(bool chip_errors) {
  core_.step();
  if ((core_.cycle() & 1023) == 0) core_.check_errors(chip_errors);
}

void MpiPodHost::watchdog(uint64_t pod_progress) {
  const uint64_t w = core_.watchdog();
  core_.last_progress_ = std::max(core_.last_progress_, pod_progress);
  if (w == 0) return;
  const uint64_t t = core_.cycle();
  const uint64_t k = std::clamp<uint64_t>(w / 16, 1, 1024);
  if (t - core_.last_progress_ < k) return;
  if (t - core_.last_check_ < k) return;
  // Windows end only while some rank is not done, i.e. the pod is not idle: as PodCore::watch.
  if (allreduce_max(core_.work_changed() ? 1 : 0) != 0) {
    core_.last_progress_ = t;
    return;
  }
  if (t - core_.last_progress_ < w) return;
  PodCore::StallPart part = core_.stall_part(core_.owned());
  Buf mine;
  mine.put<uint64_t>(part.chips.size());
  for (const auto& c : part.chips) mine.put<int>(c.first), mine.put_str(c.second);
  mine.put<uint64_t>(part.links.size());
  for (const auto& l : part.links) mine.put<int>(l.first), mine.put_str(l.second);
  mine.put<uint64_t>(part.idle.size());
  for (int i : part.idle) mine.put<int>(i);
  std::vector<PodCore::StallPart> parts;
  for (Buf& b : allgather(mine)) {
    PodCore::StallPart p;
    for (auto n = b.get<uint64_t>(); n > 0; --n) {
      const int c = b.get<int>();
      p.chips.emplace_back(c, b.get_str());
    }
    for (auto n = b.get<uint64_t>(); n > 0; --n) {
      const int l = b.get<int>();
      p.links.emplace_back(l, b.get_str());
    }
    for (auto n = b.get<uint64_t>(); n > 0; --n) p.idle.push_back(b.get<int>());
    parts.push_back(std::move(p));
  }
  g_agreed_error = true;
  throw HangError(PodCore::compose_stall(core_.stall_header(t - core_.last_progress_), parts));
}

template <class Done>
void MpiPodHost::run_windows(Done done, uint64_t start, uint64_t max_cycles, bool chip_errors,
                             const char* suffix) {
  constexpr uint64_t kNever = ~0ull;
  const unsigned L = core_.params().link_latency;
  std::exception_ptr err;
  uint64_t err_at = 0;
  uint64_t next_progress = start + progress_every;
  for (;;) {
    const uint64_t t0 = core_.cycle();
    // This rank's chips through the window, up to the first cycle from which it is done: done
    // and, since every slot that arrives before the window's end is here, done to its end.
    uint64_t from = kNever;
    if (!err) {
      try {
        for (;;) {
          if (done()) {
            from = core_.cycle();
            break;
          }
          if (core_.cycle() == t0 + L) break;
          step_one(chip_errors);
        }
      } catch (...) {
        err = std::current_exception();
        err_at = core_.cycle();
      }
    }
    // The window's agreement: the pod is done from the latest rank's cycle (the first cycle
    // at which every rank is done); an error anywhere stops every rank alike.
    double t = now();
    uint64_t local[3] = {from, err ? 1u : 0u, 0}, all[3] = {};
    for (int c : core_.owned())
      local[2] = std::max(local[2], core_.chip_progress_[static_cast<std::size_t>(c)]);
    MPI_Allreduce(local, all, 3, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    mpi_stats().exchange_seconds += now() - t;
    if (all[1]) agree_errors(err, err_at);
    const uint64_t stop = all[0];
    // The cycles this rank deferred, up to the stop or the window's end: still done on each.
    const uint64_t target = stop != kNever ? stop : t0 + L;
    try {
      while (!err && core_.cycle() < target) {
        if (!done())
          throw PodError("pod (MPI rank " + std::to_string(rank_) +
                         "): chips became busy while deferred at cycle " +
                         std::to_string(core_.cycle()) + " (internal error)");
        step_one(chip_errors);
      }
    } catch (...) {
      err = std::current_exception();
      err_at = core_.cycle();
    }
    t = now();
    xch_->exchange(t0, static_cast<unsigned>(core_.cycle() - t0));
    ++mpi_stats().windows;
    mpi_stats().exchange_seconds += now() - t;
    if (stop != kNever) {
      agree_errors(err, err_at);
      return;
    }
    const uint64_t c = core_.cycle();
    if (progress && c >= next_progress) {
      progress(c - start);
      next_progress += progress_every;
    }
    // Every rank alike (their collectives must match), a rank with an error pending too.
    {
      watchdog(all[2]);
      if (c - start > max_cycles) {
        Buf mine;
        for (int i : core_.owned()) mine.put<int>(i), mine.put_str(core_.describe_chip(i));
        std::vector<std::pair<int, std::string>> lines;
        for (Buf& b : allgather(mine))
          while (b.at < b.b.size()) {
            const int i = b.get<int>();
            lines.emplace_back(i, b.get_str());
          }
        std::sort(lines.begin(), lines.end());
        std::string what = PodCore::hang_header(max_cycles);
        for (const auto& l : lines) what += "\n  " + l.second;
        g_agreed_error = true;
        throw PodError(what + suffix);
      }
    }
  }
}

uint64_t MpiPodHost::copy(const std::vector<HostCopy>& ops) {
  for (const HostCopy& o : ops) core_.check_copy(o);
  // As CppPodHost::copy, for this rank's chips.
  HostCopyQueues q(core_, ops, [this](int chip) { return owns(chip); });
  const uint64_t start = core_.cycle();
  run_windows([&] { return !q.advance(); }, start, 100'000'000, false,
              "\n(host port copies still running)");
  // What was read, from each chip's owner to every rank.
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].write || !ops[i].n) continue;
    if (owns(ops[i].chip)) std::memcpy(ops[i].data, q.read(i).data(), ops[i].n);
    bcast(ops[i].data, ops[i].n, part_.owner[static_cast<std::size_t>(ops[i].chip)]);
  }
  return core_.cycle() - start;
}

void MpiPodHost::backdoor_write(int chip, uint64_t addr, const void* data, std::size_t n) {
  on_owner(chip, [&] { core_.backdoor(chip, true, addr, const_cast<void*>(data), n); });
  backdoor_bytes_ += n;
}

void MpiPodHost::backdoor_read(int chip, uint64_t addr, void* data, std::size_t n) {
  on_owner(chip, [&] { core_.backdoor(chip, false, addr, data, n); });
  bcast(data, n, part_.owner[static_cast<std::size_t>(chip)]);
  backdoor_bytes_ += n;
}

void MpiPodHost::push(int chip, const std::vector<ChipCmd>& cmds) {
  if (chip < 0 || chip >= core_.num_chips())
    throw std::invalid_argument("push: chip " + std::to_string(chip) + " is not in the pod");
  if (owns(chip)) core_.agent(chip).push(cmds);
}

void MpiPodHost::clear(int chip) {
  on_owner(chip, [&] { core_.agent(chip).request_clear(); });
  const uint64_t start = core_.cycle();
  run_windows([&] { return core_.cycle() > start; }, start, ~0ull, false, "");
}

RunStats MpiPodHost::run_until_idle(uint64_t max_cycles, bool stop_on_error) {
  const uint64_t start = core_.cycle();
  run_windows([&] { return core_.idle(); }, start, max_cycles, stop_on_error, "");
  RunStats r;
  std::exception_ptr e;
  try {
    r = core_.finish_run(start, stop_on_error);
  } catch (...) {
    e = std::current_exception();
  }
  agree_errors(e, core_.cycle());
  // Each chip's cycles from its owner (0 elsewhere).
  std::vector<uint64_t> all(r.chip_cycles.size());
  MPI_Allreduce(r.chip_cycles.data(), all.data(), static_cast<int>(all.size()), MPI_UINT64_T,
                MPI_MAX, MPI_COMM_WORLD);
  r.chip_cycles = all;
  return r;
}

ChipStatus MpiPodHost::status(int chip) {
  static_assert(std::is_trivially_copyable_v<ChipStatus>);
  ChipStatus s;
  on_owner(chip, [&] { s = core_.status(chip); });
  bcast(&s, sizeof s, part_.owner[static_cast<std::size_t>(chip)]);
  return s;
}

ChipCounters MpiPodHost::counters(int chip) {
  static_assert(std::is_trivially_copyable_v<ChipCounters>);
  ChipCounters c;
  on_owner(chip, [&] { c = core_.counters(chip); });
  bcast(&c, sizeof c, part_.owner[static_cast<std::size_t>(chip)]);
  return c;
}

std::vector<LinkStat> MpiPodHost::link_stats() {
  // Every field from the one rank whose chip counts it (flits and the sender's counters on the
  // sender's rank, the CRC errors of flits on the receiver's: PodCore::link_stats counts only
  // its own chips'), summed over the ranks.
  std::vector<LinkStat> v = core_.link_stats();
  constexpr std::size_t kF = 5;
  std::vector<uint64_t> mine(kF * v.size()), all(kF * v.size());
  for (std::size_t l = 0; l < v.size(); ++l) {
    const LinkStat& x = v[l];
    const uint64_t f[kF] = {x.flits, x.crc_errors, x.replays, x.replayed_flits, x.link_down};
    for (std::size_t k = 0; k < kF; ++k) mine[kF * l + k] = f[k];
  }
  MPI_Allreduce(mine.data(), all.data(), static_cast<int>(all.size()), MPI_UINT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  for (std::size_t l = 0; l < v.size(); ++l) {
    v[l].flits = all[kF * l];
    v[l].crc_errors = all[kF * l + 1];
    v[l].replays = all[kF * l + 2];
    v[l].replayed_flits = all[kF * l + 3];
    v[l].link_down = all[kF * l + 4];
  }
  return v;
}

void MpiPodHost::trace_label(int chip, const std::string& label) {
  // On the chip's owner, whose recorder holds the chip's timeline; a chip outside the pod is
  // refused by PodCore on every rank alike.
  if (chip < 0 || chip >= core_.num_chips() || owns(chip)) core_.trace_label(chip, label);
}

std::vector<TraceEvent> MpiPodHost::take_trace() {
  static_assert(std::is_trivially_copyable_v<ChipCmd>);
  Buf mine;
  for (const TraceEvent& e : core_.take_trace()) {
    mine.put(e.chip), mine.put(e.unit), mine.put(e.lane), mine.put(e.issue), mine.put(e.done);
    mine.put(e.begin), mine.put(e.end), mine.put(e.index), mine.put(e.op), mine.put(e.cmd);
    mine.put_str(e.label);
    mine.put(e.write), mine.put(e.addr), mine.put(e.bytes);
  }
  std::vector<TraceEvent> v;
  for (Buf& b : allgather(mine)) {
    while (b.at < b.b.size()) {
      TraceEvent e;
      e.chip = b.get<int>(), e.unit = b.get<TraceUnit>(), e.lane = b.get<unsigned>();
      e.issue = b.get<uint64_t>(), e.done = b.get<uint64_t>(), e.begin = b.get<uint64_t>();
      e.end = b.get<uint64_t>(), e.index = b.get<int64_t>(), e.op = b.get<unsigned>();
      e.cmd = b.get<ChipCmd>();
      e.label = b.get_str();
      e.write = b.get<bool>(), e.addr = b.get<uint64_t>(), e.bytes = b.get<uint64_t>();
      v.push_back(std::move(e));
    }
  }
  // As PodCore::take_trace: by chip, then track, then time.
  std::stable_sort(v.begin(), v.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.chip != b.chip) return a.chip < b.chip;
    if (a.unit != b.unit) return a.unit < b.unit;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.begin < b.begin;
  });
  return v;
}
#endif

}  // namespace tpu
