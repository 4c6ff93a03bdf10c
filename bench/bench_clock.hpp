// Timing helpers shared by the pasa-bench-* programs.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>

namespace pasa::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of the process (user + system, all threads): on a shared machine the wall time also counts
// the other processes' share of the cores, the CPU time does not.
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The load average over the last minute: the goals are for an idle machine, so verdicts name it.
inline double load1() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

}  // namespace pasa::bench
