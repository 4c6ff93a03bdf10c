// The library's error convention: which exception class means what, and the exit code an app gives it.
//
//   InputError (here)             the user's mistake: a bad name, value, shape, JSON key, file or folder.
//                                 The message names what was wrong and where (file, JSON path, value), so
//                                 the user can fix it without reading code. Every function that reads what a
//                                 user wrote (names, JSON, .npy, CSV, the command line) throws this.
//   std::invalid_argument,        a broken precondition: the calling code passed what the callee's header
//   std::domain_error             excludes (round_span with spans of different sizes, encode of a value the
//                                 format cannot hold). A bug in the caller, never the user's: user input is
//                                 checked, and reported as InputError, before it reaches such a function.
//   std::logic_error (others)     a bug inside the library: one of its own invariants broke.
//
// Apps catch at main() through report_error(): an InputError prints "<app>: error: <what>" and exits 2;
// a std::filesystem::filesystem_error (a path that cannot be created or written) is reported the same way;
// std::bad_alloc (memory ran out although the size-first check passed: its estimate was low, or other
// processes took the memory meanwhile) prints "<app>: error: out of memory: ..." and exits 4; anything else
// prints "<app>: internal error: <what>" and exits 3. Command-line syntax errors are reported by CLI11
// before that, exiting 2 too (pasa_apps::parse_failure in apps/library_names.hpp). docs/robustness.md lists
// the codes.
#pragma once

#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>

namespace pasa {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitInputError = 2;     // InputError: the user can fix the input
inline constexpr int kExitInternalError = 3;  // anything else: a bug to report
inline constexpr int kExitOutOfMemory = 4;    // std::bad_alloc: the run needed more memory than it got

// Call inside `catch (...)` in an app's main(): prints the current exception as described above and returns
// the exit code for it.
inline int report_error(const char* app) {
  try {
    throw;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", app, e.what());
    return kExitInputError;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be created, read or written: their environment, not a bug.
    std::fprintf(stderr, "%s: error: %s\n", app, e.what());
    return kExitInputError;
  } catch (const std::bad_alloc&) {
    // Not a bug in the sense of exit 3: the machine had less memory than the run needed. The size check
    // that runs first (--max-memory, default MemAvailable) let it through, so say how to make it refuse.
    std::fprintf(stderr,
                 "%s: error: out of memory: the run needed more memory than was available (an allocation "
                 "failed after the size check passed). Make the problem smaller or use fewer threads; where the "
                 "program takes --max-memory, a limit below what is free refuses such a run before it starts\n",
                 app);
    return kExitOutOfMemory;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", app, e.what());
    return kExitInternalError;
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: unknown exception\n", app);
    return kExitInternalError;
  }
}

}  // namespace pasa
