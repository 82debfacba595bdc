/* The C tests' checks (nccl_compat_test.c, nccl_230_test.c): CHECK(cond, printf-args) counts a
 * failure and prints where, NCCLCHECK(call) requires ncclSuccess and prints the error string
 * and ncclGetLastError's message. main exits 1 when `failures` is not 0. */
#ifndef BRAID_TESTS_COMPAT_CHECK_H_
#define BRAID_TESTS_COMPAT_CHECK_H_

#include <nccl.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)
#define NCCLCHECK(call)                                                    \
  do {                                                                     \
    ncclResult_t r_ = (call);                                              \
    CHECK(r_ == ncclSuccess, "%s: %s (%s)", #call, ncclGetErrorString(r_), \
          ncclGetLastError(NULL));                                         \
  } while (0)

#endif
