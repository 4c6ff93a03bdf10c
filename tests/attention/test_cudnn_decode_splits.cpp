// cuDNN 9.19's split decode (torch_cudnn_sm90, decode: cudnn_sm80): the number of CTAs cudnn_decode_splits
// gives against every decode launch the profiler recorded on the H200 (results/hardware/kernels/
// cudnn_decode_grid.json: Skv 480-1100 every length for 2 heads at D 64; cudnn_decode_probe_kernels.json: Skv
// 64-8192, D 64-160, 1-8 KV heads; cudnn_gap_probe_kernels.json: Skv
// 2028-2051, 4080-4096, 8192, D 160, 1-32 KV heads, batch 4; cudnn_decode_later_kernels.json: B·Hkv 3-128 at
// Skv 1024-8192, profiled after the rule below was written). The grid's x is the split count, twice it at
// D 160 (two 128-column halves of V); a launch without the lean reduction kernel is one CTA per head.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/attention/kernel_recipe.hpp"

using pasa::cudnn_decode_splits;
using pasa::kernel_recipe;

namespace {

nlohmann::json load(const std::string& name) {
  std::ifstream f(std::string(PASA_SOURCE_DIR) + "/results/hardware/kernels/" + name);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

struct Launch {
  std::size_t batch_kv_heads, skv, d, grid_x;
  bool reduced;
};

std::size_t measured_splits(const Launch& l) {
  if (!l.reduced) return 1;  // (one CTA per head, or per half of V at D 160)
  return l.d > 128 ? l.grid_x / 2 : l.grid_x;
}

}  // namespace

TEST_CASE("cudnn_decode_splits: the profiled CTA counts of cuDNN's split decode") {
  const auto& k = kernel_recipe("torch_cudnn_sm90").schedule;
  std::vector<Launch> launches;
  const nlohmann::json grid = load("cudnn_decode_grid.json");  // (held: its rows outlive the loop's range)
  for (const auto& r : grid.at("rows")) {
    const auto& ks = r.at("kernels");
    launches.push_back({r.at("hkv").get<std::size_t>(), r.at("skv").get<std::size_t>(), r.at("d").get<std::size_t>(),
                        ks.at(0).at("grid").at(0).get<std::size_t>(), ks.size() > 1});
  }
  // cudnn_decode_probe_kernels.json: Skv 64-8192 at D 64/96/128/160, 1-32 query heads, 1-8 KV heads
  for (const auto& r : load("cudnn_decode_probe_kernels.json")) {
    if (r.at("sq").get<std::size_t>() != 1) continue;
    const auto& ks = r.at("kernels");
    launches.push_back({r.at("hkv").get<std::size_t>(), r.at("skv").get<std::size_t>(), r.at("d").get<std::size_t>(),
                        ks.at(0).at("grid").at(0).get<std::size_t>(), ks.size() > 1});
  }
  // cudnn_gap_probe_kernels.json rows: [b, hq, hkv, sq, skv, d, dtype, causal, [[name, grid], ...]]
  // cudnn_decode_later_kernels.json (same rows; taken after the rule was fixed): 3-128 heads, batch 1-8
  for (const char* file : {"cudnn_gap_probe_kernels.json", "cudnn_decode_later_kernels.json"}) {
    for (const auto& r : load(file)) {
      if (r.at(3).get<std::size_t>() != 1) continue;  // prefill
      const auto& ks = r.at(8);
      launches.push_back({r.at(0).get<std::size_t>() * r.at(2).get<std::size_t>(), r.at(4).get<std::size_t>(),
                          r.at(5).get<std::size_t>(), ks.at(0).at(1).at(0).get<std::size_t>(), ks.size() > 1});
    }
  }
  REQUIRE(launches.size() > 800);
  std::size_t wrong = 0, split = 0;
  for (const Launch& l : launches) {
    const std::size_t want = measured_splits(l), got = cudnn_decode_splits(k, l.batch_kv_heads, l.skv);
    split += want > 1;
    if (got != want) {
      ++wrong;
      UNSCOPED_INFO("B*Hkv " << l.batch_kv_heads << " Skv " << l.skv << " D " << l.d << ": measured " << want
                             << " CTAs, modelled " << got);
    }
  }
  CHECK(split > 600);
  CHECK(wrong == 0);
}

TEST_CASE("cudnn_decode_splits: the fields move the count") {
  auto k = kernel_recipe("torch_cudnn_sm90").schedule;
  CHECK(cudnn_decode_splits(k, 2, 512) == 1);
  CHECK(cudnn_decode_splits(k, 2, 2032) == 8);
  CHECK(cudnn_decode_splits(k, 2, 2033) == 16);
  k.decode_split_keys = 256;
  CHECK(cudnn_decode_splits(k, 2, 2033) == 8);
  k.decode_max_ctas = 16;
  CHECK(cudnn_decode_splits(k, 2, 2033) == 8);
  CHECK(cudnn_decode_splits(k, 4, 2033) == 4);
  CHECK(cudnn_decode_splits(k, 8, 2033) == 1);  // 16 / 8 = 2 < 4: one CTA
}
