// core/parallel.hpp: parallel_for runs every item exactly once on any thread count, dealing items
// dynamically (a slow item does not hold up the items after it), and rethrows an item's exception.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pasa/core/parallel.hpp"

using namespace pasa;

TEST_CASE("parallel_for runs each item once", "[parallel]") {
  for (std::size_t n : {0, 1, 2, 7, 1000})
    for (int threads : {1, 2, 3, 8, 64}) {
      std::vector<std::atomic<int>> hits(n);
      parallel_for(n, threads, [&](std::size_t i) { hits[i].fetch_add(1); });
      int bad = 0;
      for (auto& h : hits) bad += h.load() != 1;
      INFO(n << " items, " << threads << " threads");
      CHECK(bad == 0);
    }
}

TEST_CASE("parallel_for deals items dynamically", "[parallel]") {
  // Item 0 sleeps; with 2 threads the other thread takes every other item meanwhile (a round-robin deal
  // would leave items 2, 4, ... to the sleeping thread).
  std::vector<std::thread::id> who(41);
  parallel_for(who.size(), 2, [&](std::size_t i) {
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    who[i] = std::this_thread::get_id();
  });
  int with_item0 = 0;
  for (std::size_t i = 1; i < who.size(); ++i) with_item0 += who[i] == who[0];
  CHECK(with_item0 == 0);
}

TEST_CASE("parallel_for rethrows an item's exception", "[parallel]") {
  for (int threads : {1, 2, 4})
    CHECK_THROWS_WITH(parallel_for(100, threads, [](std::size_t i) {
                        if (i == 37) throw std::runtime_error("item 37");
                      }),
                      "item 37");
}
