// Device memory as the core sees it: which buffers live on a CUDA device, and the copies
// that stage them through host memory. The CUDA runtime backs it in a CUDA build; a build
// without CUDA (or a machine without a device) has only host memory. Tests may install a
// stand-in runtime whose "device" memory is host memory it keeps track of, so the staging
// paths run on machines without a GPU.
#ifndef BRAID_CORE_DEVICE_H_
#define BRAID_CORE_DEVICE_H_

#include <cstddef>
#include <string>

#include "braid/braid.h"

namespace braid::device {

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
};

// The runtime in use: a test's stand-in when one is set, else CUDA's (or the host-only one).
const Runtime& runtime();
// Tests: makes r the runtime until called again with nullptr. Not thread safe against calls
// in flight; set it before making communicators.
void setRuntimeForTesting(const Runtime* r);

}  // namespace braid::device

#endif  // BRAID_CORE_DEVICE_H_
