// A C++ program written for NCCL 2.30, built against Braid's nccl.h where CUDA's headers are
// on the include path (a CUDA build): it takes `half` and `__nv_bfloat16` (and, with CUDA
// 11.8+, `__nv_fp8_e4m3`) from nccl.h alone, as code written for NCCL does, and all-reduces
// them on host ranks through libnccl.so.2: exact sums (small integers), checked.
#include <nccl.h>

#include <cstdio>
#include <vector>

#ifndef BRAID_NCCL_CUDA_HEADERS
#error "nccl.h did not include CUDA's headers, though they are on the include path"
#endif

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s (%s)\n", what, ncclGetLastError(nullptr));
    ++failures;
  }
}

// Rank r's element i as T: small integers, exact in every type here.
template <typename T, typename FromFloat, typename ToFloat>
void allReduce(ncclComm_t* comms, int n, ncclDataType_t type, FromFloat from, ToFloat to,
               const char* name) {
  const int count = 64;
  std::vector<std::vector<T>> send(n, std::vector<T>(count)), recv(send);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < count; ++i) send[r][i] = from(static_cast<float>(r + i % 5));
  check(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
  for (int r = 0; r < n; ++r)
    check(ncclAllReduce(send[r].data(), recv[r].data(), count, type, ncclSum, comms[r],
                        cudaStream_t{}) == ncclSuccess,
          name);
  check(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < count; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(q + i % 5);
      if (to(recv[r][i]) != want) {
        std::fprintf(stderr, "FAIL: %s rank %d [%d] = %g, expected %g\n", name, r, i,
                     static_cast<double>(to(recv[r][i])), static_cast<double>(want));
        ++failures;
        return;
      }
    }
}

}  // namespace

int main() {
  const int n = 3;
  ncclComm_t comms[n];
  if (ncclCommInitAll(comms, n, nullptr) != ncclSuccess) {
    std::fprintf(stderr, "FAIL: ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  allReduce<half>(
      comms, n, ncclHalf, [](float f) { return __float2half(f); },
      [](half h) { return __half2float(h); }, "half");
  allReduce<__nv_bfloat16>(
      comms, n, ncclBfloat16, [](float f) { return __float2bfloat16(f); },
      [](__nv_bfloat16 b) { return __bfloat162float(b); }, "__nv_bfloat16");
#if CUDART_VERSION >= 11080
  allReduce<__nv_fp8_e4m3>(
      comms, n, ncclFloat8e4m3, [](float f) { return __nv_fp8_e4m3(f); },
      [](__nv_fp8_e4m3 v) { return static_cast<float>(v); }, "__nv_fp8_e4m3");
#endif
  for (ncclComm_t c : comms) check(ncclCommDestroy(c) == ncclSuccess, "ncclCommDestroy");
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
