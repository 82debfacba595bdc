// Element-wise loops over whole arrays, checked by ASan and TSan as ranges.
//
// Under a sanitizer (scripts/sanitize.sh runs the tests under ASan+UBSan and TSan) every
// float a loop touches is one call into the runtime: the optimizers' updates were about 40%
// of the training tests' time under TSan (an __tsan_read4 or __tsan_write4 per access). A
// function marked BRAID_RANGE_CHECKED is compiled without ASan's and TSan's per-access checks
// (UBSan's stay) and says what it reads and writes instead, before its loop: readRange and
// writeRange check a whole range as the sanitizers check memcpy's (ASan: every byte is
// addressable, else the usual report; TSan: the range races with no other thread's access).
// What is not checked then: an access of the loop outside the ranges it names, so a marked
// function indexes only [0, n) of each, and the scalars it reads (an optimizer's learning
// rate, its step count) are unchecked too. Without a sanitizer these are nothing.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define BRAID_RANGES_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define BRAID_RANGES_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRAID_RANGES_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define BRAID_RANGES_TSAN 1
#endif
#endif

#if defined(BRAID_RANGES_ASAN)
// The first byte of a range that may not be accessed (else null), and the runtime's check of
// an access, which reports one at that byte as the compiler's instrumentation would.
extern "C" void* __asan_region_is_poisoned(void* beg, size_t size);
extern "C" void __asan_load1(const void* addr);
extern "C" void __asan_store1(const void* addr);
#define BRAID_RANGE_CHECKED __attribute__((no_sanitize("address")))
#elif defined(BRAID_RANGES_TSAN)
// The runtime's range accesses (what its memcpy interceptor records).
extern "C" void __tsan_read_range(const void* addr, unsigned long size);
extern "C" void __tsan_write_range(const void* addr, unsigned long size);
#define BRAID_RANGE_CHECKED __attribute__((no_sanitize("thread")))
#else
#define BRAID_RANGE_CHECKED
#endif

namespace braid::training {

/// Checks a read of x[0, n) by the calling thread (a no-op without ASan or TSan).
template <class T>
inline void readRange(const T* x, size_t n) {
#if defined(BRAID_RANGES_ASAN)
  if (const void* bad = __asan_region_is_poisoned(const_cast<T*>(x), n * sizeof(T)))
    __asan_load1(bad);
#elif defined(BRAID_RANGES_TSAN)
  if (n > 0) __tsan_read_range(x, n * sizeof(T));
#else
  (void)x, (void)n;
#endif
}

/// Checks a write (or read and write) of x[0, n) by the calling thread.
template <class T>
inline void writeRange(T* x, size_t n) {
#if defined(BRAID_RANGES_ASAN)
  if (const void* bad = __asan_region_is_poisoned(x, n * sizeof(T))) __asan_store1(bad);
#elif defined(BRAID_RANGES_TSAN)
  if (n > 0) __tsan_write_range(x, n * sizeof(T));
#else
  (void)x, (void)n;
#endif
}

}  // namespace braid::training
