// Deterministic parallel loop: items [0, n) dealt to `threads` std::threads, each taking the next item from
// a shared counter as it becomes free (dynamic dealing: a thread slowed by another process or given longer
// items, e.g. causal rows, holds up nobody). Each item must write only its own outputs (and draw from its
// own random stream), so results never depend on the thread count or on which thread ran an item.
// Before each item the cancel flag (cancel.hpp) is read (one relaxed load): once a cancellation is requested
// no further item starts and the loop throws Cancelled, so every caller (attention, generation, attribution)
// stops within one item, not at its next golden or its end.
//
// Loops may also be lent helpers (LoopHelpers): threads of a sweep that have no problem left join the loops
// that the sweep's other problems are running, so that the last problems of a sweep finish on every core
// instead of on one each. A helper runs items exactly as the loop's own threads do (the same counter), so
// this changes which thread runs an item, never a result.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "pasa/core/cancel.hpp"

namespace pasa {

inline int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

namespace detail {

// One running parallel_for: its items, the shared counter, and the first error of any thread running it.
struct OpenLoop {
  std::size_t n = 0;
  void (*call)(void*, std::size_t) = nullptr;  // call(f, i) runs item i of the loop's function f
  void* f = nullptr;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::exception_ptr error;
  int helpers = 0;  // helpers inside work() now (guarded by their LoopHelpers' mutex)

  std::size_t left() const {
    const std::size_t i = next.load(std::memory_order_relaxed);
    return failed.load(std::memory_order_relaxed) || i >= n ? 0 : n - i;
  }
  // Runs items until none is left or one failed; an exception is kept for the loop's caller.
  void work() {
    try {
      for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
        check_cancel();
        call(f, i);
      }
    } catch (...) {
      failed = true;  // the others stop after their current item
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  }
};

}  // namespace detail

// Spare threads lent to the loops of a group of threads (a sweep's workers, or the workers of the sweeps that
// share one set of slots). A worker is a Member while it runs problems: every parallel_for it calls is open
// to helpers until it returns. A worker with nothing left to run calls help(), which joins the open loop with
// the most items left, again and again, until no member is left and no loop is open (so a helper must start
// after the members it is to help: a sweep's workers are members before they take a problem). enter/leave
// bracket each loop a helper joins (the sweep takes a slot there, so that helpers never run more threads
// than it was given).
class LoopHelpers {
 public:
  class Member {
   public:
    explicit Member(LoopHelpers& h) : h_(h), previous_(current()) {
      std::lock_guard<std::mutex> lock(h_.m_);
      ++h_.members_;
      current() = &h_;
    }
    ~Member() {
      current() = previous_;
      std::lock_guard<std::mutex> lock(h_.m_);
      --h_.members_;
      h_.cv_.notify_all();  // the helpers may be done
    }
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

   private:
    LoopHelpers& h_;
    LoopHelpers* previous_;
  };

  void help(const std::function<void()>& enter = {}, const std::function<void()>& leave = {}) {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return busiest() || (members_ == 0 && loops_.empty()); });
      --idle_;
      if (!busiest()) return;
      if (enter) {
        lock.unlock();
        enter();  // may wait (a slot): the loop may be done by then
        lock.lock();
      }
      if (detail::OpenLoop* l = busiest()) {
        ++l->helpers;
        lock.unlock();
        l->work();
        lock.lock();
        if (--l->helpers == 0) cv_.notify_all();  // its caller may be waiting in close()
      }
      if (leave) {
        lock.unlock();
        leave();
        lock.lock();
      }
    }
  }

  // Helpers waiting for a loop to join now.
  int idle() {
    std::lock_guard<std::mutex> lock(m_);
    return idle_;
  }

  // The group whose loops this thread's parallel_for calls are open to (null: none).
  static LoopHelpers*& current() {
    static thread_local LoopHelpers* group = nullptr;
    return group;
  }

  void open(detail::OpenLoop& l) {
    std::lock_guard<std::mutex> lock(m_);
    loops_.push_back(&l);
    cv_.notify_all();
  }
  // No helper joins `l` after this, and none is still inside it when it returns.
  void close(detail::OpenLoop& l) {
    std::unique_lock<std::mutex> lock(m_);
    loops_.erase(std::find(loops_.begin(), loops_.end(), &l));
    cv_.wait(lock, [&] { return l.helpers == 0; });
  }

 private:
  detail::OpenLoop* busiest() const {
    detail::OpenLoop* best = nullptr;
    for (detail::OpenLoop* l : loops_)
      if (l->left() > 0 && (!best || l->left() > best->left())) best = l;
    return best;
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::vector<detail::OpenLoop*> loops_;
  int members_ = 0, idle_ = 0;
};

// The threads a loop opened now by this thread would run on at first: its own and the helpers waiting. For
// work that can be laid out for one thread or for several (compare_outputs), never for results: those must
// not depend on it.
inline int parallel_width(int threads) {
  LoopHelpers* const h = LoopHelpers::current();
  return std::max(1, threads) + (h ? h->idle() : 0);
}

template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
  const std::size_t t = std::min<std::size_t>(std::max(1, threads), n);
  LoopHelpers* const helpers = n > 1 ? LoopHelpers::current() : nullptr;
  if (t <= 1 && !helpers) {
    for (std::size_t i = 0; i < n; ++i) {
      check_cancel();
      f(i);
    }
    return;
  }
  detail::OpenLoop loop;
  loop.n = n;
  loop.f = const_cast<void*>(static_cast<const void*>(&f));
  loop.call = [](void* g, std::size_t i) { (*static_cast<std::remove_reference_t<F>*>(g))(i); };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  // A thread that cannot be started (pthread_create's EAGAIN: no memory for its stack, a process limit) ends
  // the pool where it is: the loop runs on the threads it has, with the same results (they never depend on
  // the thread count). Throwing here instead would destroy the running threads unjoined: std::terminate,
  // exit 134 under `ulimit -v` at 16 threads (tests/cli/run_cli_checks.sh).
  for (std::size_t w = 1; w < t; ++w) {
    try {
      pool.emplace_back([&] { loop.work(); });
    } catch (...) {
      break;
    }
  }
  if (helpers) helpers->open(loop);
  loop.work();  // the calling thread is one of the t workers
  if (helpers) helpers->close(loop);
  for (auto& th : pool) th.join();
  if (loop.error) std::rethrow_exception(loop.error);
}

}  // namespace pasa
