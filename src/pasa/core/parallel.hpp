// Deterministic parallel loop: items [0, n) dealt to `threads` std::threads, each taking the next item from
// a shared counter as it becomes free (dynamic dealing: a thread slowed by another process or given longer
// items, e.g. causal rows, holds up nobody). Each item must write only its own outputs (and draw from its
// own random stream), so results never depend on the thread count or on which thread ran an item.
// Before each item the cancel flag (cancel.hpp) is read (one relaxed load): once a cancellation is requested
// no further item starts and the loop throws Cancelled, so every caller (attention, generation, attribution)
// stops within one item, not at its next golden or its end.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "pasa/core/cancel.hpp"

namespace pasa {

inline int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
  const std::size_t t = std::min<std::size_t>(std::max(1, threads), n);
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) {
      check_cancel();
      f(i);
    }
    return;
  }
  std::exception_ptr error;
  std::mutex m;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
        check_cancel();
        f(i);
      }
    } catch (...) {
      failed = true;  // the others stop after their current item
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (std::size_t w = 1; w < t; ++w) pool.emplace_back(work);
  work();  // the calling thread is one of the t workers
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace pasa
