// The every-op fp16 GEMM alone (c ← RN16(c + RN16(a·b)) in order, fp16 accumulator): the float-register
// kernel (numeric/round_narrow_register.hpp) against the F16C round-trip kernel it replaced (still the path
// where the overflow bound fails, reached here by labelling the operands with a format of a wider range:
// the same values, the same work) and against the library's fp32 FMA GEMM (the ordered model, a plain
// register-tiled sgemm); then the same for bf16 (register kernel against the round_span loop it replaced,
// reached by labelling bf16 values with p = 9), all in the same run, on the GEMMs of a blocked attention at (1, heads, seq, dim)
// with 128 × 128 tiles: per pair of tiles one S = Q·Kᵀ (128 × 128 × dim) and one P·V (128 × dim × 128).
// Prints wall and CPU seconds (best of --reps), the speed-up over the F16C kernel and the load average;
// with 2 threads the heads are split between them, as the attention engine splits its work.
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_clock.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {

struct Timing {
  double wall = 1e30, cpu = 1e30;
};

template <class F>
Timing best_of(int reps, F f) {
  Timing t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = bench::cpu_seconds();
    f();
    t.wall = std::min(t.wall, bench::seconds_since(t0));
    t.cpu = std::min(t.cpu, bench::cpu_seconds() - c0);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the every-op fp16 GEMM kernels on the GEMMs of a blocked attention"};
  std::size_t heads = 16, seq = 1280, dim = 128;
  int reps = 3;
  app.add_option("--heads", heads, "heads N (B = 1)");
  app.add_option("--seq", seq, "sequence length S (a multiple of 128)");
  app.add_option("--dim", dim, "head dimension D");
  app.add_option("--reps", reps, "repetitions (the best time counts)");
  app.set_version_flag("--version", "pasa-bench-every-op " PASA_VERSION);  // the CMake project version, as pasa.__version__
  CLI11_PARSE(app, argc, argv);
  const std::size_t T = 128, tiles = seq / T;

  // Inputs as the attention benchmark draws them (uniform in [0, 1], fp16), P = exp(−x) of such scores.
  const Format h = format_by_name("fp16");
  RandomBits rng(1);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1p-53; };
  std::vector<float> q(T * dim), kt(dim * T), p(T * T), v(T * dim);
  for (float& x : q) x = static_cast<float>(round(uniform(), h));
  for (float& x : kt) x = static_cast<float>(round(uniform(), h));
  for (float& x : v) x = static_cast<float>(round(uniform(), h));
  for (float& x : p) x = static_cast<float>(round(std::exp(-16.0 * uniform()), h));
  const Format bf = format_by_name("bf16");  // the same inputs rounded to bf16, for the bf16 GEMMs
  std::vector<float> qb(q), ktb(kt), pb(p), vb(v);
  for (auto* w : {&qb, &ktb, &pb, &vb})
    for (float& x : *w) x = static_cast<float>(round(x, bf));

  GemmSpec reg;
  reg.a_format = reg.b_format = h;
  reg.acc = reg.out = StageSpec(h);
  reg.model = GemmModel{GemmKind::every_op};
  GemmSpec f16c = reg;  // the same values, labelled with a wider format: the bound is not tried, F16C runs
  f16c.a_format = f16c.b_format = format_by_name("p=11,emax=16");
  GemmSpec reg_bf = reg;
  reg_bf.a_format = reg_bf.b_format = format_by_name("bf16");
  reg_bf.acc = reg_bf.out = StageSpec(format_by_name("bf16"));
  GemmSpec loop_bf = reg_bf;  // bf16 values labelled with a format they belong to but that is not bf16's
  loop_bf.a_format = loop_bf.b_format = format_by_name("p=9,emax=127");
  GemmSpec fma = reg;
  fma.acc = fma.out = StageSpec(format_by_name("fp32"));
  fma.model = GemmModel{GemmKind::ordered};

  auto run = [&](const GemmSpec& g, std::size_t h0, std::size_t h1) {
    const bool b16 = g.acc.format == bf;
    const float *Q = b16 ? qb.data() : q.data(), *Kt = b16 ? ktb.data() : kt.data();
    const float *P = b16 ? pb.data() : p.data(), *V = b16 ? vb.data() : v.data();
    std::vector<double> S(T * T), O(T * dim);
    for (std::size_t hd = h0; hd < h1; ++hd)
      for (std::size_t i = 0; i < tiles; ++i)
        for (std::size_t j = 0; j < tiles; ++j) {
          gemm(g, T, T, dim, Q, dim, Kt, T, S.data(), T);
          gemm(g, T, dim, T, P, T, V, dim, O.data(), dim);
        }
  };
  auto timed = [&](const GemmSpec& g, int threads) {
    return best_of(reps, [&] {
      if (threads == 1) return run(g, 0, heads);
      std::thread other([&] { run(g, heads / 2, heads); });
      run(g, 0, heads / 2);
      other.join();
    });
  };
  const double gflop = 4.0 * static_cast<double>(seq) * seq * dim * heads / 1e9;
  std::printf("every-op fp16 GEMMs of a blocked attention at (1, %zu, %zu, %zu), tiles %zu: %.2f GFLOP; best of %d\n",
              heads, seq, dim, T, gflop, reps);
  for (int threads : {1, 2}) {
    const Timing r = timed(reg, threads), c = timed(f16c, threads), o = timed(fma, threads);
    std::printf("threads %d (load %.2f):\n", threads, bench::load1());
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "fp32 FMA GEMM (ordered model)", o.wall, o.cpu,
                gflop / o.wall);
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "every-op fp16, F16C round trips", c.wall,
                c.cpu, gflop / c.wall);
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s  %.2fx F16C (CPU time), %.3f of the FMA GEMM\n",
                "every-op fp16, float registers", r.wall, r.cpu, gflop / r.wall, c.cpu / r.cpu, o.cpu / r.cpu);
    if (threads == 1) {  // bf16: the same inputs rounded to bf16
      const Timing l = timed(loop_bf, 1), b = timed(reg_bf, 1);
      std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "every-op bf16, round_span loop", l.wall,
                  l.cpu, gflop / l.wall);
      std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s  %.2fx the loop (CPU time)\n",
                  "every-op bf16, float registers", b.wall, b.cpu, gflop / b.wall, l.cpu / b.cpu);
    }
  }
}
