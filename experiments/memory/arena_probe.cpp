// Probe: where a 4-head prefill's peak RSS at 16 threads goes (round 23, docs/golden.md "Scores held or
// recomputed"). Peak (VmHWM) and current (VmRSS) after generating Q, K, V narrow and after run_attention
// (fa2 / fa_fp32), under four malloc policies: 0 as the engines leave it (keep_freed_memory, core/memory.hpp),
// 1 that policy from the start, 2 mmap threshold 4 MiB (trim 1 GiB), 3 the engines' policy with 2 arenas.
// Build against a configured build/ (not part of the CMake build):
//   g++ -std=c++20 -O2 -march=native -Isrc experiments/memory/arena_probe.cpp -o /tmp/arena_probe \
//     build/libpasa_study.a build/libpasa_analysis.a build/libpasa_io.a build/libpasa_exact.a \
//     build/libpasa_attention.a build/libpasa_exact.a build/libpasa_inputs.a build/libpasa_numeric.a \
//     -lmpfr -lgmp -lfmt -lopenblas -lz -pthread
//   /tmp/arena_probe THREADS SKV MODE
#include <cstdio>
#include <malloc.h>
#include "pasa/core/memory.hpp"
#include <fstream>
#include <string>
#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/study/sweep.hpp"
using namespace pasa;
long cur() { std::ifstream f("/proc/self/status"); std::string l; while (std::getline(f, l)) if (l.rfind("VmRSS", 0) == 0) return std::stol(l.substr(6)) / 1024; return 0; }
long hwm() { std::ifstream f("/proc/self/status"); std::string l; while (std::getline(f, l)) if (l.rfind("VmHWM", 0) == 0) return std::stol(l.substr(6)) / 1024; return 0; }
int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s THREADS SKV MODE(0-3)\n", argv[0]);
    return 2;
  }
  int threads = std::atoi(argv[1]); std::size_t L = std::atoi(argv[2]);
  ProblemSpec ps; ps.B = 1; ps.Nq = ps.Nkv = 4; ps.Sq = ps.Skv = L; ps.D = 128; ps.seed = 1;
  ps.q = ps.k = ps.v = TensorGen{GenKind::uniform, 0, 1};
  validate(ps);
  int mode = std::atoi(argv[3]);
  if (mode == 1) keep_freed_memory();
  if (mode == 2) { mallopt(M_MMAP_THRESHOLD, 4 << 20); mallopt(M_TRIM_THRESHOLD, 1 << 30); }
  if (mode == 3) { mallopt(M_MMAP_THRESHOLD, 32 << 20); mallopt(M_TRIM_THRESHOLD, 1 << 30); mallopt(M_ARENA_MAX, 2); }
  std::printf("start %ld MiB\n", hwm());
  const AttentionInputs in = generate_inputs(ps, threads, Storage::narrow);
  std::printf("inputs %ld MiB (now %ld)\n", hwm(), cur());
  AlgorithmSpec algo; algo.name = "fa2"; algo.alloc = allocation_preset("fa_fp32");
  const AttentionOutput out = run_attention(in, algo, threads);
  std::printf("emulated %ld MiB (now %ld, out %zu doubles)\n", hwm(), cur(), out.o.data.size());
}
