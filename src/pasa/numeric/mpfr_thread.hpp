// MPFR keeps caches per thread (constants such as log 2 for mpfr_exp, its pool of integers) and frees them only
// when asked (mpfr_free_cache2). parallel_for starts new threads for every call, so each thread that used MPFR
// and ended left its caches behind: a leak that grows with the number of parallel calls (a sweep makes
// thousands; LeakSanitizer reports it). Code that uses MPFR calls this first: the first call in a thread
// arranges that the thread's caches are freed when it ends.
#pragma once

namespace pasa {

void free_mpfr_caches_at_thread_exit();

}  // namespace pasa
