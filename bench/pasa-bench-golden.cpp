// Golden benchmark: the paper's shape (1, 16, 1280, 128), fp16 inputs. The golden (golden_attention, fast
// path) against, in the same run:
// - the row-at-a-time fast path it replaced, kept here as the baseline: one query row at a time,
//   Dot2 scores over transposed keys, scalar exp_dd, and Σ p·v streaming all of V per row. Its results must
//   be bit-identical to the golden's (checked below); the goal is a ratio >= 3;
// - optionally (--mpfr) the plain MPFR evaluation of one head (ratio = heads × one MPFR head / fast).
#include <chrono>
#include <span>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>


#include <CLI/CLI.hpp>
#include <mpfr.h>

#include "../apps/library_names.hpp"
#include "bench_clock.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/score_rows.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/numeric/double_double.hpp"

using namespace pasa;
using namespace pasa::bench;

namespace {

// ---- The baseline: golden.cpp's former fast path (no masks, no position bias, no MPFR fallback:
// the benchmark's inputs need none; it reports the bits it guarantees, as the golden does). ----
double lse_from_dd(DD m, DD l) {
  mpfr_t a, b;
  mpfr_inits2(128, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(a, l.hi, MPFR_RNDN);
  mpfr_add_d(a, a, l.lo, MPFR_RNDN);
  mpfr_log(a, a, MPFR_RNDN);
  mpfr_set_d(b, m.hi, MPFR_RNDN);
  mpfr_add_d(b, b, m.lo, MPFR_RNDN);
  mpfr_add(a, a, b, MPFR_RNDN);
  const double r = mpfr_get_d(a, MPFR_RNDN);
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
  return r;
}

Golden row_at_a_time_golden(const AttentionInputs& in, int threads) {
  constexpr double kU2 = 0x1p-106;
  constexpr std::size_t kRowBlock = 32;
  const Shape& qs = in.q.shape;
  const std::size_t D = qs.D, Sq = qs.S, Skv = in.k.shape.S, G = in.group(), Nkv = in.k.shape.N;
  Golden g;
  g.o = Tensor(qs, format_by_name("fp64"));
  g.lse.assign(qs.B * qs.N * qs.S, 0.0);
  DD scale;
  {
    mpfr_t x, tmp;
    mpfr_inits2(256, x, tmp, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_ui(x, static_cast<unsigned long>(D), MPFR_RNDN);
    mpfr_rec_sqrt(x, x, MPFR_RNDN);
    scale.hi = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(tmp, x, scale.hi, MPFR_RNDN);
    scale.lo = mpfr_get_d(tmp, MPFR_RNDN);
    mpfr_clears(x, tmp, static_cast<mpfr_ptr>(nullptr));
  }
  const std::size_t blocks = (Sq + kRowBlock - 1) / kRowBlock;
  std::vector<double> worst(qs.B * Nkv * blocks, 0.0);
  parallel_for(qs.B * Nkv * blocks, threads, [&](std::size_t w) {
    const std::size_t blk = w % blocks, bk = w / blocks, b = bk / Nkv, hk = bk % Nkv;
    const std::size_t i0 = blk * kRowBlock, i1 = std::min(Sq, i0 + kRowBlock);
    const KeysT keys(in.k, b, hk);
    const double* V = in.v.head(b, hk);
    std::vector<double> shi(Skv), slo(Skv), nh(D), nc(D), delta(Skv);
    std::vector<DD> p(Skv);
    for (std::size_t h = hk * G; h < (hk + 1) * G; ++h)
      for (std::size_t i = i0; i < i1; ++i) {
        const std::size_t row = (b * qs.N + h) * Sq + i;
        const double* q = in.q.head(b, h) + i * D;
        dot2_scores(q, keys, Skv, shi.data(), slo.data());
        const double qn = row_norm(q, D);
        DD m{-std::numeric_limits<double>::infinity(), 0};
        for (std::size_t j = 0; j < Skv; ++j) {
          const DD s = dd_mul(DD{shi[j], slo[j]}, scale);
          delta[j] = std::abs(scale.hi) * dot2_error_bound(D, qn * keys.norm[j]) + 9 * kU2 * std::abs(s.hi);
          shi[j] = s.hi;
          slo[j] = s.lo;
          if (dd_less(m, s)) m = s;
        }
        DD l{0, 0};
        double dmax = 0;
        for (std::size_t j = 0; j < Skv; ++j) {
          p[j] = DD{0, 0};
          const DD t = dd_add(DD{shi[j], slo[j]}, dd_neg(m));
          if (t.hi < kExpDDMin) continue;
          dmax = std::max(dmax, delta[j] + 3 * kU2 * std::abs(t.hi));
          p[j] = exp_dd(t);
          l = dd_add(l, p[j]);
        }
        std::fill(nh.begin(), nh.end(), 0.0);
        std::fill(nc.begin(), nc.end(), 0.0);
        for (std::size_t j = 0; j < Skv; ++j) {
          if (p[j].hi == 0) continue;
          const double ph = p[j].hi, pl = p[j].lo;
          const double* vr = V + j * D;
          for (std::size_t x = 0; x < D; ++x) nc[x] += dot2_step(nh[x], ph, vr[x]) + pl * vr[x];
        }
        double* o = g.o.data.data() + row * D;
        for (std::size_t x = 0; x < D; ++x) o[x] = dd_to_double(dd_div(two_sum(nh[x], nc[x]), l));
        g.lse[row] = lse_from_dd(m, l);
        const double nd = static_cast<double>(Skv);
        const double E = 2.2 * (1.01 * dmax + kExpDDRelErr) + 1.1 * (3 * nd * (nd + 2) + 4 * nd + 16) * kU2;
        worst[w] = std::max(worst[w], E);
      }
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  });
  for (double e : worst) g.error_bound = std::max(g.error_bound, e);
  g.guaranteed_bits = static_cast<int>(std::floor(-std::log2(g.error_bound)));
  return g;
}

bool same_bits(std::span<const double> a, std::span<const double> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the golden attention against the row-at-a-time fast path it replaced (and plain MPFR)"};
  std::size_t heads = 16, seq = 1280, dim = 128;
  double x0 = 30, am = 0.5;
  int threads = default_threads();
  bool mpfr = false;
  std::string max_memory;
  app.add_option("--heads", heads, "heads N (B = 1)")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--seq", seq, "sequence length S")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--dim", dim, "head dimension D")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--x0", x0, "uniform generator centre (PASA Eq. 17)")->check(pasa_apps::finite_number());
  app.add_option("--am", am, "uniform generator half-width")->check(pasa_apps::finite_number());
  app.add_option("--threads", threads, "threads")->check(pasa_apps::thread_count());
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  app.add_flag("--mpfr", mpfr, "also time the plain MPFR evaluation of one head");
  app.set_version_flag("--version", "pasa-bench-golden " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  try {

  ProblemSpec spec;
  spec.Nq = spec.Nkv = heads;
  spec.Sq = spec.Skv = seq;
  spec.D = dim;
  spec.q = spec.k = spec.v = TensorGen{GenKind::uniform, x0, am};
  spec.seed = 1;
  validate(spec);
  {
    // Size first: the inputs, both goldens' outputs and working memory, and the baseline's per-thread rows.
    GoldenOptions go;
    go.threads = threads;
    const Shape s{1, heads, seq, dim};
    const std::size_t need =
        sat_add(sat_add(inputs_bytes(spec), sat_mul(2, golden_bytes(s, s, go))),
                sat_product(8 * sizeof(double), static_cast<std::size_t>(threads), sat_add(seq, dim)));
    check_memory(need, max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory"), "this benchmark",
                 fmt::format("(1, {}, {}, {}), {} threads", heads, seq, dim, threads));
  }
  const AttentionInputs in = generate_inputs(spec, threads);
  GoldenOptions fast;
  fast.threads = threads;
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_seconds();
  const Golden base = row_at_a_time_golden(in, threads);
  const double t_base = seconds_since(t0), c_base = cpu_seconds() - c0;
  t0 = std::chrono::steady_clock::now();
  c0 = cpu_seconds();
  const Golden g = golden_attention(in, fast);
  const double t_fast = seconds_since(t0), c_fast = cpu_seconds() - c0;
  const bool identical = same_bits(g.o.data, base.o.data) && same_bits(g.lse, base.lse);
  std::printf("shape (1, %zu, %zu, %zu) fp16, uniform x0=%g am=%g, %d threads\n", heads, seq, dim, x0, am, threads);
  std::printf("row-at-a-time fast path (baseline): %.3f s wall, %.3f CPU-s, guaranteed_bits %d\n", t_base, c_base,
              base.guaranteed_bits);
  std::printf("golden, all heads: %.3f s wall (%.3f s/head), %.3f CPU-s, guaranteed_bits %d%s\n", t_fast,
              t_fast / static_cast<double>(heads), c_fast, g.guaranteed_bits,
              g.used_mpfr ? " (some blocks fell back to MPFR)" : "");
  std::printf("speed-up over the baseline: %.2fx wall, %.2fx CPU; outputs and lse bit-identical: %s\n", t_base / t_fast,
              c_base / c_fast, identical ? "yes" : "NO");
  std::printf("goal: >= 3x the baseline with guaranteed_bits >= 64: %s\n",
              t_base / t_fast >= 3 && g.guaranteed_bits >= 64 && identical ? "met" : "NOT met");
  if (!mpfr) return identical ? 0 : 1;

  // One head through the plain MPFR path: head 0 of the same problem (streams are per head).
  ProblemSpec one = spec;
  one.Nq = one.Nkv = 1;
  const AttentionInputs in1 = generate_inputs(one, threads);
  GoldenOptions plain = fast;
  plain.fast = false;
  t0 = std::chrono::steady_clock::now();
  const Golden g1 = golden_attention(in1, plain);
  const double t_plain = seconds_since(t0);
  double worst = 0;
  for (std::size_t e = 0; e < g1.o.data.size(); ++e)
    worst = std::max(worst, std::abs(g1.o.data[e] - g.o.data[e]) / std::abs(g1.o.data[e]));
  std::printf("plain MPFR (%d bits), one head: %.2f s, guaranteed_bits %d; speed-up of the golden %.1fx; head 0 max "
              "relative difference %.2e\n", plain.precision_bits, t_plain, g1.guaranteed_bits,
              t_plain * static_cast<double>(heads) / t_fast, worst);
  return identical ? 0 : 1;
  } catch (...) {
    return report_error("pasa-bench-golden");
  }
}
