#include "pasa/numeric/mpfr_thread.hpp"

#include <mpfr.h>

namespace pasa {

namespace {
struct MpfrCacheFreer {
  // MPFR's caches are plain __thread variables (no destructors of their own): still there while the thread's
  // thread_local objects are destroyed.
  ~MpfrCacheFreer() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
};
}  // namespace

void free_mpfr_caches_at_thread_exit() {
  thread_local MpfrCacheFreer freer;  // constructed by the thread's first call, destroyed when the thread ends
  (void)freer;
}

}  // namespace pasa
