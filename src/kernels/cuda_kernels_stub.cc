// kernels/cuda_kernels.h in a build without CUDA: every call fails with kNotBuilt, so callers
// need no #if and their messages say why.
#include "kernels/cuda_kernels.h"

namespace braid::cuda {

namespace {
constexpr const char* kNotBuiltMessage = "Braid built without CUDA";
}  // namespace

bool built() { return false; }

int deviceCount(std::string* why) {
  if (why) *why = kNotBuiltMessage;
  return 0;
}

int reduce(void*, const void*, const void*, size_t, braidDataType_t, braidRedOp_t, void*, int) {
  return kNotBuilt;
}

int divide(void*, const void*, size_t, braidDataType_t, int, void*) { return kNotBuilt; }

int scale(void*, size_t, braidDataType_t, double, void*) { return kNotBuilt; }

int copy(void*, const void*, size_t, void*) { return kNotBuilt; }

const char* errorString(int err) {
  if (err == kSuccess) return "no error";
  if (err == kInvalidValue) return "invalid argument";
  return kNotBuiltMessage;
}

}  // namespace braid::cuda
