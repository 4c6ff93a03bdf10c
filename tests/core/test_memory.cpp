// The big blocks kept for reuse (core/memory.hpp, detail::BigBlocks): while a KeepBigBlocks is alive, a freed
// uninit_vector of 32 MiB or more is handed to the next allocation of the same size, a size not kept first
// hands every kept block back (so a call's peak memory is what it was without them), and the last scope to
// end hands them all back; without a scope nothing is kept.
#include <catch2/catch.hpp>

#include "pasa/core/memory.hpp"

using namespace pasa;

namespace {
constexpr std::size_t kBig = detail::BigBlocks::kMin / sizeof(float);  // 32 MiB of floats
}

TEST_CASE("big blocks: kept for the same size inside a scope, handed back on another size", "[memory]") {
  if (!detail::BigBlocks::enabled()) return;  // (AddressSanitizer: every free is a real one)
  detail::BigBlocks& kept = detail::BigBlocks::instance();
  const float* first;
  {
    const KeepBigBlocks keep;
    REQUIRE(kept.kept_bytes() == 0);
    {
      uninit_vector<float> a(kBig);
      a[0] = 1.0f;
      first = a.data();
    }
    CHECK(kept.kept_bytes() == kBig * sizeof(float));
    {
      uninit_vector<float> b(kBig);  // the same size: the same block, no fresh pages
      CHECK(b.data() == first);
      CHECK(kept.kept_bytes() == 0);
    }
    CHECK(kept.kept_bytes() == kBig * sizeof(float));
    {
      uninit_vector<double> c(kBig);  // another size (64 MiB): the kept block is handed back first
      CHECK(kept.kept_bytes() == 0);
    }
    CHECK(kept.kept_bytes() == kBig * sizeof(double));
    {
      uninit_vector<float> small(1000), under(kBig - 1);  // below 32 MiB: the C library's, not kept
      (void)small;
      (void)under;
    }
    CHECK(kept.kept_bytes() == kBig * sizeof(double));
    {
      const KeepBigBlocks inner;  // scopes nest: the inner one's end hands nothing back
    }
    CHECK(kept.kept_bytes() == kBig * sizeof(double));
  }
  CHECK(kept.kept_bytes() == 0);  // the last scope handed them back
  {
    uninit_vector<float> d(kBig);
    (void)d;
  }
  CHECK(kept.kept_bytes() == 0);  // no scope: freed at once
}

TEST_CASE("big blocks: a reused block is written like a fresh one", "[memory]") {
  if (!detail::BigBlocks::enabled()) return;
  const KeepBigBlocks keep;
  {
    uninit_vector<float> a(kBig, 2.0f);
    CHECK(a[kBig - 1] == 2.0f);
  }
  uninit_vector<float> b(kBig, 3.0f);  // a value given: every element written, whatever the block held
  CHECK(b[0] == 3.0f);
  CHECK(b[kBig - 1] == 3.0f);
  b.resize(2 * kBig);  // growth to a new size: the elements move, the old block is kept
  CHECK(b[kBig - 1] == 3.0f);
  CHECK(detail::BigBlocks::instance().kept_bytes() == kBig * sizeof(float));
}
