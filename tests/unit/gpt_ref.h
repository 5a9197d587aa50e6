// An independent f64 reference of one GPT step's loss and gradients (the section 2 in
// plain loops, no bf16, libm's exp/tanh/sqrt), sharing no code with the golden (tpu/gpt.h): the
// test of the golden's gradients.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpu::ref {

using Vec = std::vector<double>;

struct Shape {
  std::size_t L, d, H, S, V, n;  // n: windows
};

// C [m x n] = A [m x k] B [k x n]; ta: A given as [k x m]; tb: B given as [n x k].
inline Vec mul(const Vec& a, const Vec& b, std::size_t m, std::size_t k, std::size_t n,
               bool ta = false, bool tb = false) {
  Vec c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t kk = 0; kk < k; ++kk) {
      const double x = ta ? a[kk * m + i] : a[i * k + kk];
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += x * (tb ? b[j * k + kk] : b[kk * n + j]);
    }
  return c;
}

struct Ln {
  Vec xh, rs;
};
inline Vec ln_fwd(const Vec& x, std::size_t rows, std::size_t n, const Vec& g, const Vec& b,
                  Ln& c) {
  Vec y(rows * n);
  c.xh.assign(rows * n, 0);
  c.rs.assign(rows, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (std::size_t j = 0; j < n; ++j) mu += x[r * n + j];
    mu /= static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j) var += (x[r * n + j] - mu) * (x[r * n + j] - mu);
    c.rs[r] = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
    for (std::size_t j = 0; j < n; ++j) {
      c.xh[r * n + j] = (x[r * n + j] - mu) * c.rs[r];
      y[r * n + j] = c.xh[r * n + j] * g[j] + b[j];
    }
  }
  return y;
}
inline Vec ln_bwd(const Vec& dy, std::size_t rows, std::size_t n, const Vec& g, const Ln& c,
                  Vec& dg, Vec& db) {
  Vec dx(rows * n);
  for (std::size_t r = 0; r < rows; ++r) {
    double a = 0, b = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double t = dy[r * n + j] * g[j];
      a += t;
      b += t * c.xh[r * n + j];
      dg[j] += dy[r * n + j] * c.xh[r * n + j];
      db[j] += dy[r * n + j];
    }
    a /= static_cast<double>(n);
    b /= static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j)
      dx[r * n + j] = c.rs[r] * (dy[r * n + j] * g[j] - a - c.xh[r * n + j] * b);
  }
  return dx;
}

inline double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double gelu_d(double x) {
  const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// Loss and gradients of params p (the golden's order; p[k] flattened) on windows of S + 1 tokens.
inline double step(const Shape& s, const std::vector<Vec>& p, const std::vector<int32_t>& win,
                   std::vector<Vec>& g) {
  const std::size_t d = s.d, T = s.n * s.S, dh = d / s.H, F = 4 * d, V = s.V;
  g.clear();
  for (const Vec& t : p) g.emplace_back(t.size(), 0.0);
  auto P = [&](std::size_t l, std::size_t k) -> const Vec& { return p[2 + 12 * l + k]; };
  auto G = [&](std::size_t l, std::size_t k) -> Vec& { return g[2 + 12 * l + k]; };
  std::vector<int32_t> in(T), tg(T);
  for (std::size_t w = 0; w < s.n; ++w)
    for (std::size_t i = 0; i < s.S; ++i) {
      in[w * s.S + i] = win[w * (s.S + 1) + i];
      tg[w * s.S + i] = win[w * (s.S + 1) + i + 1];
    }
  Vec h(T * d);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < d; ++j)
      h[t * d + j] = p[0][static_cast<std::size_t>(in[t]) * d + j] + p[1][(t % s.S) * d + j];
  struct Cache {
    Ln l1, l2;
    Vec x1, qkv, pr, att, x2, u, a;
  };
  std::vector<Cache> c(s.L);
  for (std::size_t l = 0; l < s.L; ++l) {
    Cache& k = c[l];
    k.x1 = ln_fwd(h, T, d, P(l, 0), P(l, 1), k.l1);
    k.qkv = mul(k.x1, P(l, 2), T, d, 3 * d);
    for (std::size_t i = 0; i < k.qkv.size(); ++i) k.qkv[i] += P(l, 3)[i % (3 * d)];
    k.pr.assign(s.n * s.H * s.S * s.S, 0.0);
    k.att.assign(T * d, 0.0);
    for (std::size_t w = 0; w < s.n; ++w)
      for (std::size_t hh = 0; hh < s.H; ++hh)
        for (std::size_t i = 0; i < s.S; ++i) {
          double* pr = &k.pr[((w * s.H + hh) * s.S + i) * s.S];
          double mx = -1e300, sum = 0;
          for (std::size_t j = 0; j <= i; ++j) {
            double z = 0;
            for (std::size_t x = 0; x < dh; ++x)
              z += k.qkv[(w * s.S + i) * 3 * d + hh * dh + x] *
                   k.qkv[(w * s.S + j) * 3 * d + d + hh * dh + x];
            pr[j] = z / std::sqrt(static_cast<double>(dh));
            mx = std::max(mx, pr[j]);
          }
          for (std::size_t j = 0; j <= i; ++j) sum += (pr[j] = std::exp(pr[j] - mx));
          for (std::size_t j = 0; j <= i; ++j) pr[j] /= sum;
          for (std::size_t j = 0; j <= i; ++j)
            for (std::size_t x = 0; x < dh; ++x)
              k.att[(w * s.S + i) * d + hh * dh + x] +=
                  pr[j] * k.qkv[(w * s.S + j) * 3 * d + 2 * d + hh * dh + x];
        }
    const Vec o = mul(k.att, P(l, 4), T, d, d);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += o[i] + P(l, 5)[i % d];
    k.x2 = ln_fwd(h, T, d, P(l, 6), P(l, 7), k.l2);
    k.u = mul(k.x2, P(l, 8), T, d, F);
    k.a.resize(k.u.size());
    for (std::size_t i = 0; i < k.u.size(); ++i) k.a[i] = gelu(k.u[i] += P(l, 9)[i % F]);
    const Vec m = mul(k.a, P(l, 10), T, F, d);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += m[i] + P(l, 11)[i % d];
  }
  const std::size_t f = 2 + 12 * s.L;
  Ln lf;
  const Vec xf = ln_fwd(h, T, d, p[f], p[f + 1], lf);
  Vec dl = mul(xf, p[f + 2], T, d, V);
  double loss = 0;
  for (std::size_t t = 0; t < T; ++t) {
    double mx = -1e300, sum = 0;
    for (std::size_t v = 0; v < V; ++v) mx = std::max(mx, dl[t * V + v]);
    for (std::size_t v = 0; v < V; ++v) sum += std::exp(dl[t * V + v] - mx);
    const std::size_t y = static_cast<std::size_t>(tg[t]);
    loss += mx + std::log(sum) - dl[t * V + y];
    for (std::size_t v = 0; v < V; ++v)
      dl[t * V + v] =
          (std::exp(dl[t * V + v] - mx) / sum - (v == y ? 1.0 : 0.0)) / static_cast<double>(T);
  }
  g[f + 2] = mul(xf, dl, d, T, V, true);
  Vec dh_ = ln_bwd(mul(dl, p[f + 2], T, V, d, false, true), T, d, p[f], lf, g[f], g[f + 1]);
  for (std::size_t l = s.L; l-- > 0;) {
    Cache& k = c[l];
    for (std::size_t i = 0; i < dh_.size(); ++i) G(l, 11)[i % d] += dh_[i];
    G(l, 10) = mul(k.a, dh_, F, T, d, true);
    Vec du = mul(dh_, P(l, 10), T, d, F, false, true);
    for (std::size_t i = 0; i < du.size(); ++i) {
      du[i] *= gelu_d(k.u[i]);
      G(l, 9)[i % F] += du[i];
    }
    G(l, 8) = mul(k.x2, du, d, T, F, true);
    Vec dx = ln_bwd(mul(du, P(l, 8), T, F, d, false, true), T, d, P(l, 6), k.l2, G(l, 6), G(l, 7));
    for (std::size_t i = 0; i < dh_.size(); ++i) dh_[i] += dx[i];
    for (std::size_t i = 0; i < dh_.size(); ++i) G(l, 5)[i % d] += dh_[i];
    G(l, 4) = mul(k.att, dh_, d, T, d, true);
    const Vec datt = mul(dh_, P(l, 4), T, d, d, false, true);
    Vec dqkv(T * 3 * d, 0.0);
    for (std::size_t w = 0; w < s.n; ++w)
      for (std::size_t hh = 0; hh < s.H; ++hh)
        for (std::size_t i = 0; i < s.S; ++i) {
          const double* pr = &k.pr[((w * s.H + hh) * s.S + i) * s.S];
          Vec dp(i + 1, 0.0);
          double dot = 0;
          for (std::size_t j = 0; j <= i; ++j) {
            for (std::size_t x = 0; x < dh; ++x) {
              const double go = datt[(w * s.S + i) * d + hh * dh + x];
              dp[j] += go * k.qkv[(w * s.S + j) * 3 * d + 2 * d + hh * dh + x];
              dqkv[(w * s.S + j) * 3 * d + 2 * d + hh * dh + x] += pr[j] * go;
            }
            dot += pr[j] * dp[j];
          }
          for (std::size_t j = 0; j <= i; ++j) {
            const double dz = pr[j] * (dp[j] - dot) / std::sqrt(static_cast<double>(dh));
            for (std::size_t x = 0; x < dh; ++x) {
              dqkv[(w * s.S + i) * 3 * d + hh * dh + x] +=
                  dz * k.qkv[(w * s.S + j) * 3 * d + d + hh * dh + x];
              dqkv[(w * s.S + j) * 3 * d + d + hh * dh + x] +=
                  dz * k.qkv[(w * s.S + i) * 3 * d + hh * dh + x];
            }
          }
        }
    for (std::size_t i = 0; i < dqkv.size(); ++i) G(l, 3)[i % (3 * d)] += dqkv[i];
    G(l, 2) = mul(k.x1, dqkv, d, T, 3 * d, true);
    dx =
        ln_bwd(mul(dqkv, P(l, 2), T, 3 * d, d, false, true), T, d, P(l, 0), k.l1, G(l, 0), G(l, 1));
    for (std::size_t i = 0; i < dh_.size(); ++i) dh_[i] += dx[i];
  }
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < d; ++j) {
      g[0][static_cast<std::size_t>(in[t]) * d + j] += dh_[t * d + j];
      g[1][(t % s.S) * d + j] += dh_[t * d + j];
    }
  return loss / static_cast<double>(T);
}

}  // namespace tpu::ref
