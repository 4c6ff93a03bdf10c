// The differential bridge for kernel authors: given Q, K, V and a GPU kernel's output, which
// kernel recipe produced it, and where the closest one parts from it. Every recipe runs on the inputs; the
// closest is then re-run with one schedule field at a time set to each other value it can take (exp2, KV
// order, row-sum layout, normalisation, scale placement, rescale, block size, split rule, FMAs), so that the
// field whose change closes (or narrows) the gap is found by measurement, not by guessing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

struct KernelMatch {
  std::string recipe;   // the registered recipe
  std::string variant;  // "" as registered, else the one field changed: "kv_order=forward"
  std::size_t elements = 0, identical = 0;
  std::uint64_t max_ulp = 0;
  double identical_pct() const { return elements ? 100.0 * static_cast<double>(identical) / elements : 0.0; }
};

struct KernelBridgeReport {
  std::vector<KernelMatch> recipes;   // every recipe that runs on these inputs, best first
  std::vector<std::string> refused;   // "recipe: why" for those that refuse them
  std::vector<KernelMatch> variants;  // the closest recipe with one field changed, best first
  std::string verdict;                // one sentence: the match, or the field where it parts
};

// gpu_out: the kernel's output, (B, Nq, Sq, D), values of the inputs' format. InputError when the shapes differ
// or no recipe runs on the inputs.
KernelBridgeReport compare_kernel(const AttentionInputs& in, const Tensor& gpu_out, int threads);
std::string kernel_bridge_text(const KernelBridgeReport&);  // the table pasa-hwcompare kernel prints

}  // namespace pasa
