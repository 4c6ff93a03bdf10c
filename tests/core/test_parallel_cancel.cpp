// parallel_for (core/parallel.hpp) and cooperative cancellation (core/cancel.hpp): once a cancellation is
// requested no further item starts and the loop throws Cancelled; without one every item runs exactly once.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pasa/core/cancel.hpp"
#include "pasa/core/parallel.hpp"

using namespace pasa;

namespace {
// Clears the process-wide flag however the test ends (other tests in this process must not see it).
struct ClearCancel {
  ClearCancel() { clear_cancel(); }
  ~ClearCancel() { clear_cancel(); }
};
}  // namespace

TEST_CASE("parallel_for runs every item once and stops between items on a cancel request", "[cancel]") {
  const ClearCancel guard;
  constexpr std::size_t n = 400;
  for (int threads : {1, 4}) {
    std::vector<std::atomic<int>> hits(n);
    parallel_for(n, threads, [&](std::size_t i) { ++hits[i]; });
    for (std::size_t i = 0; i < n; ++i) CHECK(hits[i] == 1);

    // Item 10 requests the cancellation (as Python's Ctrl-C handler does from another thread); the items
    // sleep, so without a check between items the loop would run all 400 (about 0.4 s / threads).
    std::atomic<std::size_t> ran{0};
    CHECK_THROWS_AS(parallel_for(n, threads,
                                 [&](std::size_t i) {
                                   if (i == 10) request_cancel();
                                   ++ran;
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                 }),
                    Cancelled);
    if (threads == 1) CHECK(ran == 11);  // items 0..10, then nothing
    else CHECK(ran < n / 2);             // (about 10 + threads: each worker finishes the item it is in)
    clear_cancel();
  }
}
