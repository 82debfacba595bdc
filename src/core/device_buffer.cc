// DeviceBuffer (executor.h): device memory grown on demand, a communicator's scratch and staging
// block on the device path; memory freed on a CUDA stream's proxy thread is freed later, by the
// next free outside a proxy.
#include <mutex>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/executor.h"
#include "device/device.h"

namespace braid {

namespace {

// Device buffers freed on a proxy thread, for the next free elsewhere (DeviceBuffer).
std::mutex g_deferredMu;
std::vector<void*> g_deferred;

// Frees p (if not NULL) and, outside a proxy, whatever proxies left.
void freeDevice(void* p) {
  if (device::proxyDevice() != device::kNotProxy) {
    std::lock_guard<std::mutex> lock(g_deferredMu);
    if (p) g_deferred.push_back(p);
    return;
  }
  std::vector<void*> later;
  {
    std::lock_guard<std::mutex> lock(g_deferredMu);
    later.swap(g_deferred);
  }
  if (p) later.push_back(p);
  for (void* q : later) device::runtime().free(q);
}

}  // namespace

DeviceBuffer::~DeviceBuffer() { freeDevice(ptr_); }

void DeviceBuffer::release() {
  freeDevice(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

braidResult_t DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return braidSuccess;
  if (ptr_) freeDevice(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  void* p = nullptr;
  BRAID_TRY(device::runtime().alloc(&p, bytes));
  ptr_ = static_cast<char*>(p);
  bytes_ = bytes;
  return braidSuccess;
}

}  // namespace braid
