// Attention benchmark: FA-FP16/FP32, PASA-FP16 (fp32-accumulate GEMMs) and a round-every-operation
// allocation at the paper's shape (1, 16, 1280, 128), as GFLOP/s (4·S1·S2·D·heads per run) next to a
// plain float32 GEMM of the same flop count (OpenBLAS cblas_sgemm: Q·Kᵀ and P·V per head) timed in the same
// run, with 1 and 2 threads. Goals: fp32-accumulate ≥ 1/3 of the BLAS rate, round-every-op ≥ 1/10; the H100
// tensor-core model (fa_fp16_fp32_h100, pasa_fp16_h100) ≥ 1/4 of the same allocation under the ordered model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/generators.hpp"

#ifdef PASA_HAVE_CBLAS
#include <cblas.h>
#endif

using namespace pasa;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the emulated attention kernels against a float32 BLAS GEMM of the same flop count"};
  std::size_t heads = 16, seq = 1280, dim = 128;
  int reps = 3;
  app.add_option("--heads", heads, "heads N (B = 1)");
  app.add_option("--seq", seq, "sequence length S (S1 = S2)");
  app.add_option("--dim", dim, "head dimension D");
  app.add_option("--reps", reps, "repetitions (the best time counts)");
  CLI11_PARSE(app, argc, argv);

  ProblemSpec ps;
  ps.Nq = ps.Nkv = heads;
  ps.Sq = ps.Skv = seq;
  ps.D = dim;
  ps.q = ps.k = ps.v = TensorGen{GenKind::uniform, 0.0, 1.0};
  ps.seed = 1;
  const AttentionInputs in = generate_inputs(ps);
  const double gflop = 4.0 * static_cast<double>(seq) * seq * dim * heads / 1e9;

  struct Kernel {
    const char* label;
    AlgorithmSpec spec;
    bool every_op;
    int ordered_twin = -1;  // index of the same allocation under the ordered GEMM model (tensor-core rows)
  };
  std::vector<Kernel> kernels;
  AlgorithmSpec fa;
  fa.name = "fa2";
  fa.alloc = allocation_preset("fa_fp16_fp32");
  kernels.push_back({"FA-FP16/FP32 (fa2, fa_fp16_fp32)", fa, false});
  AlgorithmSpec pa;
  pa.name = "pasa";
  pa.alloc = allocation_preset("pasa_fp16");
  kernels.push_back({"PASA-FP16 (pasa, pasa_fp16)", pa, false});
  AlgorithmSpec pa_strict = pa;  // the same with every partial sum of the reductions rounded to fp16
  pa_strict.alloc = allocation_preset("pasa_fp16_strict");
  kernels.push_back({"PASA-FP16 (pasa, pasa_fp16_strict)", pa_strict, false});
  AlgorithmSpec fa_tc = fa;
  fa_tc.alloc = allocation_preset("fa_fp16_fp32_h100");
  kernels.push_back({"FA-FP16/FP32, H100 tensor-core GEMMs", fa_tc, false, 0});
  AlgorithmSpec pa_tc = pa;
  pa_tc.alloc = allocation_preset("pasa_fp16_h100");
  kernels.push_back({"PASA-FP16, H100 tensor-core GEMMs", pa_tc, false, 1});
  AlgorithmSpec eo = fa;
  eo.alloc = allocation_preset("fa_fp16_strict");
  eo.alloc.gemm.kind = GemmKind::every_op;
  eo.alloc.stage("qk_acc") = format_by_name("fp16");
  eo.alloc.stage("pv_acc") = format_by_name("fp16");
  kernels.push_back({"FA-FP16, fp16 acc every op (fa2)", eo, true});
  AlgorithmSpec eo_pasa = eo;
  eo_pasa.name = "pasa";
  kernels.push_back({"PASA-FP16, fp16 acc every op", eo_pasa, true});

  std::printf("shape (1, %zu, %zu, %zu): %.2f GFLOP per run; best of %d\n", heads, seq, dim, gflop, reps);
  for (int threads : {1, 2}) {
    double blas_rate = 0;
#ifdef PASA_HAVE_CBLAS
    openblas_set_num_threads(threads);
    std::vector<float> q(seq * dim), k(seq * dim), v(seq * dim), s(seq * seq), o(seq * dim);
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<float>(in.q.data[i]);
      k[i] = static_cast<float>(in.k.data[i]);
      v[i] = static_cast<float>(in.v.data[i]);
    }
    const int S = static_cast<int>(seq), D = static_cast<int>(dim);
    const double t_blas = best_of(reps, [&] {
      for (std::size_t h = 0; h < heads; ++h) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, 1.0f, q.data(), D, k.data(), D, 0.0f, s.data(), S);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, s.data(), S, v.data(), D, 0.0f, o.data(), D);
      }
    });
    blas_rate = gflop / t_blas;
    std::printf("\nthreads %d: OpenBLAS sgemm baseline %.3f s, %.1f GFLOP/s\n", threads, t_blas, blas_rate);
#else
    std::printf("\nthreads %d: no OpenBLAS found at build time; no baseline\n", threads);
#endif
    std::vector<double> times;
    for (const auto& kr : kernels) {
      const double t = best_of(reps, [&] { run_attention(in, kr.spec, threads); });
      times.push_back(t);
      const double rate = gflop / t;
      const double ratio = blas_rate > 0 ? rate / blas_rate : 0;
      if (kr.ordered_twin >= 0)
        std::printf("  %-36s %7.3f s  %6.2f GFLOP/s  %.3f of BLAS, %.3f of the ordered model (goal >= 0.250)\n",
                    kr.label, t, rate, ratio, times[static_cast<std::size_t>(kr.ordered_twin)] / t);
      else
        std::printf("  %-36s %7.3f s  %6.2f GFLOP/s  %.3f of BLAS (goal %s)\n", kr.label, t, rate, ratio,
                    kr.every_op ? ">= 0.100" : ">= 0.333");
    }
  }
  return 0;
}
