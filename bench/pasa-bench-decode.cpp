// Decode-step benchmark ([UA] over a paged KV cache): B sequences, one new token each, Nq query heads over
// Nkv KV heads, Skv cached tokens in blocks of `block` tokens at shuffled cache blocks; the emulated kernel
// under an allocation preset, and the golden of the same step. Goal: B = 8, Nq = 32, Nkv = 8,
// Skv = 32768, D = 128, block 16 under FA-FP16/FP32 in < 1 s on 2 cores, its golden in < 5 s.
// --threads LIST (e.g. 1,2,4): the step and its golden at each count, then a scaling table.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>


#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "../apps/library_names.hpp"
#include "bench_clock.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"

using namespace pasa;
using namespace pasa::bench;

int main(int argc, char** argv) {
  CLI::App app{"Time one decode step over a paged KV cache (emulated kernel and golden)"};
  // Every repetition and kernel runs the same shapes: their big buffers are kept, not faulted in anew
  // (pasa::KeepBigBlocks, core/memory.hpp); the first call of a shape pays for the pages.
  const pasa::KeepBigBlocks keep_big_blocks;
  std::size_t B = 8, Nq = 32, Nkv = 8, Skv = 32768, D = 128, block = 16, s2 = 128, splits = 1;
  std::string alloc = "fa_fp16_fp32", algo = "fa2";
  std::string threads_text = std::to_string(default_threads());
  bool skip_golden = false;
  std::string max_memory;
  using pasa_apps::unsigned_integer;
  app.add_option("--batch", B, "sequences (one new token each)")->check(unsigned_integer(1));
  app.add_option("--heads", Nq, "query heads Nq")->check(unsigned_integer(1));
  app.add_option("--kv-heads", Nkv, "KV heads Nkv")->check(unsigned_integer(1));
  app.add_option("--kv-seq", Skv, "context length (cached tokens + the new one)")->check(unsigned_integer(1));
  app.add_option("--dim", D, "head dimension D")->check(unsigned_integer(1));
  app.add_option("--block", block, "paged cache block size (tokens)")->check(unsigned_integer(1));
  app.add_option("--s2", s2, "key tile of the kernel")->check(unsigned_integer(1));
  app.add_option("--splits", splits, "split-KV parts")->check(unsigned_integer(1));
  app.add_option("--alloc", alloc, "allocation preset")->check(pasa_apps::library_name(allocation_preset));
  app.add_option("--algorithm", algo, "fa2 or pasa")->check(CLI::IsMember({"fa2", "pasa"}));
  app.add_option("--threads", threads_text, "thread counts, e.g. 2 or 1,2,4 (a scaling table)")->capture_default_str();
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  app.add_flag("--skip-golden", skip_golden, "do not compute the golden");
  app.set_version_flag("--version", "pasa-bench-decode " PASA_VERSION);  // the CMake project version, as pasa.__version__
  PASA_CLI_PARSE(app, argc, argv);
  std::vector<int> thread_list;
  try {
    thread_list = parse_threads_list(threads_text);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pasa-bench-decode: %s\n", e.what());
    return 2;
  }
  int threads = *std::max_element(thread_list.begin(), thread_list.end());  // the set-up's threads
  try {

  // The cache: K and V drawn like a (B, Nkv, Skv, D) uniform fp16 problem (generate_inputs' streams, head by
  // head, so that no dense copy of the cache is ever held), stored block by block at a permuted position
  // (the block table); Q of the new tokens from the same problem.
  ProblemSpec ps;
  ps.B = B;
  ps.Nq = Nq;
  ps.Nkv = Nkv;
  ps.Sq = 1;
  ps.Skv = Skv;
  ps.D = D;
  ps.seed = 1;
  ps.q = ps.k = ps.v = TensorGen{GenKind::uniform, 0, 1};
  try {  // the problem's checks name JSON places; here the options gave the values
    validate(ps);
  } catch (const InputError& e) {
    std::string m = e.what();
    for (const auto& [place, option] : {std::pair<std::string, std::string>{"/shape/Nkv", "--kv-heads"},
                                        {"/shape/Nq", "--heads"}, {"/shape/Skv", "--kv-seq"}, {"/shape/B", "--batch"},
                                        {"/shape/D", "--dim"}, {"/shape/Sq", "Sq (1)"}})
      for (std::size_t at; (at = m.find(place)) != std::string::npos;) m.replace(at, place.size(), option);
    throw InputError("options: " + m);
  }
  // Size first (core/memory.hpp): the paged cache (K and V as floats, the last block of each sequence
  // padded), Q twice, a (Skv, D) double head per thread, then the kernel's and the golden's own memory
  // (unified_golden_bytes: one (sequence, KV head) part per thread).
  const std::size_t per_seq = (Skv + block - 1) / block;
  {
    AlgorithmSpec a;
    a.name = algo;
    a.alloc = allocation_preset(alloc);
    a.s1 = 1;
    a.s2 = s2;
    a.splits = splits;
    const Shape qs{B, Nq, 1, D}, kvs{B, Nkv, Skv, D};
    GoldenOptions go;
    go.threads = threads;
    const std::size_t golden = unified_golden_bytes(Nq, Nkv, D, B, 1, Skv, B, go);
    const std::size_t cache = sat_product(2 * sizeof(float), B, per_seq, Nkv, block, D);
    const std::size_t need = sat_add(
        sat_add(cache, sat_product(3 * sizeof(double), B, Nq, D)),
        sat_add(sat_product(sizeof(double), static_cast<std::size_t>(threads), Skv, D),
                std::max(attention_bytes(qs, kvs, format_by_name("fp16"), a, threads), skip_golden ? 0 : golden)));
    check_memory(need, max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory"), "this decode step",
                 fmt::format("B {}, Nq {}, Nkv {}, Skv {}, D {}, block {}, {} threads", B, Nq, Nkv, Skv, D, block, threads));
  }
  const Format fp16 = format_by_name(ps.format);
  auto t0 = std::chrono::steady_clock::now();
  const Tensor q = generate_tensor(ps.q, {B, Nq, 1, D}, fp16, ps.seed, "q", threads);
  PagedBatch pb;
  pb.cache.num_blocks = B * per_seq;
  pb.cache.block_size = block;
  pb.cache.Nkv = Nkv;
  pb.cache.D = D;
  pb.cache.format = fp16;
  // Unset: each page is first touched where its values are written, by the generating threads.
  pb.cache.k.resize(pb.cache.num_blocks * Nkv * block * D);
  pb.cache.v.resize(pb.cache.k.size());
  pb.q = Tensor({1, Nq, B, D}, fp16);
  for (std::size_t b = 0; b < B; ++b) {
    PagedSequence sq{1, Skv, 0, {}};
    for (std::size_t t = 0; t < per_seq; ++t) sq.block_table.push_back((t * B + b * 7919) % pb.cache.num_blocks);
    for (std::size_t h = 0; h < Nq; ++h) std::copy_n(q.head(b, h), D, pb.q.head(0, h) + b * D);
    pb.seqs.push_back(std::move(sq));
  }
  parallel_for(B * Nkv, threads, [&](std::size_t w) {
    const std::size_t b = w / Nkv, h = w % Nkv;
    thread_local std::vector<double> head;  // one (Skv, D) matrix, reused by the thread's heads
    head.resize(Skv * D);
    for (const char* name : {"k", "v"}) {
      generate_head(name[0] == 'k' ? ps.k : ps.v, b, h, Skv, D, fp16, ps.seed, name, head.data());
      float* cache = (name[0] == 'k' ? pb.cache.k : pb.cache.v).data();
      for (std::size_t j = 0; j < per_seq * block; ++j) {  // (the slots after the last token hold 0)
        float* dst = cache + ((pb.seqs[b].block_table[j / block] * Nkv + h) * block + j % block) * D;
        if (j < Skv) std::copy_n(head.data() + j * D, D, dst);
        else std::fill_n(dst, D, 0.0f);
      }
    }
  });
  std::printf("decode step: B %zu, Nq %zu, Nkv %zu, Skv %zu, D %zu, paged block %zu; %s / %s, s2 %zu, %zu split(s), "
              "%d threads (setup %.2f s)\n", B, Nq, Nkv, Skv, D, block, algo.c_str(), alloc.c_str(), s2, splits, threads,
              seconds_since(t0));
  AlgorithmSpec spec;
  spec.name = algo;
  spec.alloc = allocation_preset(alloc);
  spec.s1 = 1;
  spec.s2 = s2;
  spec.splits = splits;
  // Baseline timed in the same run (the machine is shared: ratios travel, seconds do not): one pass reading
  // the K and V blocks the step reads (an XOR of their bits per block, vectorised), the memory floor of any
  // decode kernel.
  struct Times {
    double read = 0, kernel = 0, kernel_cpu = 0, golden = 0, golden_cpu = 0;
  };
  std::vector<Times> times;  // per thread count
  for (int count : thread_list) {
    threads = count;
    std::printf("-- %d thread(s)\n", threads);
    t0 = std::chrono::steady_clock::now();
    std::vector<std::uint32_t> block_xor(pb.cache.num_blocks);
    parallel_for(pb.cache.num_blocks, threads, [&](std::size_t blk) {
      const std::size_t n = Nkv * block * D;
      const float *k = pb.cache.k.data() + blk * n, *v = pb.cache.v.data() + blk * n;
      std::uint32_t x = 0;
      for (std::size_t i = 0; i < n; ++i) x ^= std::bit_cast<std::uint32_t>(k[i]) ^ std::bit_cast<std::uint32_t>(v[i]);
      block_xor[blk] = x;
    });
    const double t_read = seconds_since(t0);
    std::uint32_t checksum = 0;
    for (std::uint32_t x : block_xor) checksum ^= x;
    std::printf("baseline: reading the cache once %.3f s wall (checksum %08x)\n", t_read, checksum);
    t0 = std::chrono::steady_clock::now();
    double c0 = cpu_seconds();
    const AttentionOutput out = unified_attention(pb, spec, threads);
    const double t_kernel = seconds_since(t0), c_kernel = cpu_seconds() - c0;
    const bool goal_shape = B == 8 && Nq == 32 && Nkv == 8 && Skv == 32768 && D == 128 && block == 16 && threads == 2 &&
                            alloc == "fa_fp16_fp32" && algo == "fa2";
    const char* shape_note = goal_shape ? "" : ", not the goal's shape/allocation/2 threads";
    std::printf("emulated kernel: %.3f s wall, %.3f CPU-s, %.1fx the baseline (goal < 1 s wall on 2 idle cores: %s; "
                "load %.2f%s)\n", t_kernel, c_kernel, t_kernel / t_read, t_kernel < 1 ? "met" : "NOT met", load1(),
                shape_note);
    times.push_back({t_read, t_kernel, c_kernel, 0, 0});
    if (skip_golden) continue;
    GoldenOptions go;
    go.threads = threads;
    t0 = std::chrono::steady_clock::now();
    c0 = cpu_seconds();
    const Golden g = unified_golden(pb, go);
    const double t_golden = seconds_since(t0), c_golden = cpu_seconds() - c0;
    std::printf("golden: %.3f s wall, %.3f CPU-s, %d guaranteed bits (goal < 5 s wall on 2 idle cores: %s; "
                "load %.2f%s)\n",
                t_golden, c_golden, g.guaranteed_bits, t_golden < 5 ? "met" : "NOT met", load1(), shape_note);
    std::printf("rmse (Eq. 19) of the kernel: %.3e\n", compare_outputs(out.o, g.o).rmse);
    times.back().golden = t_golden;
    times.back().golden_cpu = c_golden;
  }
  if (thread_list.size() > 1) {
    // Speed-up and parallel efficiency over the first count, and busy = CPU / wall (the cores kept busy: at
    // T threads T − busy waited); the cache read is the memory floor at the same count (a kernel that keeps
    // its ratio to it scales as far as the machine's memory does).
    std::printf("\nscaling over %d thread(s) (wall s, speed-up, efficiency, busy cores; the cache read's wall s):\n"
                "%-8s %-9s %-31s %s\n", thread_list[0], "threads", "read", "kernel", skip_golden ? "" : "golden");
    const Times& first = times[0];
    for (std::size_t i = 0; i < thread_list.size(); ++i) {
      const Times& t = times[i];
      const double r = static_cast<double>(thread_list[0]) / thread_list[i];
      std::printf("%-8d %7.3f   %7.3f %5.2fx %4.2f %5.2f busy   ", thread_list[i], t.read, t.kernel, first.kernel / t.kernel,
                  first.kernel / t.kernel * r, t.kernel_cpu / t.kernel);
      if (!skip_golden)
        std::printf("%7.3f %5.2fx %4.2f %5.2f busy", t.golden, first.golden / t.golden, first.golden / t.golden * r,
                    t.golden_cpu / t.golden);
      std::printf("\n");
    }
  }
  return 0;
  } catch (...) {
    return report_error("pasa-bench-decode");
  }
}
