#include "shard_plan.h"

#include <cctype>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tpu {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::string q(const std::string& axis) { return axis.empty() ? "-" : "'" + axis + "'"; }

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

std::string PSpec::text() const {
  return (d[0].empty() ? "-" : d[0]) + "," + (d[1].empty() ? "-" : d[1]);
}

PSpec parse_pspec(const std::string& text, const std::string& flag) {
  const std::string where = flag + " '" + text + "': ";
  PSpec s;
  const std::size_t comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos)
    bad(where +
        "needs two entries, one per dimension (rows,columns), each a mesh axis or '-'; "
        "e.g. data,-");
  const std::string parts[2] = {trim(text.substr(0, comma)), trim(text.substr(comma + 1))};
  for (int i = 0; i < 2; ++i) {
    if (parts[i].empty())
      bad(where + "entry " + std::to_string(i) +
          " is empty; use '-' for "
          "a replicated dimension");
    if (parts[i] == "-") continue;
    for (char ch : parts[i])
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'))
        bad(where + "axis name '" + parts[i] + "': only letters, digits and '_'");
    s.d[static_cast<std::size_t>(i)] = parts[i];
  }
  return s;
}

int ShardPlan::axis_size(const std::string& axis) const {
  return axis.empty() ? 1 : mesh.axis_size(axis);
}

int ShardPlan::axis_rank(const std::string& axis, int chip) const {
  return axis.empty() ? 0 : group_rank(topo, mesh_axis_dims(topo, mesh, axis), chip);
}

Range ShardPlan::block(const std::string& axis, std::size_t padded, int chip) const {
  const std::size_t p = static_cast<std::size_t>(axis_size(axis));
  const std::size_t r = static_cast<std::size_t>(axis_rank(axis, chip));
  const std::size_t sz = padded / p;
  return Range{r * sz, (r + 1) * sz};
}

std::size_t ShardPlan::chip_macs() const {
  std::size_t macs = 0;
  for (int c = 0; c < topo.num_chips(); ++c)
    macs += mm_rows(c).size() * mm_k(c).size() * mm_cols(c).size();
  return macs;
}

std::string ShardPlan::describe() const {
  std::ostringstream os;
  os << "Y[" << m << "x" << n << "] = X[" << m << "x" << k << "] @ W[" << k << "x" << n
     << "] on mesh " << mesh.text() << ": X " << x.text() << ", W " << w.text() << ", Y "
     << y.text() << "\n";
  if (mp != m || kp != k || np != n)
    os << "  padded to " << mp << "x" << kp << "x" << np << " (zeros)\n";
  for (const ShardCollective& c : pre)
    os << "  before: " << collective_name(c.kind) << " of " << c.tensor << " over " << q(c.axis)
       << ": " << c.why << "\n";
  os << "  each chip: rows over " << q(xm_used) << ", K over " << q(k_axis) << ", columns over "
     << q(wn_used) << (k_axis.empty() ? "" : " (partial sums)") << "\n";
  for (const ShardCollective& c : post)
    os << "  after: " << collective_name(c.kind) << " of " << c.tensor << " over " << q(c.axis)
       << ": " << c.why << "\n";
  return os.str();
}

namespace {
// A split over an axis of size 1 is no split ("data=4,model=1": '-' for model), so the plan is
// the one of the mesh without it (the same programs, the same bits).
PSpec without_unit_axes(PSpec s, const Mesh& mesh) {
  for (std::string& a : s.d)
    if (!a.empty() && mesh.axis_size(a) == 1) a.clear();
  return s;
}

// A spec names axes of the mesh, each at most once. `flag` names the option in errors.
void check_spec(const Mesh& mesh, const PSpec& s, const std::string& flag) {
  for (const std::string& a : s.d) {
    if (a.empty()) continue;
    bool found = false;
    std::string names;
    for (const MeshAxis& ma : mesh.axes) {
      found = found || ma.name == a;
      names += (names.empty() ? "" : ", ") + ma.name;
    }
    if (!found)
      bad(flag + " " + s.text() + ": axis '" + a + "' is not in the mesh " + mesh.text() +
          " (its axes: " + names + ")");
  }
  if (!s.d[0].empty() && s.d[0] == s.d[1])
    bad(flag + " " + s.text() + ": axis '" + s.d[0] +
        "' is used twice; an axis splits at "
        "most one dimension of a tensor");
}

// A collective of the plan over `axis`: its torus dimensions from the plan's mesh.
ShardCollective collective_over(const ShardPlan& p, Collective kind, const std::string& axis,
                                char tensor, int dim, std::string why) {
  ShardCollective c;
  c.kind = kind;
  c.axis = axis;
  c.dims = mesh_axis_dims(p.topo, p.mesh, axis);
  c.tensor = tensor;
  c.dim = dim;
  c.why = std::move(why);
  return c;
}

// W all-gathered on `dim` (0: K, 1: N) over `axis` before the matmul.
void gather_w(ShardPlan& p, int dim, const std::string& axis, const std::string& why) {
  p.pre.push_back(collective_over(p, Collective::kAllGather, axis, 'W', dim, why));
  (dim == 0 ? p.w_gathered_k : p.w_gathered_n) = true;
}

// Rules 1 and 2 on p.x and p.w: the axis K is split over, W's gathers, and the axes the
// product's rows and columns are split over.
void plan_contracting(ShardPlan& p) {
  const std::string& xm = p.x.d[0];
  const std::string& xk = p.x.d[1];
  const std::string& wk = p.w.d[0];
  const std::string& wn = p.w.d[1];
  p.wn_used = wn;
  if (xk == wk) {
    p.k_axis = xk;
  } else {
    if (!wk.empty()) {
      if (xk.empty() && xm != wk) {
        p.k_axis = wk;  // X's K sliced locally over W's axis
      } else {
        gather_w(p, 0, wk,
                 "W splits K over '" + wk + "', which X " +
                     (xk.empty() ? "uses for its rows" : "does not split K over") +
                     ": W is gathered on K");
      }
    }
    if (!xk.empty() && p.k_axis.empty()) {
      if (wn == xk) {
        gather_w(p, 1, wn,
                 "X splits K over '" + xk +
                     "' and W splits N over it: W is gathered "
                     "on N and sliced on K");
        p.wn_used.clear();
      }
      p.k_axis = xk;  // W's K sliced locally over X's axis
    }
  }
  // Rule 2: X's rows and W's columns over one axis.
  if (!xm.empty() && xm == p.wn_used) {
    gather_w(p, 1, wn,
             "X's rows and W's columns are both split over '" + wn + "': W is gathered on N");
    p.wn_used.clear();
  }
  p.xm_used = xm;
}

// What rule 3 asks of Y's rows and columns beyond the product's split.
struct YMoves {
  bool rs_rows = false, rs_cols = false;  // K partial sums reduce-scattered on rows / columns
  bool ag_rows = false;                   // Y all-gathered on rows after the matmul
};

// Rule 3 for Y's rows (`r0`): a reduce-scatter, an all-gather, or X's rows sliced locally.
void plan_y_rows(ShardPlan& p, const std::string& r0, const std::string& where, YMoves& mv) {
  if (!p.k_axis.empty() && r0 == p.k_axis) {
    if (!p.xm_used.empty())
      bad(where + "Y's rows over the K axis '" + p.k_axis + "' while X's rows are split over '" +
          p.xm_used + "': not supported (use " + p.xm_used + " for Y's rows)");
    mv.rs_rows = true;
  } else if (r0 == p.xm_used) {
  } else if (r0.empty()) {
    mv.ag_rows = true;
  } else if (p.xm_used.empty() && r0 != p.wn_used) {
    p.xm_used = r0;  // X's rows sliced locally
  } else {
    bad(where + "Y's rows split over " + q(r0) + " while the product's rows are split over " +
        q(p.xm_used) + (r0 == p.wn_used ? " and its columns over " + q(r0) : std::string()) +
        ": resharding between two axes is not supported");
  }
}

// Rule 3 for Y's columns (`r1`): a reduce-scatter, W gathered on N, or W's columns sliced.
void plan_y_cols(ShardPlan& p, const std::string& r1, const std::string& where, YMoves& mv) {
  if (!p.k_axis.empty() && r1 == p.k_axis) {
    if (!p.wn_used.empty())
      bad(where + "Y's columns over the K axis '" + p.k_axis +
          "' while W's columns are split over '" + p.wn_used + "': not supported");
    mv.rs_cols = true;
  } else if (r1 == p.wn_used) {
  } else if (r1.empty()) {
    gather_w(p, 1, p.wn_used,
             "Y replicates N, which W splits over '" + p.wn_used + "': W is gathered on N");
    p.wn_used.clear();
  } else if (p.wn_used.empty() && r1 != p.xm_used) {
    p.wn_used = r1;  // W's columns sliced locally
  } else {
    bad(where + "Y's columns split over " + q(r1) + " while the product's columns are split " +
        "over " + q(p.wn_used) + ": resharding between two axes is not supported");
  }
}

// Rule 3: Y's spec (`y` null: the product's own), and the collectives after the matmul.
void plan_output(ShardPlan& p, const PSpec* y) {
  PSpec want;
  want.d = {p.xm_used, p.wn_used};
  if (y) want = *y;
  const std::string where = "--y-spec " + want.text() + ": ";
  YMoves mv;
  plan_y_rows(p, want.d[0], where, mv);
  plan_y_cols(p, want.d[1], where, mv);
  p.y = want;
  p.c_col_blocks = mv.rs_cols;
  if (!p.k_axis.empty()) {
    const bool rs = mv.rs_rows || mv.rs_cols;
    p.post.push_back(
        collective_over(p, rs ? Collective::kReduceScatter : Collective::kAllReduce, p.k_axis, 'Y',
                        mv.rs_rows   ? 0
                        : mv.rs_cols ? 1
                                     : -1,
                        std::string("K is split over '") + p.k_axis + "': the partial sums are " +
                            (mv.rs_rows   ? "reduce-scattered on Y's rows"
                             : mv.rs_cols ? "reduce-scattered on Y's columns"
                                          : "all-reduced (Y does not split over it)")));
  }
  if (mv.ag_rows)
    p.post.push_back(collective_over(p, Collective::kAllGather, p.xm_used, 'Y', 0,
                                     "Y replicates its rows, which the product splits over '" +
                                         p.xm_used + "': Y is gathered on rows"));
}

// Padding: every split dimension to a multiple of its axes' sizes; split column dimensions
// to whole 32-element blocks.
void pad(ShardPlan& p) {
  auto lcm_of = [&](std::initializer_list<std::string> axes) {
    std::size_t l = 1;
    for (const std::string& a : axes)
      if (!a.empty()) l = std::lcm(l, static_cast<std::size_t>(p.axis_size(a)));
    return l;
  };
  const std::size_t lm = lcm_of({p.x.d[0], p.xm_used, p.y.d[0]});
  const std::size_t lk = lcm_of({p.x.d[1], p.w.d[0], p.k_axis});
  const std::size_t ln = lcm_of({p.w.d[1], p.wn_used, p.y.d[1]});
  p.mp = round_up(p.m, lm);
  p.kp = (p.x.d[1].empty() && p.w.d[0].empty() && p.k_axis.empty()) ? p.k : round_up(p.k, 32 * lk);
  p.np = (p.w.d[1].empty() && p.wn_used.empty() && p.y.d[1].empty()) ? p.n : round_up(p.n, 32 * ln);
}
}  // namespace

ShardPlan plan_sharding(const Topology& topo, const Mesh& mesh, std::size_t m, std::size_t k,
                        std::size_t n, const PSpec& x_given, const PSpec& w_given,
                        const PSpec* y_given) {
  topo.validate();
  if (m == 0 || k == 0 || n == 0)
    bad("--m/--k/--n: " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
        ": every size must be >= 1");
  ShardPlan p;
  p.topo = topo;
  p.mesh = mesh;
  p.m = m;
  p.k = k;
  p.n = n;
  check_mesh(topo, mesh);  // pod match
  check_spec(mesh, x_given, "--x-spec");
  check_spec(mesh, w_given, "--w-spec");
  if (y_given) check_spec(mesh, *y_given, "--y-spec");
  p.x = without_unit_axes(x_given, mesh);
  p.w = without_unit_axes(w_given, mesh);
  const PSpec y_copy = y_given ? without_unit_axes(*y_given, mesh) : PSpec{};
  plan_contracting(p);                          // rules 1 and 2
  plan_output(p, y_given ? &y_copy : nullptr);  // rule 3
  pad(p);
  return p;
}

}  // namespace tpu
