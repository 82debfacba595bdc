#include "fake_cuda.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "base/error.h"
#include "base/host_mem.h"
#include "kernels/reduce.h"

namespace braid::test {

FakeStream::FakeStream() : worker_([this] { run(); }) {}

FakeStream::~FakeStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    held_ = false;
  }
  cv_.notify_all();
  worker_.join();
}

void FakeStream::push(Op op) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capturing_) {
    graph_.push_back(std::move(op));
    return;
  }
  queue_.push_back(std::move(op));
  cv_.notify_all();
}

void FakeStream::launch(const std::vector<Op>& graph) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.insert(queue_.end(), graph.begin(), graph.end());
  cv_.notify_all();
}

void FakeStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void FakeStream::hold() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = true;
}

void FakeStream::release() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  cv_.notify_all();
}

void FakeStream::beginCapture() {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = true;
  graph_.clear();
}

std::vector<FakeStream::Op> FakeStream::endCapture() {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = false;
  return std::move(graph_);
}

bool FakeStream::capturing() {
  std::lock_guard<std::mutex> lock(mu_);
  return capturing_;
}

void FakeStream::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || (!held_ && !queue_.empty()); });
    if (queue_.empty()) return;
    Op op = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    op();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

namespace {

// The calling thread's current device, as CUDA keeps it.
thread_local int t_device = 0;

// NULL names the legacy default stream of the calling thread's device.
FakeStream* fake(void* stream) {
  return stream ? static_cast<FakeStream*>(stream) : &fakeLegacyStream(t_device);
}

// Allocations of the stand-in's "device": start -> bytes.
std::mutex g_allocMu;
std::map<uintptr_t, size_t> g_allocs;

bool tracked(const void* p) {
  if (!p) return false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_allocMu);
  auto it = g_allocs.upper_bound(a);
  if (it == g_allocs.begin()) return false;
  --it;
  return a < it->first + it->second;
}

// Streams blocked in a waitValue now. A synchronous copy waits for the whole device, so on a
// GPU it would never return while a stream waits for the very call that makes the copy.
std::atomic<int> g_waiting{0};

braidResult_t syncCopy(void* dst, const void* src, size_t bytes) {
  if (g_waiting.load() > 0)
    return fail(braidInternalError,
                "fake CUDA: a copy that waits for the whole device while a stream waits for a "
                "call (it would never return on a GPU)");
  std::memcpy(dst, src, bytes);
  fakeCudaStats().syncCopies.fetch_add(1);
  return braidSuccess;
}

// Whether the next operation of a kind set to fail does (counts down *left).
bool takeFailure(std::atomic<int>& left) { return left.load() > 0 && left.fetch_sub(1) > 0; }

braidResult_t proxyCopy(void* dst, const void* src, size_t bytes) {
  FakeCudaStats& st = fakeCudaStats();
  if (takeFailure(st.failCopies))
    return fail(braidUnhandledCudaError, "fake CUDA: copy of %zu bytes failed (test)", bytes);
  std::memcpy(dst, src, bytes);
  st.proxyCopies.fetch_add(1);
  return braidSuccess;
}

// The stand-in's cudaIpcMemHandle_t: where another process finds the allocation's memfd.
struct FakeHandle {
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t ino;
  uint64_t id;
};
constexpr uint64_t kHandleMagic = 0x6370694b61466263ull;
static_assert(sizeof(FakeHandle) <= sizeof(device::IpcRef::handle));

bool ipcExport(const void* ptr, size_t bytes, device::IpcRef* ref, std::string* why) {
  hostmem::Ref mem;
  if (!tracked(ptr) || !hostmem::find(ptr, bytes, &mem)) {
    *why = "fake CUDA: cudaIpcGetMemHandle: not memory from cudaMalloc";
    return false;
  }
  FakeHandle h{kHandleMagic, static_cast<int32_t>(getpid()), mem.fd, mem.ino, mem.id};
  std::memset(ref->handle, 0, sizeof(ref->handle));
  std::memcpy(ref->handle, &h, sizeof(h));
  ref->allocBytes = mem.bytes;
  ref->offset = mem.offset;
  fakeCudaStats().ipcExports.fetch_add(1);
  return true;
}

// As CUDA: one mapping per handle in a process, counted.
std::mutex g_openMu;
std::map<const char*, int> g_openRefs;

braidResult_t ipcOpen(const device::IpcRef& ref, char** base) {
  if (takeFailure(fakeCudaStats().failOpens))
    return fail(braidUnhandledCudaError, "fake CUDA: cudaIpcOpenMemHandle failed (test)");
  FakeHandle h;
  std::memcpy(&h, ref.handle, sizeof(h));
  if (h.magic != kHandleMagic)
    return fail(braidUnhandledCudaError, "fake CUDA: cudaIpcOpenMemHandle: not a handle");
  if (h.pid == static_cast<int32_t>(getpid()))
    return fail(braidUnhandledCudaError,
                "fake CUDA: cudaIpcOpenMemHandle of this process's own memory (invalid context)");
  std::string error;
  const hostmem::Ref mem{h.fd, h.id, h.ino, 0, static_cast<size_t>(ref.allocBytes)};
  const char* p = hostmem::mapPeer(h.pid, mem, &error);
  if (!p)
    return fail(braidUnhandledCudaError, "fake CUDA: cudaIpcOpenMemHandle: %s", error.c_str());
  std::lock_guard<std::mutex> lock(g_openMu);
  ++g_openRefs[p];
  *base = const_cast<char*>(p);
  fakeCudaStats().ipcOpens.fetch_add(1);
  return braidSuccess;
}

braidResult_t ipcClose(char* base) {
  std::lock_guard<std::mutex> lock(g_openMu);
  auto it = g_openRefs.find(base);
  if (it == g_openRefs.end())
    return fail(braidInternalError, "fake CUDA: cudaIpcCloseMemHandle of %p: not open",
                static_cast<void*>(base));
  // The size is not kept: mapPeer's pages are unmapped by the kernel at exit, and a test
  // closes few. Count the close so tests can see it.
  if (--it->second == 0) g_openRefs.erase(it);
  fakeCudaStats().ipcCloses.fetch_add(1);
  return braidSuccess;
}

device::Runtime makeRuntime(bool everyPointerIsDevice) {
  device::Runtime rt{};
  rt.currentDevice = [](std::string*) { return t_device; };
  rt.isDevice = everyPointerIsDevice ? [](const void* p) { return p != nullptr; } : tracked;
  // "Device" memory is shared host memory (braidMemAllocHost's memfds), so that another
  // process can open it (ipcOpen) as it would a cudaIpcMemHandle_t.
  rt.alloc = [](void** p, size_t bytes) {
    BRAID_TRY(hostmem::alloc(p, bytes ? bytes : 1));
    std::lock_guard<std::mutex> lock(g_allocMu);
    g_allocs[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return braidSuccess;
  };
  rt.free = [](void* p) {
    {
      std::lock_guard<std::mutex> lock(g_allocMu);
      g_allocs.erase(reinterpret_cast<uintptr_t>(p));
    }
    return hostmem::free(p);
  };
  rt.toHost = syncCopy;
  rt.toDevice = syncCopy;
  rt.hostFunc = [](void* s, void (*fn)(void*), void* arg) {
    if (takeFailure(fakeCudaStats().failHostFuncs))
      return fail(braidUnhandledCudaError, "fake CUDA: cudaLaunchHostFunc failed (test)");
    fake(s)->push([fn, arg] { fn(arg); });
    return braidSuccess;
  };
  rt.waitValue = [](void* s, uint32_t* flag, uint32_t value) {
    if (takeFailure(fakeCudaStats().failWaits))
      return fail(braidUnhandledCudaError, "fake CUDA: cuStreamWaitValue32 failed (test)");
    fake(s)->push([flag, value] {
      if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == value) return;
      g_waiting.fetch_add(1);
      while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != value) std::this_thread::yield();
      g_waiting.fetch_sub(1);
    });
    return braidSuccess;
  };
  rt.writeValue = [](void* s, uint32_t* flag, uint32_t value) {
    fake(s)->push([flag, value] { __atomic_store_n(flag, value, __ATOMIC_RELEASE); });
    return braidSuccess;
  };
  rt.allocFlags = [](uint32_t** flags, size_t n) {
    *flags = new uint32_t[n]();
    return braidSuccess;
  };
  rt.freeFlags = [](uint32_t* flags) {
    delete[] flags;
    return braidSuccess;
  };
  rt.isCapturing = [](void* s) { return fake(s)->capturing(); };
  rt.streamSynchronize = [](void* s) {
    fake(s)->synchronize();
    return braidSuccess;
  };
  rt.copyOnOwnStream = proxyCopy;
  rt.deviceSynchronize = [] {
    if (g_waiting.load() > 0)
      return fail(braidInternalError,
                  "fake CUDA: cudaDeviceSynchronize while a stream waits for a call (it would "
                  "never return on a GPU)");
    fakeCudaStats().deviceSyncs.fetch_add(1);
    return braidSuccess;
  };
  rt.deviceReduce = [](void* dst, const void* a, const void* b, size_t count, braidDataType_t dtype,
                       braidRedOp_t op, int divisor) {
    kernels::reduce(dtype, op, dst, a, b, count, divisor);
    fakeCudaStats().deviceReduces.fetch_add(1);
    return braidSuccess;
  };
  rt.deviceDivide = [](void* dst, const void* src, size_t count, braidDataType_t dtype,
                       int divisor) {
    kernels::divide(dtype, dst, src, count, divisor);
    fakeCudaStats().deviceReduces.fetch_add(1);
    return braidSuccess;
  };
  rt.busId = [](std::string* id) {
    *id = "fake:" + std::to_string(t_device);
    return braidSuccess;
  };
  rt.reachPeer = [](const std::string& busId, std::string* why) {
    if (busId == "fake:" + std::to_string(t_device)) {
      *why = "the same device";
      return true;
    }
    const bool can = !fakeCudaStats().noPeerAccess.load();
    *why = can ? "peer access to " + busId : "no peer access to " + busId;
    return can;
  };
  rt.ipcExport = ipcExport;
  rt.ipcOpen = ipcOpen;
  rt.ipcClose = ipcClose;
  rt.setDevice = [](int device) {
    if (device < 0 || device >= kFakeDevices)
      return fail(braidUnhandledCudaError, "fake CUDA: cudaSetDevice(%d): invalid device ordinal",
                  device);
    t_device = device;
    return braidSuccess;
  };
  return rt;
}

}  // namespace

const device::Runtime& fakeCudaRuntime(bool everyPointerIsDevice) {
  static const device::Runtime all = makeRuntime(true), tracking = makeRuntime(false);
  return everyPointerIsDevice ? all : tracking;
}

FakeStream& fakeLegacyStream(int device) {
  static FakeStream legacy[kFakeDevices];
  return legacy[device];
}

size_t fakeLiveAllocations() {
  std::lock_guard<std::mutex> lock(g_allocMu);
  return g_allocs.size();
}

FakeCudaStats& fakeCudaStats() {
  static FakeCudaStats stats;
  return stats;
}

}  // namespace braid::test
