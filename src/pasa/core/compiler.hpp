// Compiler hints spelled once for GCC and clang.
#pragma once

// The loop that follows has no dependence between iterations through memory (its stores never alias its
// loads), so the compiler may vectorise it even where it cannot prove that itself.
#if defined(__clang__)
// clang's counterpart (vectorize(assume_safety)) turns a loop it cannot vectorise (as at -O1) into a
// warning; clang versions its loops with run-time alias checks by itself.
#define PASA_IVDEP
#else
#define PASA_IVDEP _Pragma("GCC ivdep")
#endif
