// Long-context benchmark: prefill (B 1, Sq = Skv, --heads heads) and decode (Sq 1, B 8,
// Nq 32, Nkv 8) at each length of --lengths, fp16 uniform inputs. Per case, in the same run: the emulated
// kernel (fa2 under --alloc, FA-FP16/FP32 by default), the golden, golden / emulated, the golden's time
// ratio to the previous (half) length of the same mode (the work grows 4x per doubling; goal at most 4.6x),
// and the case's peak RSS (and the peak up to the end of the emulated kernel, "emu RSS") against the bytes of
// Q, K, V and the output at the format's width. A case whose
// memory estimate (case_memory_bytes, as pasa-attn checks it) does not fit is refused with the estimate,
// before anything is allocated; the others still run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../apps/library_names.hpp"
#include "bench_clock.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/golden_compare.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/study/sweep.hpp"

using namespace pasa;
using namespace pasa::bench;

namespace {

// Linux: writing 5 to clear_refs resets the peak resident set (VmHWM) to the current one, so that each case
// reports its own peak. False where that is not possible (the peak then includes the earlier cases').
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// VmHWM of /proc/self/status in bytes (0 if unreadable).
std::size_t peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// "a,b,c" -> {"a", "b", "c"} (an empty entry stays, and is refused by the caller).
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string mib(std::size_t bytes) { return fmt::format("{:.0f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time prefill and decode at long context: the emulated kernel and the golden, with peak RSS"};
  std::string lengths_text = "8192,32768", modes_text = "prefill,decode", alloc = "fa_fp32", max_memory;
  std::size_t heads = 1, D = 128;
  int threads = default_threads();
  app.add_option("--lengths", lengths_text, "key lengths, e.g. 8192,32768,131072")->capture_default_str();
  app.add_option("--modes", modes_text, "prefill, decode or both")->capture_default_str();
  app.add_option("--heads", heads, "prefill heads (decode: 32 query / 8 KV heads, B 8)")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--dim", D, "head dimension D")->check(pasa_apps::unsigned_integer(1));
  app.add_option("--alloc", alloc, "allocation preset of fa2")->check(pasa_apps::library_name(allocation_preset));
  app.add_option("--threads", threads, "threads")->check(pasa_apps::thread_count());
  app.add_option("--max-memory", max_memory, "memory a case may use, e.g. 64G (default: MemAvailable)");
  app.set_version_flag("--version", "pasa-bench-long " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  try {
    std::vector<std::size_t> lengths;
    for (const std::string& t : split_list(lengths_text)) {
      std::size_t used = 0;
      unsigned long long n = 0;
      try {
        n = std::stoull(t, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != t.size() || n == 0 || t[0] == '-' || t[0] == '+')
        throw InputError(fmt::format("--lengths: '{}' is not a whole number >= 1", t));
      lengths.push_back(static_cast<std::size_t>(n));
    }
    std::vector<std::string> modes = split_list(modes_text);
    for (const std::string& m : modes)
      if (m != "prefill" && m != "decode") throw InputError(fmt::format("--modes: '{}' is neither prefill nor decode", m));
    const std::size_t limit = max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory");
    AlgorithmSpec algo;
    algo.name = "fa2";
    algo.alloc = allocation_preset(alloc);
    GoldenOptions go;
    go.threads = threads;
    const bool own_peak = reset_peak_rss();
    std::printf("fa2 / %s against the golden, fp16 uniform inputs, D %zu, %d thread(s), load %.2f%s\n", alloc.c_str(), D,
                threads, load1(), own_peak ? "" : " (peak RSS not resettable: each peak includes the earlier cases)");
    std::printf("%-8s %8s %10s %10s %8s %9s %5s %11s %11s %11s %8s %11s\n", "mode", "Skv", "emulated", "golden", "gold/emu",
                "per 2x", "bits", "peak RSS", "emu RSS", "tensors", "RSS/ten", "estimate");
    for (const std::string& mode : modes) {
      double previous = 0;
      std::size_t previous_len = 0;
      for (std::size_t L : lengths) {
        ProblemSpec ps;
        const bool decode = mode == "decode";
        ps.B = decode ? 8 : 1;
        ps.Nq = decode ? 32 : heads;
        ps.Nkv = decode ? 8 : heads;
        ps.Sq = decode ? 1 : L;
        ps.Skv = L;
        ps.D = D;
        ps.seed = 1;
        ps.q = ps.k = ps.v = TensorGen{GenKind::uniform, 0, 1};
        validate(ps);
        // Q, K, V and the output at the format's width (fp16: 2 bytes), what the memory goal counts.
        const std::size_t tensors = sat_mul(2, sat_add(sat_mul(2, sat_product(ps.B, ps.Nq, ps.Sq, D)),
                                                       sat_mul(2, sat_product(ps.B, ps.Nkv, ps.Skv, D))));
        const std::size_t need = case_memory_bytes(ps, {algo}, go, false, 0, false, /*score_stats=*/false);
        try {
          check_memory(need, limit, fmt::format("{} at Skv {}", mode, L), fmt::format("{} threads", threads));
        } catch (const InputError& e) {
          std::printf("%-8s %8zu refused: %s\n", mode.c_str(), L, e.what());
          continue;
        }
        reset_peak_rss();
        const AttentionInputs in = generate_inputs(ps, threads, Storage::narrow);  // (Q, K, V at fp16's width)
        auto t0 = std::chrono::steady_clock::now();
        const AttentionOutput out = run_attention(in, algo, threads);
        const double t_emu = seconds_since(t0);
        const std::size_t emu_peak = peak_rss();  // (the peak up to here: which phase holds the case's peak)
        // the golden as pasa-attn measures against it: streamed into the metrics (its own time apart)
        const GoldenMetrics gm = compare_with_golden(in, {&out.o}, go);
        const Golden& g = gm.golden;
        const double t_gold = gm.golden_seconds;
        const std::size_t peak = peak_rss();
        const std::string per2 = previous > 0 && L == 2 * previous_len ? fmt::format("{:.2f}x", t_gold / previous) : "-";
        std::printf("%-8s %8zu %9.3fs %9.3fs %7.1fx %9s %5d %11s %11s %11s %7.1fx %11s%s\n", mode.c_str(), L, t_emu,
                    t_gold, t_gold / t_emu, per2.c_str(), g.guaranteed_bits, mib(peak).c_str(), mib(emu_peak).c_str(),
                    mib(tensors).c_str(),
                    static_cast<double>(peak) / static_cast<double>(tensors), mib(need).c_str(),
                    g.used_mpfr ? " (MPFR fallback)" : "");
        std::fflush(stdout);
        previous = t_gold;
        previous_len = L;
      }
    }
    std::printf("goals (measured side by side): golden at most 4.6x per doubling and at most 4x the "
                "emulated kernel; peak RSS at most 2x the tensors + 64 MiB (Q, K and V held at fp16's width; the output as doubles; no score statistics)\n");
    return 0;
  } catch (...) {
    return report_error("pasa-bench-long");
  }
}
