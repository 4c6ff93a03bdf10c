// Golden benchmark: the paper's shape (1, 16, 1280, 128), fp16 inputs, with the fast double-double path,
// against the plain MPFR evaluation of one head measured in the same run (ratio = 16 × one MPFR head / fast).
#include <chrono>
#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "pasa/inputs/generators.hpp"
#include "pasa/exact/golden.hpp"

using namespace pasa;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the golden attention (fast path vs plain MPFR)"};
  std::size_t heads = 16, seq = 1280, dim = 128;
  double x0 = 30, am = 0.5;
  int threads = default_threads();
  bool skip_mpfr = false;
  app.add_option("--heads", heads, "heads N (B = 1)");
  app.add_option("--seq", seq, "sequence length S");
  app.add_option("--dim", dim, "head dimension D");
  app.add_option("--x0", x0, "uniform generator centre (PASA Eq. 17)");
  app.add_option("--am", am, "uniform generator half-width");
  app.add_option("--threads", threads, "threads");
  app.add_flag("--skip-mpfr", skip_mpfr, "do not time the plain MPFR head");
  CLI11_PARSE(app, argc, argv);

  ProblemSpec spec;
  spec.Nq = spec.Nkv = heads;
  spec.Sq = spec.Skv = seq;
  spec.D = dim;
  spec.q = spec.k = spec.v = TensorGen{GenKind::uniform, x0, am};
  spec.seed = 1;
  const AttentionInputs in = generate_inputs(spec, threads);
  GoldenOptions fast;
  fast.threads = threads;
  auto t0 = std::chrono::steady_clock::now();
  const Golden g = golden_attention(in, fast);
  const double t_fast = seconds_since(t0);
  std::printf("shape (1, %zu, %zu, %zu) fp16, uniform x0=%g am=%g, %d threads\n", heads, seq, dim, x0, am, threads);
  std::printf("fast golden, all heads: %.2f s, guaranteed_bits %d%s\n", t_fast, g.guaranteed_bits,
              g.used_mpfr ? " (some blocks fell back to MPFR)" : "");
  if (skip_mpfr) return 0;

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
  std::printf("plain MPFR (%d bits), one head: %.2f s, guaranteed_bits %d\n", plain.precision_bits, t_plain,
              g1.guaranteed_bits);
  std::printf("per head: fast %.3f s, MPFR %.2f s; speed-up %.1fx; head 0 max relative difference %.2e\n",
              t_fast / static_cast<double>(heads), t_plain, t_plain * static_cast<double>(heads) / t_fast, worst);
  std::printf("goal: all heads under 30 s: %s\n", t_fast < 30 ? "met" : "NOT met");
  return 0;
}
