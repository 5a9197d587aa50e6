#include "gpt_maps.h"

#include <limits>
#include <tuple>
#include <stdexcept>
#include <string>
#include <utility>

#include "tpu/transcend.h"

namespace tpu {

namespace {

// Builds a VpuMap from named pieces: inputs, constants (GptConst rows) and ops may be declared in
// any order; handles are translated into the map's numbering (inputs, constants, ops) at the end.
class MapBuilder {
 public:
  MapBuilder(const HbmMatrix& consts, std::size_t rows, std::size_t cols) {
    m_.rows = rows;
    m_.cols = cols;
    m_.consts = consts;
    m_.share_regions = true;
  }
  int in(const HbmMatrix& mat, MapIn kind = MapIn::kMatrix) {
    m_.in.push_back(mat);
    m_.in_kind.push_back(kind);
    return static_cast<int>(m_.in.size()) - 1;
  }
  int c(GptConst k) {
    for (std::size_t i = 0; i < consts_.size(); ++i)
      if (consts_[i] == k) return kConst + static_cast<int>(i);
    consts_.push_back(k);
    return kConst + static_cast<int>(consts_.size()) - 1;
  }
  int op(VpuOp o, int x, int y = -1, bool bf16 = false) {
    ops_.push_back(VpuMapOp{o, x, y, bf16});
    return kOp + static_cast<int>(ops_.size()) - 1;
  }
  void out(int v, const HbmMatrix& mat) { out_.emplace_back(v, mat); }
  void col_sum(int v, const HbmMatrix& mat) { sums_.emplace_back(v, mat); }

  VpuMap build() {
    if (!sums_.empty()) m_.zero_const = c(kGcZero) - kConst;  // before the numbering is fixed
    const int I = static_cast<int>(m_.in.size()), C = static_cast<int>(consts_.size());
    auto id = [&](int h) {
      if (h < 0) return h;
      if (h >= kOp) return I + C + (h - kOp);
      if (h >= kConst) return I + (h - kConst);
      return h;
    };
    for (GptConst k : consts_) m_.const_rows.push_back(k);
    for (VpuMapOp o : ops_) m_.ops.push_back(VpuMapOp{o.op, id(o.x), id(o.y), o.bf16});
    for (const auto& o : out_) m_.out.emplace_back(id(o.first), o.second);
    for (const auto& o : sums_) m_.col_sums.emplace_back(id(o.first), o.second);
    return m_;
  }

 private:
  static constexpr int kConst = 1 << 20, kOp = 1 << 21;
  VpuMap m_;
  std::vector<GptConst> consts_;
  std::vector<VpuMapOp> ops_;
  std::vector<std::pair<int, HbmMatrix>> out_, sums_;
};

// The shape every matrix of a map shares.
void same_shape(const HbmMatrix& a, const HbmMatrix& b, const char* map, const char* name) {
  if (a.rows != b.rows || a.cols != b.cols)
    throw std::invalid_argument(std::string(map) + ": " + name + " is " + std::to_string(b.rows) +
                                "x" + std::to_string(b.cols) + ", the map is " +
                                std::to_string(a.rows) + "x" + std::to_string(a.cols));
}

// xcend_gelu's ops on u: x2, then x rcp(1 + exp((x (x2 0.044715 + 1)) (-2 sqrt(2/pi)))); returns
// {x2, s = rcp(...)}.
std::pair<int, int> gelu_core(MapBuilder& b, int u) {
  const int x2 = b.op(VpuOp::kMul, u, u);
  const int a = b.op(VpuOp::kMul, x2, b.c(kGcGeluCubic));
  const int u1 = b.op(VpuOp::kAdd, a, b.c(kGcOne));
  const int inner = b.op(VpuOp::kMul, u, u1);
  const int w = b.op(VpuOp::kMul, inner, b.c(kGcGeluM2));
  const int e = b.op(VpuOp::kExp, w);
  const int d = b.op(VpuOp::kAdd, e, b.c(kGcOne));
  return {x2, b.op(VpuOp::kRcp, d)};
}

}  // namespace

std::vector<float> gpt_const_image(const GptSpec& spec, const AdamConsts& k, std::size_t lanes) {
  std::vector<float> v(kGcCount, 0.0f);
  v[kGcZero] = 0.0f;
  v[kGcOne] = 1.0f;
  v[kGcInvD] = xcend_rcp(static_cast<float>(spec.d_model));
  v[kGcLnEps] = 1e-5f;
  v[kGcScale] = xcend_rsqrt(static_cast<float>(spec.head_dim()));
  v[kGcLn2] = kGptLn2;
  v[kGcInvN] = xcend_rcp(static_cast<float>(spec.global_batch() * spec.seq));
  v[kGcGeluCubic] = kGeluCubic;
  v[kGcGeluM2] = kGeluMinus2Sqrt2OverPi;
  v[kGcGeluCubic3] = kGeluCubic3;
  v[kGcBeta1] = k.beta1;
  v[kGcOneMBeta1] = k.one_m_beta1;
  v[kGcBeta2] = k.beta2;
  v[kGcOneMBeta2] = k.one_m_beta2;
  v[kGcBc1] = k.bc1;
  v[kGcBc2] = k.bc2;
  v[kGcAdamEps] = k.eps;
  v[kGcDecay] = k.decay;
  v[kGcLr] = k.lr;
  v[kGcMinusOne] = -1.0f;
  std::vector<float> img(kGcCount * lanes);
  for (std::size_t r = 0; r < kGcCount; ++r)
    for (std::size_t l = 0; l < lanes; ++l) img[r * lanes + l] = v[r];
  return img;
}

std::vector<float> gpt_causal_mask(std::size_t rows, std::size_t S) {
  std::vector<float> m(rows * S);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < S; ++k)
      m[r * S + k] = k <= r % S ? -0.0f : -std::numeric_limits<float>::infinity();
  return m;
}

std::vector<float> gpt_target_sel(const std::vector<int32_t>& targets, std::size_t V) {
  std::vector<float> m(targets.size() * V, -std::numeric_limits<float>::infinity());
  for (std::size_t t = 0; t < targets.size(); ++t)
    m[t * V + static_cast<std::size_t>(targets[t])] = -0.0f;
  return m;
}

VpuMap gpt_ln_forward_map(const HbmMatrix& consts, const HbmMatrix& x, const HbmMatrix& g,
                          const HbmMatrix& bias, const HbmMatrix& y_bf16, const HbmMatrix& xhat,
                          const HbmMatrix& rstd) {
  MapBuilder b(consts, x.rows, x.cols);
  const int vx = b.in(x), vg = b.in(g, MapIn::kColumns), vb = b.in(bias, MapIn::kColumns);
  const int sum = b.op(VpuOp::kRedSum, vx);
  const int mean = b.op(VpuOp::kMul, sum, b.c(kGcInvD));
  const int c = b.op(VpuOp::kSub, vx, mean);
  const int sq = b.op(VpuOp::kRedSum, b.op(VpuOp::kMul, c, c));
  const int var = b.op(VpuOp::kMul, sq, b.c(kGcInvD));
  const int ve = b.op(VpuOp::kAdd, var, b.c(kGcLnEps));
  const int rs = b.op(VpuOp::kRsqrt, ve);
  const int xh = b.op(VpuOp::kMul, c, rs);
  const int xg = b.op(VpuOp::kMul, xh, vg);
  const int y = b.op(VpuOp::kAdd, xg, vb, /*bf16=*/true);
  b.out(y, y_bf16);
  b.out(xh, xhat);
  b.out(rs, rstd);
  return b.build();
}

VpuMap gpt_ln_backward_map(const HbmMatrix& consts, const HbmMatrix& dy, const HbmMatrix& xhat,
                           const HbmMatrix& rstd, const HbmMatrix& g, const HbmMatrix& dx,
                           const HbmMatrix& dg, const HbmMatrix& db) {
  same_shape(dy, xhat, "ln backward", "xhat");
  MapBuilder b(consts, dy.rows, dy.cols);
  const int vdy = b.in(dy), vxh = b.in(xhat), vrs = b.in(rstd, MapIn::kRows),
            vg = b.in(g, MapIn::kColumns);
  const int dxh = b.op(VpuOp::kMul, vdy, vg);
  const int p = b.op(VpuOp::kMul, dxh, vxh);
  const int dyx = b.op(VpuOp::kMul, vdy, vxh);
  const int sa = b.op(VpuOp::kRedSum, dxh);
  const int a = b.op(VpuOp::kMul, sa, b.c(kGcInvD));
  const int sc = b.op(VpuOp::kRedSum, p);
  const int c = b.op(VpuOp::kMul, sc, b.c(kGcInvD));
  const int t0 = b.op(VpuOp::kSub, dxh, a);
  const int t = b.op(VpuOp::kSub, t0, b.op(VpuOp::kMul, vxh, c));
  b.out(b.op(VpuOp::kMul, t, vrs), dx);
  b.col_sum(dyx, dg);
  b.col_sum(vdy, db);
  return b.build();
}

VpuMap gpt_softmax_map(const HbmMatrix& consts, const HbmMatrix& z, const HbmMatrix& mask,
                       const HbmMatrix& p, const HbmMatrix& p_bf16) {
  same_shape(z, mask, "softmax", "mask");
  MapBuilder b(consts, z.rows, z.cols);
  const int vz = b.in(z), vm = b.in(mask);
  const int zs = b.op(VpuOp::kMul, vz, b.c(kGcScale));
  const int t = b.op(VpuOp::kAdd, zs, vm);
  const int e = b.op(VpuOp::kExp, b.op(VpuOp::kSub, t, b.op(VpuOp::kRedMax, t)));
  const int rs = b.op(VpuOp::kRcp, b.op(VpuOp::kRedSum, e));
  const int pr = b.op(VpuOp::kMul, e, rs);
  b.out(pr, p);
  b.out(b.op(VpuOp::kCvtF32Bf16, pr), p_bf16);
  return b.build();
}

VpuMap gpt_softmax_row_map(const HbmMatrix& consts, const HbmMatrix& z, const HbmMatrix& mask_row,
                           const HbmMatrix& p_bf16) {
  if (mask_row.rows != 1) same_shape(z, mask_row, "softmax", "mask rows");
  MapBuilder b(consts, z.rows, z.cols);
  const int vz = b.in(z), vm = b.in(mask_row, mask_row.rows == 1 ? MapIn::kColumns : MapIn::kMatrix);
  const int zs = b.op(VpuOp::kMul, vz, b.c(kGcScale));
  const int t = b.op(VpuOp::kAdd, zs, vm);
  const int e = b.op(VpuOp::kExp, b.op(VpuOp::kSub, t, b.op(VpuOp::kRedMax, t)));
  const int rs = b.op(VpuOp::kRcp, b.op(VpuOp::kRedSum, e));
  const int pr = b.op(VpuOp::kMul, e, rs);  // a per-row y: f32 (VROW has no bf16 result)
  b.out(b.op(VpuOp::kCvtF32Bf16, pr), p_bf16);
  return b.build();
}

VpuMap gpt_copy_map(const HbmMatrix& from, const HbmMatrix& to) {
  same_shape(from, to, "copy", "to");
  MapBuilder b(HbmMatrix{}, from.rows, from.cols);
  b.out(b.in(from), to);
  return b.build();
}

VpuMap gpt_softmax_back_map(const HbmMatrix& consts, const HbmMatrix& p, const HbmMatrix& dp,
                            const HbmMatrix& ds_bf16) {
  same_shape(p, dp, "softmax backward", "dp");
  MapBuilder b(consts, p.rows, p.cols);
  const int vp = b.in(p), vdp = b.in(dp);
  const int dot = b.op(VpuOp::kRedSum, b.op(VpuOp::kMul, vp, vdp));
  const int w = b.op(VpuOp::kMul, vp, b.op(VpuOp::kSub, vdp, dot));
  b.out(b.op(VpuOp::kMul, w, b.c(kGcScale), /*bf16=*/true), ds_bf16);
  return b.build();
}

VpuMap gpt_cross_entropy_map(const HbmMatrix& consts, const HbmMatrix& logits,
                             const HbmMatrix& sel, const HbmMatrix& loss,
                             const HbmMatrix& dlogits_bf16) {
  same_shape(logits, sel, "cross-entropy", "sel");
  MapBuilder b(consts, logits.rows, logits.cols);
  const int vl = b.in(logits), vs = b.in(sel);
  const int mx = b.op(VpuOp::kRedMax, vl);
  const int e = b.op(VpuOp::kExp, b.op(VpuOp::kSub, vl, mx));
  const int s = b.op(VpuOp::kRedSum, e);
  const int l2 = b.op(VpuOp::kLog2, s);
  const int ln = b.op(VpuOp::kMul, l2, b.c(kGcLn2));
  const int lse = b.op(VpuOp::kAdd, mx, ln);
  const int picked = b.op(VpuOp::kRedMax, b.op(VpuOp::kAdd, vl, vs));
  b.out(b.op(VpuOp::kSub, lse, picked), loss);
  const int pr = b.op(VpuOp::kMul, e, b.op(VpuOp::kRcp, s));
  const int t = b.op(VpuOp::kMax, vs, b.c(kGcMinusOne));  // -0 at the target, -1 elsewhere
  const int onehot = b.op(VpuOp::kAdd, t, b.c(kGcOne));   // 1 at the target, +0 elsewhere
  const int dd = b.op(VpuOp::kSub, pr, onehot);
  b.out(b.op(VpuOp::kMul, dd, b.c(kGcInvN), /*bf16=*/true), dlogits_bf16);
  return b.build();
}

VpuMap gpt_window_loss_map(const HbmMatrix& loss, const HbmMatrix& parts) {
  MapBuilder b(HbmMatrix{}, loss.rows, loss.cols);
  b.out(b.op(VpuOp::kRedSum, b.in(loss)), parts);
  return b.build();
}

VpuMap gpt_gelu_map(const HbmMatrix& consts, const HbmMatrix& u, const HbmMatrix& a_bf16,
                    const HbmMatrix* s_out) {
  MapBuilder b(consts, u.rows, u.cols);
  const int vu = b.in(u);
  const int s = gelu_core(b, vu).second;
  b.out(b.op(VpuOp::kMul, vu, s, /*bf16=*/true), a_bf16);
  if (s_out) b.out(s, *s_out);
  return b.build();
}

VpuMap gpt_gelu_back_map(const HbmMatrix& consts, const HbmMatrix& da, const HbmMatrix& u,
                         const HbmMatrix& du_bf16, const HbmMatrix& db, const HbmMatrix* s_in) {
  same_shape(da, u, "gelu backward", "u");
  MapBuilder b(consts, da.rows, da.cols);
  const int vda = b.in(da), vu = b.in(u);
  int x2 = -1, s = -1;
  if (s_in) {  // the forward's s: the same bits as gelu_core's, read instead of computed again
    same_shape(da, *s_in, "gelu backward", "s");
    s = b.in(*s_in);
    x2 = b.op(VpuOp::kMul, vu, vu);
  } else {
    std::tie(x2, s) = gelu_core(b, vu);
  }
  const int dinner0 = b.op(VpuOp::kMul, x2, b.c(kGcGeluCubic3));
  const int dinner = b.op(VpuOp::kAdd, dinner0, b.c(kGcOne));
  int t = b.op(VpuOp::kMul, s, b.op(VpuOp::kSub, s, b.c(kGcOne)));
  t = b.op(VpuOp::kMul, t, b.c(kGcGeluM2));
  t = b.op(VpuOp::kMul, t, dinner);
  const int grad = b.op(VpuOp::kAdd, s, b.op(VpuOp::kMul, vu, t));
  const int du = b.op(VpuOp::kMul, vda, grad);
  b.out(b.op(VpuOp::kCvtF32Bf16, du), du_bf16);
  b.col_sum(du, db);
  return b.build();
}

VpuMap gpt_col_sum_map(const HbmMatrix& consts, const HbmMatrix& dy, const HbmMatrix& db,
                       const HbmMatrix* dy_bf16) {
  MapBuilder b(consts, dy.rows, dy.cols);
  const int v = b.in(dy);
  b.col_sum(v, db);
  if (dy_bf16) b.out(b.op(VpuOp::kCvtF32Bf16, v), *dy_bf16);
  return b.build();
}

VpuMap gpt_add_map(const HbmMatrix& a, const HbmMatrix& x, const HbmMatrix& out) {
  same_shape(a, x, "add", "b");
  MapBuilder b(HbmMatrix{}, a.rows, a.cols);
  b.out(b.op(VpuOp::kAdd, b.in(a), b.in(x)), out);
  return b.build();
}

VpuMap gpt_bias_residual_map(const HbmMatrix& y, const HbmMatrix& bias, const HbmMatrix& h,
                             const HbmMatrix& out) {
  same_shape(y, h, "bias and residual", "h");
  MapBuilder b(HbmMatrix{}, y.rows, y.cols);
  const int vy = b.in(y), vb = b.in(bias, MapIn::kColumns), vh = b.in(h);
  const int yb = b.op(VpuOp::kAdd, vy, vb);
  b.out(b.op(VpuOp::kAdd, vh, yb), out);
  return b.build();
}

VpuMap gpt_fill_map(const HbmMatrix& row, const HbmMatrix& out) {
  MapBuilder b(HbmMatrix{}, out.rows, out.cols);
  b.out(b.in(row, MapIn::kColumns), out);
  return b.build();
}

VpuMap gpt_adam_map(const HbmMatrix& consts, const HbmMatrix& w, const HbmMatrix& g,
                    const HbmMatrix& m, const HbmMatrix& v, bool decay, const HbmMatrix& w_bf16) {
  same_shape(w, g, "adam", "g");
  same_shape(w, m, "adam", "m");
  same_shape(w, v, "adam", "v");
  MapBuilder b(consts, w.rows, w.cols);
  const int vw = b.in(w), vg = b.in(g), vm = b.in(m), vv = b.in(v);
  const int bm = b.op(VpuOp::kMul, vm, b.c(kGcBeta1));
  const int m1 = b.op(VpuOp::kAdd, bm, b.op(VpuOp::kMul, vg, b.c(kGcOneMBeta1)));
  const int bv = b.op(VpuOp::kMul, vv, b.c(kGcBeta2));
  const int gg = b.op(VpuOp::kMul, vg, vg);
  const int v1 = b.op(VpuOp::kAdd, bv, b.op(VpuOp::kMul, gg, b.c(kGcOneMBeta2)));
  const int mh = b.op(VpuOp::kMul, m1, b.c(kGcBc1));
  const int vh = b.op(VpuOp::kMul, v1, b.c(kGcBc2));
  const int sq = b.op(VpuOp::kRcp, b.op(VpuOp::kRsqrt, vh));
  const int den = b.op(VpuOp::kAdd, sq, b.c(kGcAdamEps));
  const int u = b.op(VpuOp::kMul, mh, b.op(VpuOp::kRcp, den));
  const int w0 = decay ? b.op(VpuOp::kMul, vw, b.c(kGcDecay)) : vw;
  const int lu = b.op(VpuOp::kMul, u, b.c(kGcLr));
  const int w1 = b.op(VpuOp::kSub, w0, lu);
  b.out(w1, w);
  b.out(m1, m);
  b.out(v1, v);
  if (w_bf16.rows != 0) b.out(b.op(VpuOp::kCvtF32Bf16, w1), w_bf16);
  return b.build();
}

}  // namespace tpu
