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
#include <unistd.h>

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

// Blocks of 32 MiB and more freed by uninit_vector (default_init_allocator, below) while a KeepBigBlocks is
// alive, kept for the next allocation of the same size. glibc maps each such block afresh and unmaps it on
// free (its mmap threshold cannot exceed 32 MiB), so every large run_attention call of a benchmark or a
// sweep faulted its output and its Q/K/V copies in again, page by page: on the development VM 12-16 % of a
// FlashAttention call's CPU time at (1, 64, 2048, 128) was the kernel's. A block is handed out again only for
// the same size (the next call of the same shapes); an allocation of a size not kept hands every kept block
// back first (the shapes changed), and at most an eighth of the machine's memory is kept. Only processes that
// run many calls keep blocks (the benchmarks, sweeps): a one-shot run gains nothing, and blocks held while
// memory the allocator does not see grows would raise its peak above the memory estimate. What is kept counts
// as available for check_memory. Off under AddressSanitizer, which must see every free.
namespace detail {
class BigBlocks {
 public:
  static constexpr std::size_t kMin = std::size_t{32} << 20;

  static BigBlocks& instance() {
    static BigBlocks* const b = new BigBlocks;  // never destroyed: vectors may be freed during exit
    return *b;
  }
  static constexpr bool enabled() {
#if defined(__SANITIZE_ADDRESS__)
    return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return false;
#else
    return true;
#endif
#else
    return true;
#endif
  }
  // A kept block of exactly `bytes`, or nullptr after handing every kept block back.
  void* take(std::size_t bytes) {
    std::vector<Block> drop;
    {
      std::lock_guard<std::mutex> lock(m_);
      for (auto it = kept_.begin(); it != kept_.end(); ++it)
        if (it->bytes == bytes) {
          void* const p = it->p;
          kept_bytes_ -= bytes;
          kept_.erase(it);
          return p;
        }
      drop.swap(kept_);
      kept_bytes_ = 0;
    }
    for (const Block& b : drop) ::operator delete(b.p);
    return nullptr;
  }
  // Keeps p (from ::operator new(bytes)) while a KeepBigBlocks is alive, unless that would exceed the cap;
  // false: the caller frees it.
  bool give(void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(m_);
    if (scopes_ == 0 || bytes > cap_ || kept_bytes_ > cap_ - bytes) return false;
    try {
      kept_.push_back({p, bytes});
    } catch (const std::bad_alloc&) {
      return false;
    }
    kept_bytes_ += bytes;
    return true;
  }
  std::size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(m_);
    return kept_bytes_;
  }
  // Hands every kept block back to the C library (and so to the kernel).
  void release() { (void)take(0); }
  void enter() {
    std::lock_guard<std::mutex> lock(m_);
    ++scopes_;
  }
  void leave() {
    bool last;
    {
      std::lock_guard<std::mutex> lock(m_);
      last = --scopes_ == 0;
    }
    if (last) release();
  }

 private:
  BigBlocks() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    cap_ = pages > 0 && page > 0 ? sat_mul(static_cast<std::size_t>(pages), static_cast<std::size_t>(page)) / 8 : 0;
  }
  struct Block {
    void* p;
    std::size_t bytes;
  };
  std::mutex m_;
  std::vector<Block> kept_;
  std::size_t kept_bytes_ = 0;
  std::size_t cap_ = 0;
  int scopes_ = 0;
};
}  // namespace detail

// While one is alive (they nest), big blocks freed are kept for reuse (detail::BigBlocks); the last one to
// go hands them back.
class KeepBigBlocks {
 public:
  KeepBigBlocks() { detail::BigBlocks::instance().enter(); }
  ~KeepBigBlocks() { detail::BigBlocks::instance().leave(); }
  KeepBigBlocks(const KeepBigBlocks&) = delete;
  KeepBigBlocks& operator=(const KeepBigBlocks&) = delete;
};

// The memory a run may use: `limit` when given (nonzero), else what the machine has available.
// Throws InputError "<what> needs about <need> of memory (<detail>); <available> available ..." when the
// estimate exceeds it.
inline void check_memory(std::size_t need, std::size_t limit, const std::string& what, const std::string& detail) {
  const bool given = limit != 0;
  const std::size_t have =
      given ? limit : sat_add(available_memory_bytes(), detail::BigBlocks::instance().kept_bytes());
  if (need <= have) return;
  throw InputError(fmt::format("{} needs {} of memory ({}); {} {}: make the problem smaller{}", what,
                               need == kTooLarge ? bytes_text(need) : "about " + bytes_text(need), detail, bytes_text(have),
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
  // Blocks of detail::BigBlocks::kMin bytes and more come from and go back to the kept big blocks.
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (detail::BigBlocks::enabled() && bytes >= detail::BigBlocks::kMin)
      if (void* p = detail::BigBlocks::instance().take(bytes)) return static_cast<T*>(p);
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (detail::BigBlocks::enabled() && bytes >= detail::BigBlocks::kMin && detail::BigBlocks::instance().give(p, bytes))
      return;
    ::operator delete(p);
  }
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
