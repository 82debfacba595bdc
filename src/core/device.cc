// The CUDA runtime behind device::Runtime (BRAID_HAVE_CUDA), or a host-only one.
#include "core/device.h"

#include <atomic>
#include <mutex>

#include "core/error.h"

#if BRAID_HAVE_CUDA
#include <cuda.h>  // types and flags of the stream memory operations (no libcuda link)
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

braidResult_t cudaHostFunc(void* stream, void (*fn)(void*), void* arg) {
  cudaError_t e = cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg);
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaLaunchHostFunc", e, 0);
}

// cuStreamWaitValue32 and cuStreamWriteValue32 from the driver the runtime loaded (the
// runtime is linked statically and libcuda is not linked at all). Version 12.0: the _v2
// entry points, which graphs can capture.
using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
StreamValueFn driverEntry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<StreamValueFn>(fn);
}

braidResult_t streamValue(StreamValueFn fn, const char* name, unsigned int flags, void* stream,
                          uint32_t* flag, uint32_t value) {
  if (!fn) return fail(braidUnhandledCudaError, "%s: the CUDA driver does not export it", name);
  void* dev = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dev, flag, 0);
  if (e != cudaSuccess) return cudaFailed("cudaHostGetDevicePointer of a stream flag", e, 4);
  CUresult r = fn(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(dev), value, flags);
  if (r != CUDA_SUCCESS) return fail(braidUnhandledCudaError, "%s failed: CUresult %d", name, r);
  return braidSuccess;
}

braidResult_t cudaWaitValue(void* stream, uint32_t* flag, uint32_t value) {
  static const StreamValueFn fn = driverEntry("cuStreamWaitValue32");
  return streamValue(fn, "cuStreamWaitValue32", CU_STREAM_WAIT_VALUE_EQ, stream, flag, value);
}

braidResult_t cudaWriteValue(void* stream, uint32_t* flag, uint32_t value) {
  static const StreamValueFn fn = driverEntry("cuStreamWriteValue32");
  return streamValue(fn, "cuStreamWriteValue32", CU_STREAM_WRITE_VALUE_DEFAULT, stream, flag,
                     value);
}

braidResult_t cudaAllocFlag(uint32_t** flag) {
  void* p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) return cudaFailed("cudaHostAlloc of a stream flag", e, sizeof(uint32_t));
  *flag = static_cast<uint32_t*>(p);
  **flag = 0;
  return braidSuccess;
}

braidResult_t cudaFreeFlag(uint32_t* flag) {
  cudaError_t e = cudaFreeHost(flag);
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaFreeHost of a stream flag", e, 4);
}

bool cudaCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

braidResult_t cudaSyncStream(void* stream) {
  cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaStreamSynchronize", e, 0);
}

// The calling thread's own stream, non-blocking (it waits for no other stream, the legacy
// default stream included), destroyed when the thread ends.
struct OwnStream {
  cudaStream_t stream = nullptr;
  ~OwnStream() {
    if (stream) cudaStreamDestroy(stream);
  }
};

braidResult_t cudaCopyOnOwnStream(void* dst, const void* src, size_t bytes) {
  thread_local OwnStream own;
  cudaError_t e = cudaSuccess;
  if (!own.stream) e = cudaStreamCreateWithFlags(&own.stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, own.stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(own.stream);
  return e == cudaSuccess ? braidSuccess
                          : cudaFailed("staging copy on the proxy's stream", e, bytes);
}

braidResult_t cudaSelectDevice(int device) {
  cudaError_t e = cudaSetDevice(device);
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaSetDevice", e, 0);
}

const Runtime kRuntime{cudaCurrentDevice, cudaIsDevice,        cudaAlloc,       cudaRelease,
                       cudaToHost,        cudaToDevice,        cudaHostFunc,    cudaWaitValue,
                       cudaWriteValue,    cudaAllocFlag,       cudaFreeFlag,    cudaCapturing,
                       cudaSyncStream,    cudaCopyOnOwnStream, cudaSelectDevice};
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
braidResult_t noDevice(const char* what) {
  return fail(braidUnhandledCudaError, "%s: Braid built without CUDA", what);
}
const Runtime kRuntime{hostCurrentDevice,
                       hostIsDevice,
                       hostAlloc,
                       hostRelease,
                       hostCopy,
                       hostCopy,
                       [](void*, void (*)(void*), void*) { return noDevice("cudaLaunchHostFunc"); },
                       [](void*, uint32_t*, uint32_t) { return noDevice("cuStreamWaitValue32"); },
                       [](void*, uint32_t*, uint32_t) { return noDevice("cuStreamWriteValue32"); },
                       [](uint32_t**) { return noDevice("a stream flag"); },
                       [](uint32_t*) { return noDevice("a stream flag"); },
                       [](void*) { return false; },
                       [](void*) { return noDevice("cudaStreamSynchronize"); },
                       hostCopy,
                       [](int) { return noDevice("cudaSetDevice"); }};
#endif

std::atomic<const Runtime*> g_testRuntime{nullptr};

}  // namespace

const Runtime& runtime() {
  const Runtime* r = g_testRuntime.load(std::memory_order_acquire);
  return r ? *r : kRuntime;
}

namespace {
thread_local bool t_proxy = false;
}  // namespace

ProxyScope::ProxyScope() { t_proxy = true; }
ProxyScope::~ProxyScope() { t_proxy = false; }

braidResult_t stageToHost(void* dst, const void* src, size_t bytes) {
  const Runtime& rt = runtime();
  return t_proxy ? rt.copyOnOwnStream(dst, src, bytes) : rt.toHost(dst, src, bytes);
}

braidResult_t stageToDevice(void* dst, const void* src, size_t bytes) {
  const Runtime& rt = runtime();
  return t_proxy ? rt.copyOnOwnStream(dst, src, bytes) : rt.toDevice(dst, src, bytes);
}

void setRuntimeForTesting(const Runtime* r) { g_testRuntime.store(r, std::memory_order_release); }

}  // namespace braid::device
