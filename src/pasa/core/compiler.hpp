// Compiler hints spelled once for GCC and clang.
#pragma once

// The loop that follows has no dependence between iterations through memory (its stores never alias its
// loads), so the compiler may vectorise it even where it cannot prove that itself.
#if defined(__clang__)
#define PASA_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define PASA_IVDEP _Pragma("GCC ivdep")
#endif
