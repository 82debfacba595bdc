// A stand-in for the CUDA runtime (device::Runtime), so that device buffers and stream-ordered
// calls run on machines without a GPU. "Device" memory is host memory; a FakeStream is a
// thread that runs its operations in order, as a GPU runs a stream: a host function, a wait
// on a 32-bit word (cuStreamWaitValue32, EQ), a write of one, a copy, or a test's own
// "kernel". A stream can be held (nothing runs until it is released) and captured (its
// operations are recorded into a graph that can be launched any number of times).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/device.h"

namespace braid::test {

class FakeStream {
 public:
  using Op = std::function<void()>;
  FakeStream();
  ~FakeStream();
  FakeStream(const FakeStream&) = delete;
  FakeStream& operator=(const FakeStream&) = delete;

  // Queues op (or records it, while capturing).
  void push(Op op);
  // Waits until every queued operation has run (a held stream must be released first).
  void synchronize();
  // Nothing runs while held.
  void hold();
  void release();
  // Operations pushed between beginCapture and endCapture are recorded, not run.
  void beginCapture();
  std::vector<Op> endCapture();
  bool capturing();
  // Queues a captured graph's operations (cudaGraphLaunch).
  void launch(const std::vector<Op>& graph);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  std::vector<Op> graph_;
  bool capturing_ = false;
  bool held_ = false;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

// The stand-in runtime. everyPointerIsDevice: every buffer counts as device memory (the
// matrix's host vectors then go through the staging paths, or the device path, whose sends to
// another process then go through host memory: only what alloc returned can be exported);
// else only what alloc returned. Its "device" memory is braidMemAllocHost's shared memory,
// which another process maps as it would open a CUDA IPC handle.
const device::Runtime& fakeCudaRuntime(bool everyPointerIsDevice);

// The stand-in has this many devices; each thread's current device starts at 0 (setDevice
// changes it, as cudaSetDevice does).
constexpr int kFakeDevices = 2;

// The stream that a NULL cudaStream_t names on `device` (its legacy default stream).
FakeStream& fakeLegacyStream(int device = 0);

// Counters and switches of the stand-in.
struct FakeCudaStats {
  std::atomic<uint64_t> syncCopies{0};   // toHost/toDevice (wait for the whole device)
  std::atomic<uint64_t> proxyCopies{0};  // copyOnOwnStream (the proxy's, and the device path's)
  // The device path (the CUDA IPC transport): cudaDeviceSynchronize, kernels run,
  // cudaIpcGetMemHandle, cudaIpcOpenMemHandle and cudaIpcCloseMemHandle.
  std::atomic<uint64_t> deviceSyncs{0};
  std::atomic<uint64_t> deviceReduces{0};
  std::atomic<uint64_t> ipcExports{0};
  std::atomic<uint64_t> ipcOpens{0};
  std::atomic<uint64_t> ipcCloses{0};
  // The next N of each fail (tests of the error paths).
  std::atomic<int> failCopies{0};     // proxy copies
  std::atomic<int> failHostFuncs{0};  // cudaLaunchHostFunc
  std::atomic<int> failWaits{0};      // cuStreamWaitValue32
  std::atomic<int> failOpens{0};      // cudaIpcOpenMemHandle
  // The stand-in's two devices cannot reach each other (cudaDeviceCanAccessPeer says 0).
  std::atomic<bool> noPeerAccess{false};
};
FakeCudaStats& fakeCudaStats();
// Allocations of the stand-in's "device" not freed yet.
size_t fakeLiveAllocations();

// The main of a test binary whose roles (registerChildRole) run on the stand-in runtime: a
// child of runProcesses gets fakeCudaRuntime(false) before it joins its communicator and runs
// its role; otherwise the tests run. In fake_cuda_main.cc.
int fakeCudaTestMain(int argc, char** argv);

}  // namespace braid::test
