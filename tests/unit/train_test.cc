// The golden training step (model/train.h): its gradients and loss against an independent f64
// formulation, replicas equal, the loss falling, the loss order, and the spec's rules.
#include "tpu/train.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "expect_invalid.h"
#include "tpu/vector.h"

namespace tpu {
namespace {

MlpSpec small_spec(int chips = 2) {
  MlpSpec s;
  s.widths = {32, 64, 32};
  s.batch = 24;
  s.chips = chips;
  s.lr = 0.1f;
  s.lanes = 16;
  s.loss_chunk = 7;
  return s;
}

// The chips' gradients summed in chip order (a plain sum: the pod's order is the plan's).
GradAllReduce plain_sum(std::vector<std::vector<double>>* seen = nullptr) {
  return [seen](std::size_t, const std::vector<std::vector<uint32_t>>& in) {
    std::vector<uint32_t> s(in[0].size());
    std::vector<double> d(in[0].size(), 0.0);
    for (std::size_t i = 0; i < s.size(); ++i) {
      float acc = -0.0f;
      for (const auto& c : in) {
        acc = f32_add(acc, f32_from_bits(c[i]));
        d[i] += f32_from_bits(c[i]);
      }
      s[i] = f32_bits(acc);
    }
    if (seen) seen->push_back(d);
    return std::vector<std::vector<uint32_t>>(in.size(), s);
  };
}

// f64 reference of the loss and the gradients (dW rows, then db), from the same bf16 inputs and
// bf16-rounded weights, without rounding anything in between.
struct Ref {
  double loss = 0;
  std::vector<std::vector<double>> grad;  // per layer: (in + 1) x out
};

Ref reference(const MlpSpec& s, const MlpParams& p, const MlpData& d) {
  const std::size_t N = s.global_batch(), L = s.layers();
  std::vector<std::vector<double>> act(L + 1), pre(L);
  act[0].resize(d.x.size());
  for (std::size_t i = 0; i < d.x.size(); ++i) act[0][i] = bf16_to_f32(d.x[i]);
  for (std::size_t l = 0; l < L; ++l) {
    const std::size_t in = s.widths[l], out = s.widths[l + 1];
    pre[l].assign(N * out, 0.0);
    act[l + 1].assign(N * out, 0.0);
    for (std::size_t r = 0; r < N; ++r)
      for (std::size_t j = 0; j < out; ++j) {
        double z = p[l].b[j];
        for (std::size_t k = 0; k < in; ++k)
          z += act[l][r * in + k] * bf16_to_f32(f32_to_bf16(p[l].w[k * out + j]));
        pre[l][r * out + j] = z;
        act[l + 1][r * out + j] = (l + 1 < L) ? std::max(z, 0.0) : z;
      }
  }
  Ref ref;
  const std::size_t dout = s.widths.back();
  std::vector<double> dy(N * dout);
  for (std::size_t i = 0; i < dy.size(); ++i) {
    const double e = act[L][i] - d.t[i];
    ref.loss += e * e;
    dy[i] = 2.0 * e / static_cast<double>(N * dout);
  }
  ref.loss /= static_cast<double>(N * dout);
  ref.grad.resize(L);
  for (std::size_t l = L; l-- > 0;) {
    const std::size_t in = s.widths[l], out = s.widths[l + 1];
    std::vector<double>& g = ref.grad[l];
    g.assign((in + 1) * out, 0.0);
    for (std::size_t r = 0; r < N; ++r)
      for (std::size_t j = 0; j < out; ++j) {
        for (std::size_t k = 0; k < in; ++k) g[k * out + j] += act[l][r * in + k] * dy[r * out + j];
        g[in * out + j] += dy[r * out + j];
      }
    if (l == 0) break;
    std::vector<double> da(N * in, 0.0);
    for (std::size_t r = 0; r < N; ++r)
      for (std::size_t k = 0; k < in; ++k) {
        double v = 0;
        for (std::size_t j = 0; j < out; ++j)
          v += dy[r * out + j] * bf16_to_f32(f32_to_bf16(p[l].w[k * out + j]));
        da[r * in + k] = pre[l - 1][r * in + k] > 0 ? v : 0.0;
      }
    dy = std::move(da);
  }
  return ref;
}

TEST(TrainGolden, GradientsAndLossMatchAnF64Reference) {
  const MlpSpec s = small_spec();
  const MlpParams p0 = init_mlp_params(s, 5);
  const MlpData d = make_mlp_data(s, 5);
  MlpGolden g(s, p0);
  std::vector<std::vector<double>> seen;
  const MlpStepResult r = g.step(d, plain_sum(&seen));
  const Ref ref = reference(s, p0, d);
  EXPECT_NEAR(r.loss, ref.loss, 0.01 * ref.loss);
  ASSERT_EQ(seen.size(), s.layers());
  for (std::size_t l = 0; l < s.layers(); ++l) {
    double mx = 0, err = 0;
    for (std::size_t i = 0; i < ref.grad[l].size(); ++i) {
      mx = std::max(mx, std::fabs(ref.grad[l][i]));
      err = std::max(err, std::fabs(seen[l][i] - ref.grad[l][i]));
    }
    ASSERT_GT(mx, 0.0);
    // bf16 activations and gradients: a few units of 2^-8 of the largest gradient.
    EXPECT_LT(err, 0.03 * mx) << "layer " << l;
  }
  // SGD: w_new = w - lr * g within one f32 rounding of the summed gradient's use.
  for (std::size_t l = 0; l < s.layers(); ++l)
    for (std::size_t i = 0; i < p0[l].w.size(); ++i) {
      const double want = p0[l].w[i] - double{s.lr} * seen[l][i];
      EXPECT_NEAR(g.params(0)[l].w[i], want, 1e-6 + 1e-6 * std::fabs(want));
    }
}

TEST(TrainGolden, ReplicasStayEqualAndTheLossFalls) {
  MlpSpec s = small_spec(4);
  s.lr = 0.5f;
  MlpGolden g(s, init_mlp_params(s, 9));
  const MlpData d = make_mlp_data(s, 9);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    const double loss = g.step(d, plain_sum()).loss;
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_LT(last, 0.5 * first);
  for (int c = 1; c < s.chips; ++c)
    for (std::size_t l = 0; l < s.layers(); ++l) {
      EXPECT_EQ(g.params(c)[l].w, g.params(0)[l].w);
      EXPECT_EQ(g.params(c)[l].b, g.params(0)[l].b);
    }
}

// Tensor parallel (the hidden layer split over 2 model ranks, 2 data ranks) against data
// parallel over 2 chips on the same global batch: the same network up to the order of the last
// layer's sum (partial products added over the model axis), so the same loss to f32 precision
// and weights close after a few steps; the shards reassemble (mlp_unshard) into the network.
TEST(TrainGolden, TensorParallelMatchesDataParallel) {
  MlpSpec dp = small_spec(2);
  dp.widths = {32, 64, 32};
  MlpSpec tp = dp;
  tp.chips = 4;
  tp.model = 2;
  tp.data_rank = {0, 0, 1, 1};
  tp.model_rank = {0, 1, 0, 1};
  const MlpParams init = init_mlp_params(dp, 21);
  EXPECT_EQ(mlp_unshard(tp, {mlp_shard(tp, init, 0), mlp_shard(tp, init, 1)})[0].w, init[0].w);
  const MlpData data = make_mlp_data(dp, 21);
  ASSERT_EQ(make_mlp_data(tp, 21).x, data.x);  // the same global batch
  MlpGolden gd(dp, init), gt(tp, init);
  // Sums over the data ranks (same model rank) and over the model ranks (same data rank).
  auto group_sum = [](const MlpSpec& s, bool model_axis) {
    return [s, model_axis](const std::vector<std::vector<uint32_t>>& in) {
      std::vector<std::vector<uint32_t>> out(in.size());
      for (int c = 0; c < s.chips; ++c) {
        std::vector<uint32_t> v(in[0].size());
        for (std::size_t i = 0; i < v.size(); ++i) {
          float acc = -0.0f;
          for (int o = 0; o < s.chips; ++o) {
            const bool same = model_axis ? s.data_rank_of(o) == s.data_rank_of(c)
                                         : s.model_rank_of(o) == s.model_rank_of(c);
            if (same) acc = f32_add(acc, f32_from_bits(in[static_cast<std::size_t>(o)][i]));
          }
          v[i] = f32_bits(acc);
        }
        out[static_cast<std::size_t>(c)] = v;
      }
      return out;
    };
  };
  const auto tp_grad = group_sum(tp, false), tp_model = group_sum(tp, true);
  for (int step = 0; step < 3; ++step) {
    const double ld = gd.step(data, plain_sum()).loss;
    const double lt = gt.step(data, [&](std::size_t, const auto& in) { return tp_grad(in); },
                              tp_model).loss;
    EXPECT_NEAR(lt, ld, 1e-5 * ld) << "step " << step;
  }
  const MlpParams a = gd.params(0), b = mlp_unshard(tp, {gt.params(0), gt.params(1)});
  for (std::size_t l = 0; l < a.size(); ++l)
    for (std::size_t i = 0; i < a[l].w.size(); ++i)
      EXPECT_NEAR(b[l].w[i], a[l].w[i], 1e-4) << "layer " << l << " w " << i;
  // Replicas along the data axis are equal.
  EXPECT_EQ(gt.params(2)[0].w, gt.params(0)[0].w);
  EXPECT_EQ(gt.params(3)[1].w, gt.params(1)[1].w);
}

TEST(TrainGolden, LossPartialFollowsTheChunkedFoldOrder) {
  // 3 rows x 32 columns, 16 lanes, chunks of 2 rows: acc has 4 memory rows; chunk 1 adds its
  // 2 memory rows into acc rows 0, 1; then rows [0, 2) += [2, 4), then row 0 += row 1.
  std::vector<float> d(3 * 32);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  const auto got = mlp_loss_partial(d, 3, 32, 16, 2);
  ASSERT_EQ(got.size(), 16u);
  for (std::size_t l = 0; l < 16; ++l) {
    float acc[4];
    for (std::size_t r = 0; r < 4; ++r) acc[r] = f32_mul(d[r * 16 + l], d[r * 16 + l]);
    for (std::size_t r = 0; r < 2; ++r)
      acc[r] = f32_add(f32_mul(d[(4 + r) * 16 + l], d[(4 + r) * 16 + l]), acc[r]);
    acc[0] = f32_add(acc[0], acc[2]);
    acc[1] = f32_add(acc[1], acc[3]);
    acc[0] = f32_add(acc[0], acc[1]);
    EXPECT_EQ(f32_bits(got[l]), f32_bits(acc[0])) << l;
  }
}

TEST(TrainGolden, SpecRules) {
  MlpSpec s = small_spec();
  s.widths = {32, 48, 32};
  expect_invalid([&] { s.validate(); }, {"multiple of 32"});
  s = small_spec();
  s.widths = {32};
  expect_invalid([&] { s.validate(); }, {"at least two widths"});
  s = small_spec();
  s.batch = 0;
  expect_invalid([&] { s.validate(); }, {"batch"});
  s = small_spec();
  s.lr = -1;
  expect_invalid([&] { s.validate(); }, {"lr"});
  s = small_spec();
  s.lanes = 128;
  s.widths = {64, 128};
  expect_invalid([&] { s.validate(); }, {"multiple of 128"});
  s = small_spec(4);
  s.model = 2;
  s.data_rank = {0, 0, 1, 1};
  s.model_rank = {0, 1, 0, 1};
  s.widths = {32, 32, 32};
  expect_invalid([&] { s.validate(); }, {"hidden width 32", "multiple of 64"});
  s.widths = {32, 64, 64, 32};
  expect_invalid([&] { s.validate(); }, {"two-layer"});
  s.widths = {32, 64, 32};
  s.model_rank = {0, 0, 0, 1};
  expect_invalid([&] { s.validate(); }, {"two chips have data rank 0 and model rank 0"});
}

}  // namespace
}  // namespace tpu
