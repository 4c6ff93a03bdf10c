// Timing helpers shared by the pasa-bench-* programs.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

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

// The system (kernel) part of cpu_seconds(): page faults, zeroing fresh pages, munmap. Where it grows with
// the thread count the threads contend in the kernel (page-table and allocator locks), not in our loops.
inline double system_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_stime.tv_usec);
}

// The load average over the last minute: the goals are for an idle machine, so verdicts name it.
inline double load1() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// "1,2,4": the thread counts of a scaling table, each a whole number in [1, 4096]; throws
// std::invalid_argument naming the bad entry.
inline std::vector<int> parse_threads_list(const std::string& text) {
  std::vector<int> list;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::size_t used = 0;
    long v = 0;
    try {
      v = item.empty() || item[0] == '-' || item[0] == '+' ? 0 : std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > 4096)
      throw std::invalid_argument("--threads " + text + ": \"" + item + "\" is not a thread count in [1, 4096] (a list: 1,2,4)");
    list.push_back(static_cast<int>(v));
    if (comma == std::string::npos) return list;
    pos = comma + 1;
  }
}

}  // namespace pasa::bench
