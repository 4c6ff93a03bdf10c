// PASA_ASSERT(condition): a precondition or invariant of a kernel, checked in Debug and sanitizer builds and
// compiled out (the condition not even evaluated) in Release, so that the checks cost nothing where results
// are produced and timed, and the outputs of a Release build do not depend on them.
//
// Active when PASA_ASSERTS is defined to 1, or, where it is not defined, in a build without NDEBUG (CMake's
// Debug) and in one with AddressSanitizer or UndefinedBehaviorSanitizer (-DPASA_SANITIZE=ON, the fuzz
// build), whatever its build type. -DPASA_ASSERTS=0 turns them off everywhere.
//
// A failed check is a bug in the library (core/error.hpp): it throws std::logic_error naming the file, the
// line and the condition, which an app reports as an internal error (exit 3) and parallel_for carries to its
// caller.
#pragma once

#include <stdexcept>
#include <string>

#ifndef PASA_ASSERTS
#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__)
#define PASA_ASSERTS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define PASA_ASSERTS 1
#endif
#endif
#endif
#ifndef PASA_ASSERTS
#define PASA_ASSERTS 0
#endif

namespace pasa::detail {

[[noreturn]] inline void assert_failed(const char* condition, const char* file, int line) {
  throw std::logic_error(std::string(file) + ":" + std::to_string(line) + ": PASA_ASSERT(" + condition + ") failed");
}

}  // namespace pasa::detail

#if PASA_ASSERTS
#define PASA_ASSERT(...) \
  ((__VA_ARGS__) ? static_cast<void>(0) : ::pasa::detail::assert_failed(#__VA_ARGS__, __FILE__, __LINE__))
#else
// sizeof: the condition still compiles (names stay checked) but is never evaluated.
#define PASA_ASSERT(...) static_cast<void>(sizeof((__VA_ARGS__) ? 1 : 0))
#endif
