// Attention benchmark: FA-FP32, FA-FP16/FP32, PASA-FP16 (fp32-accumulate GEMMs) and a round-every-operation
// allocation at the paper's shape (1, 16, 1280, 128), as GFLOP/s (4·S1·S2·D·heads per run) next to a
// plain float32 GEMM of the same flop count (OpenBLAS cblas_sgemm: Q·Kᵀ and P·V per head) timed in the same
// run, with 1 and 2 threads. OpenBLAS picks its kernels once, when it loads, from OPENBLAS_CORETYPE or its
// own CPU detection (which here misses AVX-512); unless OPENBLAS_CORETYPE is set, the benchmark times the
// sgemm under each candidate core type in a child process, re-executes itself with the fastest and prints
// it with the rate of OpenBLAS's own choice. Goals: fp32-accumulate ≥ 0.6 of the best BLAS rate,
// round-every-op ≥ 0.2; the H100 tensor-core model (fa_fp16_fp32_h100, pasa_fp16_h100, and on bf16 and FP8
// inputs fa_bf16_fp32_h100, fa_fp8_h100) ≥ 1/4 of the same allocation under the ordered model, the two
// timed alternately (twin, model, model, twin per repetition). --threads LIST (default 1,2) runs the whole set at each thread count
// and ends with a scaling table: each kernel's rate as a ratio to the sgemm at the same thread count, and its
// speed-up and parallel efficiency over the first count.
#include <algorithm>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../apps/library_names.hpp"
#include "bench_clock.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/generators.hpp"

#ifdef PASA_HAVE_CBLAS
#include <cblas.h>
#endif

using namespace pasa;
using namespace pasa::bench;

namespace {

// The best wall time of `reps` calls; the best CPU time (all threads) of a call in last_cpu, which other
// processes on a shared machine do not inflate the way they inflate the wall time, and that call's system
// (kernel) seconds in last_sys.
double last_cpu = 0, last_sys = 0;
template <class F>
double best_of(int reps, F&& f) {
  double best = 1e300, cpu = 1e300, sys = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds(), s0 = system_seconds();
    f();
    best = std::min(best, seconds_since(t0));
    if (cpu_seconds() - c0 < cpu) cpu = cpu_seconds() - c0, sys = system_seconds() - s0;
  }
  last_cpu = cpu;
  last_sys = sys;
  return best;
}

#ifdef PASA_HAVE_CBLAS
// Seconds of the baseline: per head, S = Q·Kᵀ and O = S·V in float32 through OpenBLAS, the heads dealt to
// `threads` threads (parallel_for) with a one-thread sgemm each, as the engines deal their (head, block)
// items. At 1 thread this is OpenBLAS's own one-thread rate; above, it is faster than one OpenBLAS-threaded
// sgemm per head (whose 2048 x 2048 x 128 products scale to 0.24 of 16 cores), and it leaves no OpenBLAS
// pool threads spinning after the call (they would take cores from the kernel timed next). Its parallel
// efficiency is what this machine gives to AVX-512 FMA work on T cores at once (clock, shared cache and
// memory): the ceiling that the engines' efficiency is read against.
double blas_seconds(const AttentionInputs& in, std::size_t heads, std::size_t seq, std::size_t dim, int reps,
                    int threads) {
  const std::size_t per_head = seq * dim;
  std::vector<float> q(heads * per_head), k(heads * per_head), v(heads * per_head), o(heads * per_head);
  in.q.read(0, q.size(), q.data());  // (wide or narrow: fp16 values, exact in floats)
  in.k.read(0, k.size(), k.data());
  in.v.read(0, v.size(), v.data());
  // One S buffer per running thread: at most `threads` items run at once, each takes a free buffer.
  const std::size_t slots = static_cast<std::size_t>(std::max(1, std::min<int>(threads, static_cast<int>(heads))));
  std::vector<std::vector<float>> s(slots, std::vector<float>(seq * seq));
  std::vector<std::size_t> free_slots(slots);
  for (std::size_t i = 0; i < slots; ++i) free_slots[i] = i;
  std::mutex m;
  openblas_set_num_threads(1);
  const int S = static_cast<int>(seq), D = static_cast<int>(dim);
  return best_of(reps, [&] {
    parallel_for(heads, threads, [&](std::size_t h) {
      std::size_t slot;
      {
        std::lock_guard<std::mutex> lock(m);
        slot = free_slots.back();
        free_slots.pop_back();
      }
      const std::size_t off = h * per_head;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, 1.0f, q.data() + off, D, k.data() + off, D, 0.0f,
                  s[slot].data(), S);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, s[slot].data(), S, v.data() + off, D, 0.0f,
                  o.data() + off, D);
      std::lock_guard<std::mutex> lock(m);
      free_slots.push_back(slot);
    });
  });
}

// Runs this program with --blas-probe under OPENBLAS_CORETYPE = core ("": OpenBLAS's own choice); returns
// "<core name> <GFLOP/s 1 thread> <GFLOP/s 2 threads>", or "" when the child failed (a core type the CPU
// cannot run dies of an illegal instruction).
std::string probe_core(const std::string& self, const std::string& core, const std::string& shape_args) {
  if (core.empty()) unsetenv("OPENBLAS_CORETYPE");
  else setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  const std::string cmd = "'" + self + "' --blas-probe " + shape_args + " 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    if (pclose(p) != 0) out.clear();
  }
  unsetenv("OPENBLAS_CORETYPE");
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the emulated attention kernels against a float32 BLAS GEMM of the same flop count"};
  // Every repetition and kernel runs the same shapes: their big buffers are kept, not faulted in anew
  // (pasa::KeepBigBlocks, core/memory.hpp); the first call of a shape pays for the pages.
  const pasa::KeepBigBlocks keep_big_blocks;
  std::size_t heads = 16, seq = 1280, dim = 128;
  int reps = 3;
  std::string max_memory;
  app.add_option("--heads", heads, "heads N (B = 1)")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--seq", seq, "sequence length S (S1 = S2)")->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--dim", dim, "head dimension D")->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--reps", reps, "repetitions (the best time counts)")->check(pasa_apps::unsigned_integer(1, INT_MAX));
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  bool narrow = false;
  app.add_flag("--narrow", narrow,
               "Q, K and V held at fp16's width, as pasa-attn and the sweeps hold them (default: as doubles, "
               "the storage of the committed figures)");
  bool probe = false;
  app.add_flag("--blas-probe", probe, "only time the OpenBLAS baseline (1 and 2 threads) and print it")->group("");
  std::string threads_text = "1,2";
  app.add_option("--threads", threads_text, "thread counts, e.g. 1,2,4,8,16 (a scaling table at the end)")
      ->capture_default_str();
  app.set_version_flag("--version", "pasa-bench-attention " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  std::vector<int> thread_list;
  try {
    thread_list = parse_threads_list(threads_text);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pasa-bench-attention: %s\n", e.what());
    return 2;
  }
  try {
  // Size first (core/memory.hpp): the inputs, the largest kernel's memory, and the BLAS baseline's float
  // copies (Q, K, V, O and the S x S scores).
  {
    ProblemSpec ps;
    ps.Nq = ps.Nkv = heads;
    ps.Sq = ps.Skv = seq;
    ps.D = dim;
    validate(ps);
    AlgorithmSpec every_op;
    every_op.name = "fa2";
    every_op.alloc = allocation_preset("fa_fp16_strict");
    const Shape s{1, heads, seq, dim};
    std::size_t need = 0;
    const std::size_t max_threads = static_cast<std::size_t>(*std::max_element(thread_list.begin(), thread_list.end()));
    for (const char* a : {"fa_fp32", "fa_fp16_fp32", "pasa_fp16", "pasa_fp16_strict", "fa_fp16_fp32_h100", "fa_bf16_fp32_h100",
                          "fa_fp8_h100"}) {
      AlgorithmSpec spec;
      spec.name = "fa2";
      spec.alloc = allocation_preset(a);
      need = std::max(need, attention_bytes(s, s, format_by_name("fp16"), spec,
                                            *std::max_element(thread_list.begin(), thread_list.end()), narrow));
    }
    need = sat_add(sat_add(need, inputs_bytes(ps, narrow ? Storage::narrow : Storage::wide)),
                   sat_mul(sizeof(float), sat_add(sat_product(4, heads, seq, dim),
                                                  sat_product(std::min<std::size_t>(heads, max_threads), seq, seq))));
    check_memory(need, max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory"), "this benchmark",
                 fmt::format("(1, {}, {}, {})", heads, seq, dim));
  }
#ifdef PASA_HAVE_CBLAS
  const std::string shape_args = "--heads " + std::to_string(heads) + " --seq " + std::to_string(seq) + " --dim " +
                                 std::to_string(dim) + " --reps " + std::to_string(reps) +
                                 (max_memory.empty() ? "" : " --max-memory " + max_memory);
  if (!probe && std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    // Choose the core type before OpenBLAS's kernels run in this process: time each candidate in a child,
    // then re-execute with the fastest (OpenBLAS reads OPENBLAS_CORETYPE only when it loads).
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
      std::perror("reading /proc/self/exe");
      return 1;
    }
    self[len] = '\0';
    std::string best = probe_core(self, "", shape_args), own = best;
    char name[64] = "";
    auto total = [&name](const std::string& r) {
      double r1 = 0, r2 = 0;
      return std::sscanf(r.c_str(), "%63s %lf %lf", name, &r1, &r2) == 3 ? r1 + r2 : 0.0;
    };
    for (const char* core : {"SkylakeX", "Cooperlake", "Haswell", "Zen"}) {
      const std::string r = probe_core(self, core, shape_args);
      std::printf("OpenBLAS probe, OPENBLAS_CORETYPE=%s: %s\n", core, r.empty() ? "failed" : r.c_str());
      if (total(r) > total(best)) best = r;
    }
    total(best);  // the winner's core name, as OpenBLAS spells it
    setenv("PASA_BENCH_BLAS_DEFAULT", own.c_str(), 1);
    setenv("OPENBLAS_CORETYPE", name, 1);
    std::fflush(stdout);
    execv(self, argv);
    std::perror("re-executing the benchmark");  // only reached when execv failed
    return 1;
  }
#endif

  ProblemSpec ps;
  ps.Nq = ps.Nkv = heads;
  ps.Sq = ps.Skv = seq;
  ps.D = dim;
  ps.q = ps.k = ps.v = TensorGen{GenKind::uniform, 0.0, 1.0};
  ps.seed = 1;
  const AttentionInputs in = generate_inputs(ps, default_threads(), narrow ? Storage::narrow : Storage::wide);
  const double gflop = 4.0 * static_cast<double>(seq) * seq * dim * heads / 1e9;

  struct Kernel {
    const char* label;
    AlgorithmSpec spec;
    double goal;            // fraction of the BLAS rate to reach (0: none)
    int ordered_twin = -1;  // index of the same allocation under the ordered GEMM model (tensor-core rows)
  };
  std::vector<Kernel> kernels;
  AlgorithmSpec fa32;
  fa32.name = "fa2";
  fa32.alloc = allocation_preset("fa_fp32");
  kernels.push_back({"FA-FP32 (fa2, fa_fp32)", fa32, 0.6});
  AlgorithmSpec fa;
  fa.name = "fa2";
  fa.alloc = allocation_preset("fa_fp16_fp32");
  kernels.push_back({"FA-FP16/FP32 (fa2, fa_fp16_fp32)", fa, 0.6});  // index 1
  AlgorithmSpec pa;
  pa.name = "pasa";
  pa.alloc = allocation_preset("pasa_fp16");
  kernels.push_back({"PASA-FP16 (pasa, pasa_fp16)", pa, 0.6});  // index 2
  AlgorithmSpec pa_strict = pa;  // the same with every partial sum of the reductions rounded to fp16
  pa_strict.alloc = allocation_preset("pasa_fp16_strict");
  kernels.push_back({"PASA-FP16 (pasa, pasa_fp16_strict)", pa_strict, 0.0});
  AlgorithmSpec fa_tc = fa;
  fa_tc.alloc = allocation_preset("fa_fp16_fp32_h100");
  kernels.push_back({"FA-FP16/FP32, H100 tensor-core GEMMs", fa_tc, 0.0, 1});
  AlgorithmSpec pa_tc = pa;
  pa_tc.alloc = allocation_preset("pasa_fp16_h100");
  kernels.push_back({"PASA-FP16, H100 tensor-core GEMMs", pa_tc, 0.0, 2});
  // bf16 and FP8 inputs: the H100's bf16 and FP8 models (h100_bf16: fp32 accumulator; h100_e4m3: 13 bits,
  // e8m13 accumulator, promotion every 128) against the same allocation under the ordered model
  auto with_tensor_cores = [&](const char* label, const char* tc_label, const std::string& preset) {
    AlgorithmSpec ordered = fa, tc = fa;
    ordered.alloc = allocation_preset(preset);
    tc.alloc = allocation_preset(preset + "_h100");
    kernels.push_back({label, ordered, 0.0});
    kernels.push_back({tc_label, tc, 0.0, static_cast<int>(kernels.size()) - 1});
  };
  with_tensor_cores("FA-BF16/FP32 (fa2, fa_bf16_fp32)", "FA-BF16/FP32, H100 tensor-core GEMMs", "fa_bf16_fp32");
  with_tensor_cores("FA-FP8 (fa2, fa_fp8)", "FA-FP8, H100 tensor-core GEMMs", "fa_fp8");
  AlgorithmSpec eo = fa;
  eo.alloc = allocation_preset("fa_fp16_strict");
  eo.alloc.gemm.kind = GemmKind::every_op;
  eo.alloc.stage("qk_acc") = format_by_name("fp16");
  eo.alloc.stage("pv_acc") = format_by_name("fp16");
  kernels.push_back({"FA-FP16, fp16 acc every op (fa2)", eo, 0.2});
  AlgorithmSpec eo_pasa = eo;
  eo_pasa.name = "pasa";
  kernels.push_back({"PASA-FP16, fp16 acc every op", eo_pasa, 0.2});

#ifdef PASA_HAVE_CBLAS
  if (probe) {
    double rate[2];
    for (int threads : {1, 2}) rate[threads - 1] = gflop / blas_seconds(in, heads, seq, dim, reps, threads);
    std::printf("%s %.2f %.2f\n", openblas_get_corename(), rate[0], rate[1]);
    return 0;
  }
  std::printf("OpenBLAS core type: %s (OPENBLAS_CORETYPE=%s)", openblas_get_corename(), std::getenv("OPENBLAS_CORETYPE"));
  if (const char* d = std::getenv("PASA_BENCH_BLAS_DEFAULT"))
    std::printf("; OpenBLAS's own choice, in a child: %s GFLOP/s (core, 1 thread, 2 threads)", d);
  else
    std::printf("; set by the environment, so NOT probed: the baseline may not be the fastest sgemm "
                "(unset OPENBLAS_CORETYPE to probe)");
  std::printf("\n");
#endif
  std::printf("shape (1, %zu, %zu, %zu): %.2f GFLOP per run; best of %d\n", heads, seq, dim, gflop, reps);
  bool met = true;
  std::vector<double> blas_rates;                 // per thread count
  std::vector<std::vector<double>> kernel_times;  // per thread count, per kernel
  for (int threads : thread_list) {
    double blas_rate = 0, blas_cpu = 0;
#ifdef PASA_HAVE_CBLAS
    const double t_blas = blas_seconds(in, heads, seq, dim, reps, threads);
    blas_cpu = last_cpu;
    blas_rate = gflop / t_blas;
    std::printf("\nthreads %d: OpenBLAS sgemm baseline %.3f s, %.1f GFLOP/s (CPU %.3f s, system %.3f s; load %.2f)\n",
                threads, t_blas, blas_rate, blas_cpu, last_sys, load1());
#else
    std::printf("\nthreads %d: no OpenBLAS found at build time; no baseline\n", threads);
#endif
    std::vector<double>& times = kernel_times.emplace_back();
    blas_rates.push_back(blas_rate);
    for (const auto& kr : kernels) {
      // A tensor-core row is timed alternately with its ordered twin, `reps` rounds of twin, model, model,
      // twin, and its ratio is best(twin) / best(model) over those calls: a shared host's speed drifts by tens
      // of percent within minutes (the same kernel 1.5x slower four minutes later on the 16-core host), which
      // a ratio of two timings taken minutes apart would carry. (Each kernel twice in a row: the second call
      // finds the big blocks the first freed, KeepBigBlocks; after the other kernel they are another size.)
      double t = 0, twin_t = 0, twin_c = 0;
      if (kr.ordered_twin < 0) {
        t = best_of(reps, [&] { run_attention(in, kr.spec, threads); });
      } else {
        const AlgorithmSpec& twin_spec = kernels[static_cast<std::size_t>(kr.ordered_twin)].spec;
        double tt[2] = {1e300, 1e300}, cc[2] = {1e300, 1e300}, sys = 0;
        for (int r = 0; r < reps; ++r)
          for (int which : {1, 0, 0, 1}) {  // 1: the twin, 0: the model
            const double w = best_of(1, [&] { run_attention(in, which ? twin_spec : kr.spec, threads); });
            tt[which] = std::min(tt[which], w);
            if (last_cpu < cc[which]) {
              cc[which] = last_cpu;
              if (which == 0) sys = last_sys;
            }
          }
        t = tt[0];
        twin_t = tt[1];
        twin_c = cc[1];
        last_cpu = cc[0];
        last_sys = sys;
      }
      // The same ratio by CPU time (both sides' threads together): what the goal reads on a loaded machine.
      const std::string cpu = blas_cpu > 0 ? fmt::format("  [CPU {:.3f} s, {:.3f} of BLAS's CPU; system {:.3f} s]", last_cpu,
                                                                    blas_cpu / last_cpu, last_sys)
                                           : std::string();
      times.push_back(t);
      const double rate = gflop / t;
      const double ratio = blas_rate > 0 ? rate / blas_rate : 0;
      if (kr.ordered_twin >= 0) {
        const double twin = twin_t / t;
        const double twin_cpu = last_cpu > 0 ? twin_c / last_cpu : 0;
        met = met && twin >= 0.25;
        std::printf("  %-36s %7.3f s  %6.2f GFLOP/s  %.3f of BLAS, %.3f of the ordered model (alternated with it: "
                    "%.3f s; goal >= 0.250: %s; by CPU time %.3f)%s\n",
                    kr.label, t, rate, ratio, twin, twin_t, twin >= 0.25 ? "met" : "NOT met", twin_cpu, cpu.c_str());
      } else {
        const bool ok = blas_rate > 0 && ratio >= kr.goal;
        met = met && ok;
        if (kr.goal > 0)
          std::printf("  %-36s %7.3f s  %6.2f GFLOP/s  %.3f of BLAS (goal >= %.3f: %s)%s\n", kr.label, t, rate, ratio,
                      kr.goal, ok ? "met" : "NOT met", cpu.c_str());
        else
          std::printf("  %-36s %7.3f s  %6.2f GFLOP/s  %.3f of BLAS%s\n", kr.label, t, rate, ratio, cpu.c_str());
      }
    }
  }
  if (thread_list.size() > 1) {
    std::printf("\nscaling: rate / OpenBLAS sgemm rate at the same thread count; speed-up over %d thread(s) "
                "(parallel efficiency = speed-up / thread ratio)\n%-38s", thread_list[0], "threads");
    for (int t : thread_list) std::printf(" %19d", t);
    std::printf("\n");
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      std::printf("  %-36s", kernels[k].label);
      for (std::size_t i = 0; i < thread_list.size(); ++i) {
        const double ratio = blas_rates[i] > 0 ? (gflop / kernel_times[i][k]) / blas_rates[i] : 0;
        const double speedup = kernel_times[0][k] / kernel_times[i][k];
        std::printf("  %6.3f %5.2fx %4.2f", ratio, speedup, speedup * thread_list[0] / thread_list[i]);
      }
      std::printf("\n");
    }
    std::printf("  %-36s", "OpenBLAS sgemm (GFLOP/s, speed-up)");
    for (std::size_t i = 0; i < blas_rates.size(); ++i)
      std::printf("  %6.1f %5.2fx %4.2f", blas_rates[i], blas_rates[0] > 0 ? blas_rates[i] / blas_rates[0] : 0,
                  blas_rates[0] > 0 ? blas_rates[i] / blas_rates[0] * thread_list[0] / thread_list[i] : 0);
    std::printf("\n  (each cell: ratio to BLAS, speed-up, efficiency)\n");
  }
  std::printf("\nall goals: %s\n", met ? "met" : "NOT met");
  return 0;
  } catch (...) {
    return report_error("pasa-bench-attention");
  }
}
