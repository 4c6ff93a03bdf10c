// fp8_chain_compare: the emulator's FP8 chain [FA3, §3.3] (scale = fp32(amax)·fp32(1/448) as torch computes amax/448, quantise x/scale once to
// E4M3, the GEMM under the H100's FP8 tensor-core model h100_e4m3 into fp32, dequantisation S·fp32(s_q·s_k) in
// fp32) against what fp8_chain.py wrote on the GPU. Prints the fraction of bit-identical scales, quantised
// values and scores, per tensor and per block. Build (from a configured build/):
//   g++ -std=c++20 -O2 -fopenmp -Isrc experiments/gpu/fp8_chain_compare.cpp build/libpasa_attention.a \
//       build/libpasa_io.a build/libpasa_exact.a build/libpasa_inputs.a build/libpasa_numeric.a -lmpfr -lgmp -lfmt
// Run: ./fp8_chain_compare DIR   (DIR holds q, k, q8, k8, k8b, st, sb, scales .npy from fp8_chain.py)
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "pasa/attention/gemm.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/io/npy.hpp"

using namespace pasa;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fp8_chain_compare DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto load = [&](const char* n) { return npy_values(read_npy(dir + "/" + n + ".npy")); };
  const auto q = load("q"), k = load("k"), q8 = load("q8"), k8 = load("k8"), k8b = load("k8b"), st = load("st"),
             sb = load("sb"), sc = load("scales");
  const std::size_t C = 8, M = 128, N = 256, D = 128;
  StageSpec e4m3(format_by_name("fp8_e4m3fn"));
  e4m3.round.overflow = Overflow::saturate;
  const StageSpec f32(format_by_name("fp32"));
  GemmModel tc(GemmKind::tensor_core);
  tc.tc = tensor_core_preset("h100_e4m3");
  const GemmSpec g{e4m3.format, e4m3.format, f32, f32, tc};
  const char* kinds[] = {"N(0,1)", "N(0,1) + 1% outliers x50", "N(0,1) x 1e-3", "0.5 N(0,1) + 10"};
  std::size_t scales_same = 0, scales_n = 0, q_same = 0, q_n = 0, gemm_same[2] = {0, 0}, chain_same[2] = {0, 0}, s_n = 0;
  for (std::size_t c = 0; c < C; ++c) {
    const double* qc = &q[c * M * D];
    const double* kc = &k[c * N * D];
    auto amax = [](const double* x, std::size_t n) {
      double m = 0;
      for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
      return m;
    };
    // our scales: per tensor (Q, K) and per block of 128 keys
    const double ours[4] = {fp8_scale(amax(qc, M * D), 448), fp8_scale(amax(kc, N * D), 448),
                            fp8_scale(amax(kc, 128 * D), 448), fp8_scale(amax(kc + 128 * D, 128 * D), 448)};
    for (int i = 0; i < 4; ++i) scales_same += ours[i] == sc[c * 4 + i];
    scales_n += 4;
    std::vector<double> oq(qc, qc + M * D), ok(kc, kc + N * D), okb(kc, kc + N * D);
    quantise(oq.data(), oq.size(), ours[0], e4m3);
    quantise(ok.data(), ok.size(), ours[1], e4m3);
    quantise(okb.data(), 128 * D, ours[2], e4m3);
    quantise(okb.data() + 128 * D, 128 * D, ours[3], e4m3);
    for (std::size_t i = 0; i < M * D; ++i) q_same += oq[i] == q8[c * M * D + i];
    for (std::size_t i = 0; i < N * D; ++i) q_same += (ok[i] == k8[c * N * D + i]) + (okb[i] == k8b[c * N * D + i]);
    q_n += M * D + 2 * N * D;
    // S = dequant(Q8 · K8ᵀ): with the GPU's quantised values (the GEMM and dequantisation alone) and with ours
    for (int chain = 0; chain < 2; ++chain)
      for (int block = 0; block < 2; ++block) {
        const double* A = chain ? oq.data() : &q8[c * M * D];
        const double* Kq = block ? (chain ? okb.data() : &k8b[c * N * D]) : (chain ? ok.data() : &k8[c * N * D]);
        const double* gpu = block ? &sb[c * M * N] : &st[c * M * N];
        std::vector<double> Bt(D * N), S(M * N);
        for (std::size_t j = 0; j < N; ++j)
          for (std::size_t d = 0; d < D; ++d) Bt[d * N + j] = Kq[j * D + d];
        gemm(g, M, N, D, A, D, Bt.data(), N, S.data(), N);
        for (std::size_t j = 0; j < N; ++j) {
          const double sk = block ? sc[c * 4 + 2 + j / 128] : sc[c * 4 + 1];
          const double f = static_cast<float>(sc[c * 4] * sk);  // fp32(s_q·s_k)
          for (std::size_t i = 0; i < M; ++i) {
            const double s = static_cast<float>(S[i * N + j] * f);
            (chain ? chain_same : gemm_same)[block] += s == gpu[i * N + j];
          }
        }
        if (chain == 0 && block == 0) s_n += M * N;
      }
    if (c % 2 == 1)
      std::printf("%-26s cases %zu-%zu done\n", kinds[c / 2], c - 1, c);
  }
  std::printf("scales fp32(amax)·fp32(1/448) bit-identical: %zu / %zu\n", scales_same, scales_n);
  std::printf("quantised E4M3 values bit-identical: %zu / %zu (%.4f %%)\n", q_same, q_n, 100.0 * q_same / q_n);
  for (int b = 0; b < 2; ++b) {
    std::printf("%s scales: GEMM + dequantisation on the GPU's E4M3 values: %.4f %% of %zu scores bit-identical\n",
                b ? "per-block " : "per-tensor", 100.0 * gemm_same[b] / s_n, s_n);
    std::printf("%s scales: the whole chain from the fp16 inputs:           %.4f %% of %zu scores bit-identical\n",
                b ? "per-block " : "per-tensor", 100.0 * chain_same[b] / s_n, s_n);
  }
}
