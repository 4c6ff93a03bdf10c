// The every-op fp16 GEMM alone (c ← RN16(c + RN16(a·b)) in order, fp16 accumulator): the float-register
// kernel (numeric/round_narrow_register.hpp) against the F16C round-trip kernel it replaced (still the path
// where the overflow bound fails, reached here by labelling the operands with a format of a wider range:
// the same values, the same work) and against the library's fp32 FMA GEMM (the ordered model, a plain
// register-tiled sgemm); then the same for bf16 (register kernel against the round_span loop it replaced,
// reached by labelling bf16 values with p = 9), all in the same run, on the GEMMs of a blocked attention at (1, heads, seq, dim)
// with 128 × 128 tiles: per pair of tiles one S = Q·Kᵀ (128 × 128 × dim) and one P·V (128 × dim × 128).
// Prints wall and CPU seconds (best of --reps), the speed-up over the F16C kernel and the load average;
// with several threads (--threads LIST, default 1,2) the heads are dealt to them, as the attention engine
// deals its work; with more than one count a scaling table ends the output.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../apps/library_names.hpp"
#include "bench_clock.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

namespace {
constexpr double kMaxGflop = 1e4;  // ~750x the default size

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
  // Every repetition and kernel runs the same shapes: their big buffers are kept, not faulted in anew
  // (pasa::KeepBigBlocks, core/memory.hpp); the first call of a shape pays for the pages.
  const pasa::KeepBigBlocks keep_big_blocks;
  std::size_t heads = 16, seq = 1280, dim = 128;
  int reps = 3;
  std::string max_memory;
  app.add_option("--heads", heads, "heads N (B = 1)")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--seq", seq, "sequence length S (a multiple of 128)")->check(pasa_apps::unsigned_integer(128));
  app.add_option("--dim", dim, "head dimension D")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--reps", reps, "repetitions (the best time counts)")->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  std::string threads_text = "1,2";
  app.add_option("--threads", threads_text, "thread counts, e.g. 1,2,4 (a scaling table)")->capture_default_str();
  app.set_version_flag("--version", "pasa-bench-every-op " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  std::vector<int> thread_list;
  try {
    thread_list = bench::parse_threads_list(threads_text);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pasa-bench-every-op: %s\n", e.what());
    return 2;
  }
  try {
  const std::size_t T = 128, tiles = seq / T;
  if (seq % T != 0) throw InputError(fmt::format("--seq {}: must be a multiple of {}", seq, T));
  // Work first, as memory below: the emulated every-op GEMMs run at about a GFLOP/s, so a size far beyond the
  // default (13 GFLOP per configuration) would run for days instead of failing; refused with its figure.
  const double work = 4.0 * static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(dim) *
                      static_cast<double>(heads) / 1e9;
  if (work > kMaxGflop)
    throw InputError(fmt::format("--heads {} --seq {} --dim {}: {:.3g} GFLOP per configuration; this benchmark "
                                 "takes at most {:g} (hours of emulation)", heads, seq, dim, work, kMaxGflop));
  // Size first: per tile operand set (fp16 and bf16 copies of Q, Kᵀ, P, V as floats) and, per thread, the
  // double S and O tiles.
  check_memory(sat_add(sat_mul(2 * sizeof(float), sat_add(sat_mul(3 * T, dim), T * T)),
                       sat_mul(2 * sizeof(double), sat_add(T * T, sat_mul(T, dim)))),
               max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory"), "this benchmark",
               fmt::format("D {}", dim));

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
      parallel_for(heads, threads, [&](std::size_t hd) { run(g, hd, hd + 1); });
    });
  };
  const double gflop = 4.0 * static_cast<double>(seq) * seq * dim * heads / 1e9;
  std::printf("every-op fp16 GEMMs of a blocked attention at (1, %zu, %zu, %zu), tiles %zu: %.2f GFLOP; best of %d\n",
              heads, seq, dim, T, gflop, reps);
  std::vector<std::array<Timing, 3>> rows;  // per thread count: FMA GEMM, F16C, float registers
  for (int threads : thread_list) {
    const Timing r = timed(reg, threads), c = timed(f16c, threads), o = timed(fma, threads);
    rows.push_back({o, c, r});
    std::printf("threads %d (load %.2f):\n", threads, bench::load1());
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "fp32 FMA GEMM (ordered model)", o.wall, o.cpu,
                gflop / o.wall);
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "every-op fp16, F16C round trips", c.wall,
                c.cpu, gflop / c.wall);
    std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s  %.2fx F16C (CPU time), %.3f of the FMA GEMM\n",
                "every-op fp16, float registers", r.wall, r.cpu, gflop / r.wall, c.cpu / r.cpu, o.cpu / r.cpu);
    if (threads == thread_list[0]) {  // bf16: the same inputs rounded to bf16
      const Timing l = timed(loop_bf, 1), b = timed(reg_bf, 1);
      std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s\n", "every-op bf16, round_span loop", l.wall,
                  l.cpu, gflop / l.wall);
      std::printf("  %-34s %7.3f s wall %7.3f s CPU  %6.2f GFLOP/s  %.2fx the loop (CPU time)\n",
                  "every-op bf16, float registers", b.wall, b.cpu, gflop / b.wall, l.cpu / b.cpu);
    }
  }
  if (thread_list.size() > 1) {
    std::printf("\nscaling (wall): rate / FMA GEMM rate at the same thread count; speed-up, efficiency over %d thread(s)\n",
                thread_list[0]);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double r = static_cast<double>(thread_list[0]) / thread_list[i];
      const Timing &o = rows[i][0], &reg_t = rows[i][2];
      std::printf("  threads %-3d every-op fp16 (float registers) %.3f of the FMA GEMM, %5.2fx %4.2f; FMA GEMM %5.2fx %4.2f\n",
                  thread_list[i], o.wall / reg_t.wall, rows[0][2].wall / reg_t.wall, rows[0][2].wall / reg_t.wall * r,
                  rows[0][0].wall / o.wall, rows[0][0].wall / o.wall * r);
    }
  }
  return 0;
  } catch (...) {
    return report_error("pasa-bench-every-op");
  }
}
