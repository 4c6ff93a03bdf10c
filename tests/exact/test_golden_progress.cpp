// GoldenOptions::progress: called once per work item (batch, KV head, block of query rows) with the count
// done so far, ending at the item count, from any thread; and the golden's bits do not depend on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <random>
#include <vector>

#include "pasa/exact/golden.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

TEST_CASE("golden progress: every work item once, the bits unchanged", "[golden]") {
  // B = 2, Nkv = 2 (GQA: 4 query heads), Sq = 2·kGoldenRowBlock + 3: 3 row blocks per KV head, 12 items.
  const std::size_t Sq = 2 * kGoldenRowBlock + 3, Skv = 40, D = 16;
  const Format f = format_by_name("fp16");
  std::mt19937_64 eng(7);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  AttentionInputs in;
  in.q = Tensor({2, 4, Sq, D}, f);
  in.k = Tensor({2, 2, Skv, D}, f);
  in.v = Tensor({2, 2, Skv, D}, f);
  for (Tensor* t : {&in.q, &in.k, &in.v})
    for (double& x : t->data) x = pasa::round(u(eng), f);
  for (int threads : {1, 3}) {
    GoldenOptions plain;
    plain.threads = threads;
    const Golden want = golden_attention(in, plain);
    std::mutex m;
    std::vector<std::size_t> done, totals;
    GoldenOptions opt = plain;
    opt.progress = [&](std::size_t d, std::size_t total) {
      const std::lock_guard lock(m);
      done.push_back(d);
      totals.push_back(total);
    };
    const Golden got = golden_attention(in, opt);
    const std::size_t items = 2 * 2 * 3;
    REQUIRE(done.size() == items);
    std::sort(done.begin(), done.end());
    for (std::size_t i = 0; i < items; ++i) CHECK(done[i] == i + 1);
    CHECK(std::all_of(totals.begin(), totals.end(), [&](std::size_t t) { return t == items; }));
    CHECK(got.o.data == want.o.data);
    CHECK(got.lse == want.lse);
    CHECK(got.guaranteed_bits == want.guaranteed_bits);
  }
}
