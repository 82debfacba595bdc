// How big the largest test cases are. Under a sanitizer (ASan+UBSan, TSan: scripts/sanitize.sh
// runs the whole suite so) or with BRAID_TEST_REDUCED=1, the tests that spend minutes on
// large vectors or rank counts shrink those cases (the matrix also takes fewer rows under a
// sanitizer: tests/core/meson.build says which).
#pragma once

#include <cstdlib>
#include <cstring>

namespace braid::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BRAID_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(undefined_behavior_sanitizer)
#define BRAID_TEST_SANITIZED 1
#endif
#endif

inline bool reducedSizes() {
#ifdef BRAID_TEST_SANITIZED
  return true;
#else
  const char* v = std::getenv("BRAID_TEST_REDUCED");
  return v && std::strcmp(v, "1") == 0;
#endif
}

}  // namespace braid::test
