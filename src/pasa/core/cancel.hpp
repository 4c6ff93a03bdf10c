// Cooperative cancellation, for an embedding that must stop a long call (Ctrl-C in the Python module): the
// embedder calls request_cancel(); long loops call check_cancel() between units of work (every block of rows
// of the golden, every row and key of its MPFR path), which then throws Cancelled. The exception
// unwinds like any other, so what a call leaves behind is what it leaves on an error (a sweep keeps its
// .partial rows for --resume). The command-line programs never request it: SIGINT ends them.
// The flag is process-wide: a request stops every library call running at that moment.
#pragma once

#include <atomic>
#include <stdexcept>

namespace pasa {

struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};

inline std::atomic<bool>& cancel_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

inline void request_cancel() { cancel_flag().store(true, std::memory_order_relaxed); }
inline void clear_cancel() { cancel_flag().store(false, std::memory_order_relaxed); }
inline bool cancel_requested() { return cancel_flag().load(std::memory_order_relaxed); }
inline void check_cancel() {
  if (cancel_requested()) throw Cancelled();
}

}  // namespace pasa
