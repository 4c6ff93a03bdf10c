// core/parallel.hpp: parallel_for runs every item exactly once on any thread count, dealing items
// dynamically (a slow item does not hold up the items after it), and rethrows an item's exception.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
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

// LoopHelpers: a member's loops are open to helping threads, which run items exactly once, whose errors
// reach the loop's caller, and none of which is still inside a loop when it returns.
namespace {

// Waits (up to 20 s) until `cond` holds; the waits below only fail when helping is broken.
template <class C>
bool eventually(C cond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!cond())
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

}  // namespace

TEST_CASE("LoopHelpers: helpers join a member's one-thread loop, each item once", "[parallel]") {
  LoopHelpers group;
  std::atomic<int> entered{0}, left{0}, timeouts{0};  // (Catch's macros only on the test's own thread)
  std::vector<std::thread> helpers;
  std::vector<std::atomic<int>> hits(200);
  std::vector<std::thread::id> who(hits.size());
  std::atomic<bool> member_in{false};
  std::thread member([&] {
    const LoopHelpers::Member m(group);
    member_in = true;
    parallel_for(hits.size(), 1, [&](std::size_t i) {
      // Item 0 holds its thread until another thread has run an item: only a helper can.
      if (i == 0 && !eventually([&] {
            for (std::size_t j = 1; j < who.size(); ++j)
              if (hits[j].load() && who[j] != std::this_thread::get_id()) return true;
            return false;
          }))
        ++timeouts;
      who[i] = std::this_thread::get_id();
      hits[i].fetch_add(1);
    });
  });
  while (!member_in) std::this_thread::yield();  // help() returns at once while the group has no member
  for (int h = 0; h < 3; ++h)
    helpers.emplace_back([&] { group.help([&] { ++entered; }, [&] { ++left; }); });
  member.join();
  for (auto& t : helpers) t.join();  // help() returns: no member left, no loop open
  int bad = 0;
  for (auto& h : hits) bad += h.load() != 1;
  CHECK(bad == 0);
  CHECK(timeouts.load() == 0);
  CHECK(entered.load() == left.load());
  CHECK(entered.load() >= 1);
}

TEST_CASE("LoopHelpers: a helper's error reaches the caller; the caller waits for its helpers", "[parallel]") {
  LoopHelpers group;
  std::atomic<bool> helper_in{false}, helper_done{false}, waited{true}, done_at_return{false}, member_in{false};
  std::thread::id member_id;
  std::thread helper;
  std::string caught;
  {
    std::thread member([&] {
      member_id = std::this_thread::get_id();
      const LoopHelpers::Member m(group);
      member_in = true;
      try {
        parallel_for(2, 1, [&](std::size_t) {
          if (std::this_thread::get_id() == member_id) {
            waited = eventually([&] { return helper_in.load(); });  // the other item is the helper's
            return;
          }
          helper_in = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          helper_done = true;
          throw std::runtime_error("helper's item");
        });
      } catch (const std::runtime_error& e) {
        caught = e.what();
      }
      done_at_return = helper_done.load();  // parallel_for returned only after the helper left its item
    });
    while (!member_in) std::this_thread::yield();
    helper = std::thread([&] { group.help(); });
    member.join();
  }
  helper.join();
  CHECK(waited.load());
  CHECK(done_at_return.load());
  CHECK(caught == "helper's item");
}

TEST_CASE("LoopHelpers: loops outside a member are not open to helpers", "[parallel]") {
  LoopHelpers group;
  std::atomic<int> items{0}, joined{0};
  std::thread helper;
  {
    const LoopHelpers::Member m(group);  // keeps the helper waiting
    helper = std::thread([&] { group.help([&] { ++joined; }); });
    std::thread other([&] { parallel_for(50, 1, [&](std::size_t) { ++items; }); });
    other.join();
  }
  helper.join();
  CHECK(items.load() == 50);
  CHECK(joined.load() == 0);
}

TEST_CASE("parallel_width: a member's threads and the helpers waiting", "[parallel]") {
  CHECK(parallel_width(3) == 3);  // outside a member
  CHECK(parallel_width(0) == 1);
  LoopHelpers group;
  std::vector<std::thread> helpers;
  int width = 0;
  {
    const LoopHelpers::Member m(group);
    for (int h = 0; h < 2; ++h) helpers.emplace_back([&] { group.help(); });
    CHECK(eventually([&] { return group.idle() == 2; }));
    width = parallel_width(1);
  }
  for (auto& t : helpers) t.join();
  CHECK(width == 3);
}
