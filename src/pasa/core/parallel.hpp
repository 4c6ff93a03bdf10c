// Deterministic parallel loop: items [0, n) dealt round-robin over `threads` std::threads.
// Each item must write only its own outputs, so results never depend on the thread count.
// Before each item the cancel flag (cancel.hpp) is read (one relaxed load): once a cancellation is requested
// no further item starts and the loop throws Cancelled, so every caller (attention, generation, attribution)
// stops within one item, not at its next golden or its end.
#pragma once

#include <algorithm>
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
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < t; ++w)
    pool.emplace_back([&, w] {
      try {
        for (std::size_t i = w; i < n; i += t) {  // interleaved: balances uneven items (causal rows)
          check_cancel();
          f(i);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace pasa
