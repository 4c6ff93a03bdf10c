// Sizes before allocations: overflow-safe byte counts, the memory this machine has available, and the
// check every program makes before it allocates or creates anything ("size first"). A count that
// overflows saturates at kTooLarge, which no machine has, so an absurd shape is refused with the same
// message as a merely too large one instead of wrapping around to a small number.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

inline constexpr std::size_t kTooLarge = std::numeric_limits<std::size_t>::max();

// a·b and a + b, saturating at kTooLarge.
inline std::size_t sat_mul(std::size_t a, std::size_t b) {
  std::size_t r;
  return __builtin_mul_overflow(a, b, &r) ? kTooLarge : r;
}
inline std::size_t sat_add(std::size_t a, std::size_t b) {
  std::size_t r;
  return __builtin_add_overflow(a, b, &r) ? kTooLarge : r;
}
template <class... T>
std::size_t sat_product(std::size_t a, T... rest) {
  std::size_t r = a;
  ((r = sat_mul(r, static_cast<std::size_t>(rest))), ...);
  return r;
}

// "1.50 GiB", "512 KiB", "more than 2^64 bytes".
inline std::string bytes_text(std::size_t n) {
  if (n == kTooLarge) return "more than 2^64 bytes";
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double x = static_cast<double>(n);
  int u = 0;
  while (x >= 1024 && u < 6) x /= 1024, ++u;
  return u == 0 ? fmt::format("{} bytes", n) : fmt::format("{:.2f} {}", x, unit[u]);
}

// MemAvailable of /proc/meminfo (what the kernel can give without swapping), or kTooLarge where unknown.
inline std::size_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return sat_mul(kib, 1024);
  return kTooLarge;
}

// A byte count as a user writes it: "4000000000", "512M", "64G", "1.5T" (binary units, K/M/G/T, optional
// "iB"/"B"). InputError naming `what` otherwise.
inline std::size_t parse_byte_size(const std::string& text, const std::string& what) {
  std::size_t pos = 0;
  double x = -1;
  try {
    x = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string unit = text.substr(pos);
  for (const char* suffix : {"iB", "B"})
    if (unit.size() > 1 && unit.ends_with(suffix)) {
      unit.resize(unit.size() - std::char_traits<char>::length(suffix));
      break;
    }
  double mult = 1;
  if (unit == "K" || unit == "k") mult = 0x1p10;
  else if (unit == "M") mult = 0x1p20;
  else if (unit == "G") mult = 0x1p30;
  else if (unit == "T") mult = 0x1p40;
  else if (!unit.empty()) x = -1;
  if (pos == 0 || !(x >= 0) || x * mult >= 0x1p63)
    throw InputError(fmt::format("{}: \"{}\" is not a byte size (e.g. 8G, 512M, 4000000000)", what, text));
  return static_cast<std::size_t>(x * mult);
}

// The memory a run may use: `limit` when given (nonzero), else what the machine has available.
// Throws InputError "<what> needs about <need> of memory (<detail>); <available> available ..." when the
// estimate exceeds it.
inline void check_memory(std::size_t need, std::size_t limit, const std::string& what, const std::string& detail) {
  const bool given = limit != 0;
  const std::size_t have = given ? limit : available_memory_bytes();
  if (need <= have) return;
  throw InputError(fmt::format("{} needs about {} of memory ({}); {} {}: make the problem smaller{}", what,
                               bytes_text(need), detail, bytes_text(have),
                               given ? "allowed by --max-memory" : "available (MemAvailable in /proc/meminfo)",
                               given ? " or raise --max-memory" : ", or pass --max-memory to override the check"));
}

// Keep freed memory in the process instead of handing it back to the kernel (glibc only; elsewhere a no-op).
// glibc serves blocks above its mmap threshold (128 KiB, raised dynamically up to 32 MiB) with fresh
// mappings and trims the heap top above 128 KiB on free, so every run_attention call of a sweep or a
// benchmark first-touches its buffers again (the output, the rounded and float copies of Q/K/V, the
// transposed keys: about 50 MiB at (1, 16, 1280, 128)), one page fault per 4 KiB page. On the development
// VM a fault costs about 7 µs, a fifth of an emulated FlashAttention's time there; on bare metal about 0.2.
// Blocks up to 32 MiB (glibc's largest threshold) then come from the heap, whose freed pages are reused by
// the next call. The cost: the process keeps its peak heap until it exits, as jemalloc and tcmalloc
// do by default. Called by the attention engines before their first big allocation; idempotent.
inline void keep_freed_memory() {
#if defined(__GLIBC__)
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

// Scratch objects handed from one loop item to the next (a thread takes one, uses it, gives it back): an
// item's buffers keep their pages instead of faulting fresh ones in, and there are never more than the
// threads that ran at once.
template <class T>
class Spares {
 public:
  std::unique_ptr<T> take() {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!free_.empty()) {
        std::unique_ptr<T> t = std::move(free_.back());
        free_.pop_back();
        return t;
      }
    }
    return std::make_unique<T>();
  }
  void give(std::unique_ptr<T> t) {
    std::lock_guard<std::mutex> lock(m_);
    free_.push_back(std::move(t));
  }

 private:
  std::mutex m_;
  std::vector<std::unique_ptr<T>> free_;
};

// An allocator whose value-less construct() default-initialises (leaves floats and doubles unset), so that
// resize() of a buffer that is written in full before it is read does not first fill it with zeros (a
// memset of tens of MiB per attention call, on pages that the writes touch anyway).
template <class T>
struct default_init_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  default_init_allocator() noexcept = default;
  template <class U>
  default_init_allocator(const default_init_allocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using uninit_vector = std::vector<T, default_init_allocator<T>>;
// Element-wise equality of an uninit_vector and a plain vector (found by argument-dependent lookup through
// the allocator), so that a tensor's values compare with a std::vector as they did when they were one.
template <class T>
bool operator==(const uninit_vector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace pasa
