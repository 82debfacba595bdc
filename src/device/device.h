// Device memory as the core sees it: which buffers live on a CUDA device, and the copies
// that stage them through host memory. The CUDA runtime backs it in a CUDA build; a build
// without CUDA (or a machine without a device) has only host memory. Tests may install a
// stand-in runtime whose "device" memory is host memory it keeps track of, so the staging
// paths run on machines without a GPU.
#ifndef BRAID_DEVICE_DEVICE_H_
#define BRAID_DEVICE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/braid.h"

namespace braid::device {

// A CUDA IPC reference to device memory (the CUDA IPC transport, DESIGN.md, Transports): the
// exporting process's cudaIpcMemHandle_t of the allocation that holds a buffer, that
// allocation's size and the buffer's offset in it. Another process of the same host opens the
// handle once (Runtime::ipcOpen) and reads the buffer at base + offset. Fits a FIFO cell's
// payload, where an in-place device piece carries it.
struct IpcRef {
  unsigned char handle[64];  // cudaIpcMemHandle_t, opaque
  uint64_t allocBytes;
  uint64_t offset;
};

struct Runtime {
  // The calling thread's current CUDA device, or -1 with *why (if not NULL) saying why none.
  int (*currentDevice)(std::string* why);
  // True if ptr points into device memory (managed memory counts as host: the CPU reads it).
  bool (*isDevice)(const void* ptr);
  // Each sets the thread's error message (braid::fail) and returns its code on failure.
  braidResult_t (*alloc)(void** ptr, size_t bytes);
  braidResult_t (*free)(void* ptr);
  // Waits for all work on the current device, then copies (toHost: device -> host memory).
  braidResult_t (*toHost)(void* dst, const void* src, size_t bytes);
  // Copies host -> device memory and waits until the device holds it.
  braidResult_t (*toDevice)(void* dst, const void* src, size_t bytes);

  // Stream-ordered calls (issue 10; DESIGN.md, Streams). `stream` is the caller's
  // cudaStream_t. A call enqueued on it runs on a proxy thread once the stream reaches it, and
  // the stream goes on once the call is done:
  //   hostFunc(stream, hand the call to the proxy)   cudaLaunchHostFunc: returns at once
  //   waitValue(stream, flag, 1)                     cuStreamWaitValue32 (EQ)
  //   writeValue(stream, flag, 0)                    cuStreamWriteValue32: ready for the next
  // The proxy sets *flag to 1 when the call has finished, failed or not. Every step can be
  // captured into a CUDA graph; each replay hands the call over again.
  braidResult_t (*hostFunc)(void* stream, void (*fn)(void*), void* arg);
  braidResult_t (*waitValue)(void* stream, uint32_t* flag, uint32_t value);
  braidResult_t (*writeValue)(void* stream, uint32_t* flag, uint32_t value);
  // n host words the device reads and writes (pinned and mapped), initially 0.
  braidResult_t (*allocFlags)(uint32_t** flags, size_t n);
  braidResult_t (*freeFlags)(uint32_t* flags);
  // True while `stream` is being captured into a graph (its work is recorded, not run).
  bool (*isCapturing)(void* stream);
  // Waits for the work queued on `stream`.
  braidResult_t (*streamSynchronize)(void* stream);
  // Copies between device and host memory on a stream of the calling thread's own that waits
  // for no other stream, and waits for that copy alone. The proxy stages with it: its
  // caller's stream has already run up to the call, and is blocked in waitValue, so the
  // synchronous copies above (which wait for the whole device) would never return.
  braidResult_t (*copyOnOwnStream)(void* dst, const void* src, size_t bytes);
  // Makes `device` the calling thread's current device (a proxy takes its stream's).
  braidResult_t (*setDevice)(int device);

  // The device path (a communicator whose ranks all share one host and each have a device:
  // braidComm::deviceDirect). Each runs on the calling thread's own stream, like
  // copyOnOwnStream, and returns once the device has finished it.
  // Waits for all work queued on the current device (a synchronous call starts with it, so
  // it sees what the caller's kernels wrote).
  braidResult_t (*deviceSynchronize)();
  // cuda::reduce and cuda::divide (kernels/cuda_kernels.h). Operands are device memory, or
  // memory the device maps (ipcOpen's).
  braidResult_t (*deviceReduce)(void* dst, const void* a, const void* b, size_t count,
                                braidDataType_t dtype, braidRedOp_t op, int divisor);
  braidResult_t (*deviceDivide)(void* dst, const void* src, size_t count, braidDataType_t dtype,
                                int divisor);
  // The IPC reference of device memory [ptr, ptr + bytes): the cudaIpcGetMemHandle of the
  // allocation that holds it (cuMemGetAddressRange). False, with *why, for memory that cannot
  // be exported: not from cudaMalloc (a cuMem VMM or stream-ordered pool), or not device
  // memory at all; the sender then copies the piece through host memory instead. A question,
  // not a failure: it records no error.
  bool (*ipcExport)(const void* ptr, size_t bytes, IpcRef* ref, std::string* why);
  // Maps another process's exported allocation into this one (cudaIpcOpenMemHandle, peer
  // access enabled lazily): *base is its start here. Opening a handle that is open already in
  // this process returns the same base and counts a reference; ipcClose drops one. A handle
  // of this very process is refused (CUDA's rule; threads use the pointer itself).
  braidResult_t (*ipcOpen)(const IpcRef& ref, char** base);
  braidResult_t (*ipcClose)(char* base);
  // The current device's PCI bus id ("0000:3b:00.0"), by which another rank of the host
  // names it (cudaDeviceGetPCIBusId).
  braidResult_t (*busId)(std::string* id);
  // Whether kernels on the current device can read the memory of the device with bus id
  // `busId`: the same device, or another with peer access, which this enables
  // (cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess). *why says which, or why not.
  bool (*reachPeer)(const std::string& busId, std::string* why);
  // True when no pointer of this process can be device memory (no CUDA device, or a build
  // without CUDA), so that a host call skips isDevice on each buffer; null (a test's
  // stand-in): ask isDevice.
  bool (*deviceless)() = nullptr;
};

// The runtime in use: a test's stand-in when one is set, else CUDA's (or the host-only one).
const Runtime& runtime();
// The copies the core stages device buffers with: Runtime::toHost/toDevice, or, on a proxy
// thread running a call for a CUDA stream (inside a ProxyScope), copyOnOwnStream.
braidResult_t stageToHost(void* dst, const void* src, size_t bytes);
braidResult_t stageToDevice(void* dst, const void* src, size_t bytes);

// Marks the calling thread as a CUDA stream's proxy while it lives, staging on `device` (if
// >= 0: made the thread's current device; a thread may drive several GPUs).
class ProxyScope {
 public:
  explicit ProxyScope(int device);
  ~ProxyScope();
  ProxyScope(const ProxyScope&) = delete;
  ProxyScope& operator=(const ProxyScope&) = delete;
};

// The calling thread's ProxyScope device (-1: none given), or kNotProxy outside one.
constexpr int kNotProxy = -2;
int proxyDevice();

// Tests: makes r the runtime until called again with nullptr. Not thread safe against calls
// in flight; set it before making communicators.
void setRuntimeForTesting(const Runtime* r);

}  // namespace braid::device

#endif  // BRAID_DEVICE_DEVICE_H_
