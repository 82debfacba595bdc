#include "fake_cuda.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "core/error.h"

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

device::Runtime makeRuntime(bool everyPointerIsDevice) {
  device::Runtime rt{};
  rt.currentDevice = [](std::string*) { return t_device; };
  rt.isDevice = everyPointerIsDevice ? [](const void* p) { return p != nullptr; } : tracked;
  rt.alloc = [](void** p, size_t bytes) {
    *p = std::malloc(bytes ? bytes : 1);
    std::lock_guard<std::mutex> lock(g_allocMu);
    g_allocs[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return braidSuccess;
  };
  rt.free = [](void* p) {
    {
      std::lock_guard<std::mutex> lock(g_allocMu);
      g_allocs.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
    return braidSuccess;
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

FakeCudaStats& fakeCudaStats() {
  static FakeCudaStats stats;
  return stats;
}

}  // namespace braid::test
