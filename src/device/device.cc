// The CUDA runtime behind device::Runtime (BRAID_HAVE_CUDA), or a host-only one.
#include "device/device.h"

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "kernels/cuda_kernels.h"

#if BRAID_HAVE_CUDA
#include <cuda.h>  // types and flags of the stream memory operations (no libcuda link)
#include <cuda_runtime_api.h>
#endif

namespace braid::device {
namespace {

#if BRAID_HAVE_CUDA
// -1: not asked yet; else the device count. A plain acquire load on the fast path
// (std::call_once goes through a thread-local of libstdc++'s on every call; function-local
// statics add a guard check), then the count.
std::atomic<int> g_deviceCount{-1};
std::mutex g_deviceCountMu;
std::string g_noDeviceReason;

// Whether this process has a usable device, asked once: a machine without a driver or device
// then pays nothing per call (no cudaPointerGetAttributes on the fast path).
bool haveDevice(std::string* why) {
  int count = g_deviceCount.load(std::memory_order_acquire);
  if (count < 0) {
    std::lock_guard<std::mutex> lock(g_deviceCountMu);
    count = g_deviceCount.load(std::memory_order_relaxed);
    if (count < 0) {
      cudaError_t e = cudaGetDeviceCount(&count);
      if (e != cudaSuccess) {
        count = 0;
        g_noDeviceReason =
            std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
        cudaGetLastError();  // clear the sticky error for the caller's own CUDA calls
      } else if (count == 0) {
        g_noDeviceReason = "no CUDA device (cudaGetDeviceCount found 0)";
      }
      g_deviceCount.store(count, std::memory_order_release);
    }
  }
  if (why && count == 0) *why = g_noDeviceReason;
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
  std::string why;
  if (!haveDevice(&why))
    return fail(braidUnhandledCudaError, "braidMemFree(%p): %s: it is not memory of braidMemAlloc",
                ptr, why.c_str());
  cudaError_t e = cudaFree(ptr);
  if (e == cudaSuccess) return braidSuccess;
  cudaGetLastError();
  return fail(braidUnhandledCudaError, "braidMemFree(%p): cudaFree: %s", ptr,
              cudaGetErrorString(e));
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
// runtime is linked statically and libcuda is not linked at all): from CUDA 12 the _v2
// entry points, which graphs can capture (version 12000 asked explicitly from 12.5, the
// toolkit's own before). CUDA 11's cudaGetDriverEntryPoint gives the toolkit's default
// version of each name, which may be the first one. Looked up once: a driver without them
// keeps lacking them.
void* driverEntry(const char* name) {
  void* fn = nullptr;
#if CUDART_VERSION >= 12050
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
#elif CUDART_VERSION >= 12000
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
#else
  if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) return nullptr;
#endif
  return fn;
}

using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

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
  static const auto fn = reinterpret_cast<StreamValueFn>(driverEntry("cuStreamWaitValue32"));
  return streamValue(fn, "cuStreamWaitValue32", CU_STREAM_WAIT_VALUE_EQ, stream, flag, value);
}

braidResult_t cudaWriteValue(void* stream, uint32_t* flag, uint32_t value) {
  static const auto fn = reinterpret_cast<StreamValueFn>(driverEntry("cuStreamWriteValue32"));
  return streamValue(fn, "cuStreamWriteValue32", CU_STREAM_WRITE_VALUE_DEFAULT, stream, flag,
                     value);
}

braidResult_t cudaAllocFlags(uint32_t** flags, size_t n) {
  void* p = nullptr;
  const size_t bytes = n * sizeof(uint32_t);
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) return cudaFailed("cudaHostAlloc of stream flags", e, bytes);
  std::memset(p, 0, bytes);
  *flags = static_cast<uint32_t*>(p);
  return braidSuccess;
}

braidResult_t cudaFreeFlags(uint32_t* flags) {
  cudaError_t e = cudaFreeHost(flags);
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaFreeHost of stream flags", e, 0);
}

// A failed query counts as not capturing; the caller's own pending CUDA error is left alone
// (cudaGetLastError would clear it).
bool cudaCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess)
    return false;
  return status == cudaStreamCaptureStatusActive;
}

braidResult_t cudaSyncStream(void* stream) {
  cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaStreamSynchronize", e, 0);
}

// The calling thread's own streams, one per device, non-blocking (they wait for no other
// stream, the legacy default stream included), destroyed when the thread ends. The thread's
// capture mode is relaxed first, as NCCL's proxy threads do: a graph captured in
// cudaStreamCaptureModeGlobal on another thread would otherwise refuse its synchronizing.
struct OwnStreams {
  std::map<int, cudaStream_t> byDevice;
  bool relaxed = false;
  ~OwnStreams() {
    for (auto& entry : byDevice) cudaStreamDestroy(entry.second);
  }
};

// The calling thread's own stream on its current device, made on first use.
cudaError_t ownStream(cudaStream_t* stream) {
  thread_local OwnStreams own;
  cudaError_t e = cudaSuccess;
  if (!own.relaxed) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    e = cudaThreadExchangeStreamCaptureMode(&mode);
    own.relaxed = e == cudaSuccess;
  }
  int device = 0;
  if (e == cudaSuccess) e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    cudaStream_t& mine = own.byDevice[device];
    if (!mine) e = cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    *stream = mine;
  }
  return e;
}

braidResult_t cudaCopyOnOwnStream(void* dst, const void* src, size_t bytes) {
  cudaStream_t stream = nullptr;
  cudaError_t e = ownStream(&stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  return e == cudaSuccess ? braidSuccess
                          : cudaFailed("copy on the calling thread's own stream", e, bytes);
}

braidResult_t cudaDeviceSync() {
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaDeviceSynchronize", e, 0);
}

// Runs a kernel of cuda_kernels.h on the thread's own stream and waits for it.
template <typename Launch>
braidResult_t onOwnStream(const char* what, size_t count, const Launch& launch) {
  cudaStream_t stream = nullptr;
  cudaError_t e = ownStream(&stream);
  if (e != cudaSuccess) return cudaFailed(what, e, count);
  if (int r = launch(stream); r != cuda::kSuccess)
    return fail(braidUnhandledCudaError, "%s (%zu elements): %s", what, count,
                cuda::errorString(r));
  e = cudaStreamSynchronize(stream);
  return e == cudaSuccess ? braidSuccess : cudaFailed(what, e, count);
}

braidResult_t cudaDevReduce(void* dst, const void* a, const void* b, size_t count,
                            braidDataType_t dtype, braidRedOp_t op, int divisor) {
  return onOwnStream("reduce kernel", count, [&](cudaStream_t s) {
    return cuda::reduce(dst, a, b, count, dtype, op, s, divisor);
  });
}

braidResult_t cudaDevDivide(void* dst, const void* src, size_t count, braidDataType_t dtype,
                            int divisor) {
  return onOwnStream("divide kernel", count, [&](cudaStream_t s) {
    return cuda::divide(dst, src, count, dtype, divisor, s);
  });
}

bool cudaIpcExport(const void* ptr, size_t bytes, IpcRef* ref, std::string* why) {
  using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const auto range = reinterpret_cast<AddressRangeFn>(driverEntry("cuMemGetAddressRange"));
  if (!range) {
    *why = "the CUDA driver does not export cuMemGetAddressRange";
    return false;
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)); r != CUDA_SUCCESS) {
    *why = "cuMemGetAddressRange failed: CUresult " + std::to_string(r);
    return false;
  }
  const size_t offset = reinterpret_cast<uintptr_t>(ptr) - static_cast<uintptr_t>(base);
  if (offset + bytes > size) {
    *why = "the range crosses the end of its allocation";
    return false;
  }
  cudaIpcMemHandle_t handle;
  if (cudaError_t e = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
      e != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(e);
    return false;
  }
  static_assert(sizeof(handle) == sizeof(ref->handle));
  std::memcpy(ref->handle, &handle, sizeof(handle));
  ref->allocBytes = size;
  ref->offset = offset;
  return true;
}

// Handles this process has open, each once (CUDA refuses a second open of one handle in one
// context), with the references ipcOpen handed out.
struct OpenHandles {
  std::mutex mu;
  struct Entry {
    int device;  // handles open per device context
    std::array<unsigned char, 64> handle;
    char* base;
    int refs;
  };
  std::vector<Entry> entries;
};
OpenHandles& openHandles() {
  static OpenHandles* open = new OpenHandles;  // never destroyed: closes may run at exit
  return *open;
}

braidResult_t cudaIpcOpen(const IpcRef& ref, char** base) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return cudaFailed("cudaGetDevice", e, 0);
  OpenHandles& open = openHandles();
  std::lock_guard<std::mutex> lock(open.mu);
  for (OpenHandles::Entry& e : open.entries)
    if (e.device == device && std::memcmp(e.handle.data(), ref.handle, sizeof(ref.handle)) == 0) {
      ++e.refs;
      *base = e.base;
      return braidSuccess;
    }
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, ref.handle, sizeof(handle));
  void* p = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cudaFailed("cudaIpcOpenMemHandle of a peer's buffer", e, ref.allocBytes);
  }
  OpenHandles::Entry entry{device, {}, static_cast<char*>(p), 1};
  std::memcpy(entry.handle.data(), ref.handle, sizeof(ref.handle));
  open.entries.push_back(entry);
  *base = entry.base;
  return braidSuccess;
}

braidResult_t cudaIpcClose(char* base) {
  OpenHandles& open = openHandles();
  std::lock_guard<std::mutex> lock(open.mu);
  for (size_t i = 0; i < open.entries.size(); ++i) {
    if (open.entries[i].base != base) continue;
    if (--open.entries[i].refs > 0) return braidSuccess;
    open.entries.erase(open.entries.begin() + static_cast<long>(i));
    cudaError_t e = cudaIpcCloseMemHandle(base);
    return e == cudaSuccess ? braidSuccess : cudaFailed("cudaIpcCloseMemHandle", e, 0);
  }
  return fail(braidInternalError, "ipcClose of %p, which is not open", static_cast<void*>(base));
}

braidResult_t cudaSelectDevice(int device) {
  cudaError_t e = cudaSetDevice(device);
  return e == cudaSuccess ? braidSuccess : cudaFailed("cudaSetDevice", e, 0);
}

braidResult_t cudaBusId(std::string* id) {
  int device = 0;
  char text[32] = {0};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(text, sizeof(text), device);
  if (e != cudaSuccess) return cudaFailed("cudaDeviceGetPCIBusId", e, 0);
  *id = text;
  return braidSuccess;
}

bool cudaReachPeer(const std::string& busId, std::string* why) {
  int mine = 0, theirs = 0, can = 0;
  if (cudaGetDevice(&mine) != cudaSuccess ||
      cudaDeviceGetByPCIBusId(&theirs, busId.c_str()) != cudaSuccess) {
    cudaGetLastError();
    *why = "its device " + busId + " is not visible to this process";
    return false;
  }
  if (theirs == mine) {
    *why = "the same device";
    return true;
  }
  if (cudaDeviceCanAccessPeer(&can, mine, theirs) != cudaSuccess || !can) {
    cudaGetLastError();
    *why = "no peer access from device " + std::to_string(mine) + " to " + busId;
    return false;
  }
  cudaError_t e = cudaDeviceEnablePeerAccess(theirs, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    e = cudaSuccess;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("cudaDeviceEnablePeerAccess: ") + cudaGetErrorString(e);
    return false;
  }
  *why = "peer access to " + busId;
  return true;
}

const Runtime kRuntime{
    cudaCurrentDevice, cudaIsDevice,        cudaAlloc,        cudaRelease,
    cudaToHost,        cudaToDevice,        cudaHostFunc,     cudaWaitValue,
    cudaWriteValue,    cudaAllocFlags,      cudaFreeFlags,    cudaCapturing,
    cudaSyncStream,    cudaCopyOnOwnStream, cudaSelectDevice, cudaDeviceSync,
    cudaDevReduce,     cudaDevDivide,       cudaIpcExport,    cudaIpcOpen,
    cudaIpcClose,      cudaBusId,           cudaReachPeer,    [] { return !haveDevice(nullptr); }};
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
const Runtime kRuntime{
    hostCurrentDevice,
    hostIsDevice,
    hostAlloc,
    hostRelease,
    hostCopy,
    hostCopy,
    [](void*, void (*)(void*), void*) { return noDevice("cudaLaunchHostFunc"); },
    [](void*, uint32_t*, uint32_t) { return noDevice("cuStreamWaitValue32"); },
    [](void*, uint32_t*, uint32_t) { return noDevice("cuStreamWriteValue32"); },
    [](uint32_t**, size_t) { return noDevice("stream flags"); },
    [](uint32_t*) { return noDevice("stream flags"); },
    [](void*) { return false; },
    [](void*) { return noDevice("cudaStreamSynchronize"); },
    hostCopy,
    [](int) { return noDevice("cudaSetDevice"); },
    [] { return noDevice("cudaDeviceSynchronize"); },
    [](void*, const void*, const void*, size_t, braidDataType_t, braidRedOp_t, int) {
      return noDevice("the reduce kernel");
    },
    [](void*, const void*, size_t, braidDataType_t, int) { return noDevice("the divide kernel"); },
    [](const void*, size_t, IpcRef*, std::string* why) {
      *why = "Braid built without CUDA";
      return false;
    },
    [](const IpcRef&, char**) { return noDevice("cudaIpcOpenMemHandle"); },
    [](char*) { return noDevice("cudaIpcCloseMemHandle"); },
    [](std::string*) { return noDevice("cudaDeviceGetPCIBusId"); },
    [](const std::string&, std::string* why) {
      *why = "Braid built without CUDA";
      return false;
    },
    [] { return true; }};
#endif

std::atomic<const Runtime*> g_testRuntime{nullptr};

}  // namespace

const Runtime& runtime() {
  const Runtime* r = g_testRuntime.load(std::memory_order_acquire);
  return r ? *r : kRuntime;
}

namespace {
thread_local int t_proxyDevice = kNotProxy;
}  // namespace

ProxyScope::ProxyScope(int device) {
  t_proxyDevice = device;
  // A failure shows at the first staging copy, which runs on the wrong device or none.
  if (device >= 0) runtime().setDevice(device);
}
ProxyScope::~ProxyScope() { t_proxyDevice = kNotProxy; }

int proxyDevice() { return t_proxyDevice; }

braidResult_t stageToHost(void* dst, const void* src, size_t bytes) {
  const Runtime& rt = runtime();
  return t_proxyDevice != kNotProxy ? rt.copyOnOwnStream(dst, src, bytes)
                                    : rt.toHost(dst, src, bytes);
}

braidResult_t stageToDevice(void* dst, const void* src, size_t bytes) {
  const Runtime& rt = runtime();
  return t_proxyDevice != kNotProxy ? rt.copyOnOwnStream(dst, src, bytes)
                                    : rt.toDevice(dst, src, bytes);
}

void setRuntimeForTesting(const Runtime* r) { g_testRuntime.store(r, std::memory_order_release); }

}  // namespace braid::device
