// fakeCudaTestMain (fake_cuda.h), apart from the stand-in itself: it needs test_util's
// childMain, which the drop-in's test (linked to libbraid.so alone) does not link.
#include <gtest/gtest.h>

#include <cstring>

#include "fake_cuda.h"
#include "test_util.h"

namespace braid::test {

int fakeCudaTestMain(int argc, char** argv) {
  if (argc > 1 && std::strncmp(argv[1], "--braid-child=", 14) == 0)
    device::setRuntimeForTesting(&fakeCudaRuntime(false));
  const int rc = childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace braid::test
