// Attention input validation and the mask definitions.
#include <catch2/catch.hpp>

#include <limits>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/core/error.hpp"

using namespace pasa;

namespace {
AttentionInputs shapes(Shape q, Shape kv) {
  const Format h = format_by_name("fp16");
  AttentionInputs in;
  in.q = Tensor(q, h);
  in.k = Tensor(kv, h);
  in.v = Tensor(kv, h);
  return in;
}
}  // namespace

TEST_CASE("validate names each kind of bad input", "[inputs]") {
  CHECK_NOTHROW(validate(shapes({2, 8, 3, 4}, {2, 2, 5, 4})));
  CHECK_THROWS_WITH(validate(shapes({1, 6, 3, 4}, {1, 4, 3, 4})), Catch::Contains("not a multiple of N_kv"));
  CHECK_THROWS_WITH(validate(shapes({1, 2, 3, 0}, {1, 2, 3, 0})), Catch::Contains("D = 0"));
  CHECK_THROWS_WITH(validate(shapes({1, 2, 3, 4}, {1, 2, 3, 8})), Catch::Contains("head dimension"));
  CHECK_THROWS_WITH(validate(shapes({2, 2, 3, 4}, {1, 2, 3, 4})), Catch::Contains("batch"));
  AttentionInputs kv = shapes({1, 2, 3, 4}, {1, 2, 3, 4});
  kv.v = Tensor({1, 2, 4, 4}, kv.v.format);
  CHECK_THROWS_WITH(validate(kv), Catch::Contains("K and V shapes differ"));
  AttentionInputs nan = shapes({1, 1, 2, 2}, {1, 1, 2, 2});
  nan.k.data[3] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(validate(nan), Catch::Contains("K has a non-finite element") && Catch::Contains("s=1, d=1"));
  nan.allow_nonfinite = true;
  CHECK_NOTHROW(validate(nan));
  AttentionInputs m = shapes({2, 1, 2, 2}, {2, 1, 3, 2});
  m.mask.kv_len = {3};
  CHECK_THROWS_WITH(validate(m), Catch::Contains("one per batch"));
  m.mask.kv_len = {3, 4};
  CHECK_THROWS_WITH(validate(m), Catch::Contains("kv_len[1] = 4 exceeds Skv = 3"));
  m.mask.kv_len.clear();
  m.mask.keep.assign(5, 1);
  CHECK_THROWS_WITH(validate(m), Catch::Contains("B*Sq*Skv"));
  AttentionInputs sz = shapes({1, 1, 2, 2}, {1, 1, 2, 2});
  sz.q.data.pop_back();
  CHECK_THROWS_WITH(validate(sz), Catch::Contains("Q holds 3 values"));
}

TEST_CASE("masks: causal aligned to the end, kv_len, keep, GQA group and scale", "[inputs]") {
  AttentionInputs in = shapes({2, 4, 2, 16}, {2, 2, 5, 16});  // decode-like: Sq = 2 < Skv = 5
  CHECK(in.group() == 2);
  CHECK(in.effective_scale() == 0.25);
  in.mask.causal = true;
  // row 0 sees keys 0..3 (j <= 0 + 5 - 2), row 1 sees 0..4
  CHECK(visible(in, 0, 0, 3));
  CHECK_FALSE(visible(in, 0, 0, 4));
  CHECK(visible(in, 0, 1, 4));
  in.mask.kv_len = {5, 2};
  CHECK_FALSE(visible(in, 1, 1, 2));
  CHECK(visible(in, 1, 1, 1));
  in.mask.keep.assign(2 * 2 * 5, 1);
  in.mask.keep[(1 * 2 + 1) * 5 + 0] = 0;
  CHECK_FALSE(visible(in, 1, 1, 0));
  CHECK(visible(in, 1, 0, 0));
  AttentionInputs pre = shapes({1, 1, 4, 2}, {1, 1, 2, 2});  // Sq > Skv: rows 0 and 1 fully masked
  pre.mask.causal = true;
  CHECK(visible_end(pre, 0, 0) == 0);
  CHECK(visible_end(pre, 0, 1) == 0);
  CHECK(visible_end(pre, 0, 2) == 1);
  CHECK(visible_end(pre, 0, 3) == 2);
}
