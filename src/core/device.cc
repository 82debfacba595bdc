// The CUDA runtime behind device::Runtime (BRAID_HAVE_CUDA), or a host-only one.
#include "core/device.h"

#include <atomic>
#include <mutex>

#include "core/error.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace braid::device {
namespace {

#if BRAID_HAVE_CUDA
// Whether this process has a usable device, asked once: a machine without a driver or device
// then pays nothing per call (no cudaPointerGetAttributes on the fast path).
bool haveDevice(std::string* why) {
  // -1: not asked yet; else the device count. A plain acquire load on the fast path
  // (std::call_once goes through a thread-local of libstdc++'s on every call).
  static std::atomic<int> known{-1};
  static std::mutex mu;
  static std::string reason;
  int count = known.load(std::memory_order_acquire);
  if (count < 0) {
    std::lock_guard<std::mutex> lock(mu);
    count = known.load(std::memory_order_relaxed);
    if (count < 0) {
      cudaError_t e = cudaGetDeviceCount(&count);
      if (e != cudaSuccess) {
        count = 0;
        reason = std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
        cudaGetLastError();  // clear the sticky error for the caller's own CUDA calls
      } else if (count == 0) {
        reason = "no CUDA device (cudaGetDeviceCount found 0)";
      }
      known.store(count, std::memory_order_release);
    }
  }
  if (why && count == 0) *why = reason;
  return count > 0;
}

int cudaCurrentDevice(std::string* why) {
  if (!haveDevice(why)) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    if (why) *why = "cudaGetDevice failed";
    return -1;
  }
  return dev;
}

bool cudaIsDevice(const void* ptr) {
  if (!ptr || !haveDevice(nullptr)) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

braidResult_t cudaFailed(const char* what, cudaError_t e, size_t bytes) {
  return fail(braidUnhandledCudaError, "%s (%zu bytes): %s", what, bytes, cudaGetErrorString(e));
}

braidResult_t cudaAlloc(void** ptr, size_t bytes) {
  std::string why;
  if (!haveDevice(&why)) return fail(braidUnhandledCudaError, "braidMemAlloc: %s", why.c_str());
  cudaError_t e = cudaMalloc(ptr, bytes);
  return e == cudaSuccess ? braidSuccess : cudaFailed("braidMemAlloc: cudaMalloc", e, bytes);
}

braidResult_t cudaRelease(void* ptr) {
  cudaError_t e = cudaFree(ptr);
  return e == cudaSuccess ? braidSuccess : cudaFailed("braidMemFree: cudaFree", e, 0);
}

braidResult_t cudaToHost(void* dst, const void* src, size_t bytes) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? braidSuccess : cudaFailed("staging device buffer to host", e, bytes);
}

braidResult_t cudaToDevice(void* dst, const void* src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return e == cudaSuccess ? braidSuccess : cudaFailed("staging result to device buffer", e, bytes);
}

const Runtime kRuntime{cudaCurrentDevice, cudaIsDevice, cudaAlloc,
                       cudaRelease,       cudaToHost,   cudaToDevice};
#else
int hostCurrentDevice(std::string* why) {
  if (why) *why = "Braid built without CUDA (meson -Dcuda=enabled needs nvcc)";
  return -1;
}
bool hostIsDevice(const void*) { return false; }
braidResult_t hostAlloc(void**, size_t) {
  return fail(braidUnhandledCudaError,
              "braidMemAlloc: no CUDA device: Braid built without CUDA (meson -Dcuda=enabled "
              "needs nvcc); host buffers need no allocator of Braid's");
}
braidResult_t hostRelease(void*) {
  return fail(braidUnhandledCudaError, "braidMemFree: Braid built without CUDA");
}
braidResult_t hostCopy(void*, const void*, size_t) {
  return fail(braidInternalError, "device copy in a build without CUDA");
}
const Runtime kRuntime{hostCurrentDevice, hostIsDevice, hostAlloc, hostRelease, hostCopy, hostCopy};
#endif

std::atomic<const Runtime*> g_testRuntime{nullptr};

}  // namespace

const Runtime& runtime() {
  const Runtime* r = g_testRuntime.load(std::memory_order_acquire);
  return r ? *r : kRuntime;
}

void setRuntimeForTesting(const Runtime* r) { g_testRuntime.store(r, std::memory_order_release); }

}  // namespace braid::device
