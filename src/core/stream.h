// Streams: a FIFO of work items run in order by one worker thread, so callers can overlap
// communication with compute (the training layer's DDP buckets). A stream made with
// braidStreamCreateCuda also orders its work with a CUDA stream: its worker is the proxy that
// runs each call when the CUDA stream reaches it (device.h, Runtime::hostFunc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"

namespace braid {
struct CudaHandoff;
}

struct braidStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<braidResult_t()>> queue;
  size_t running = 0;
  bool stopping = false;
  braidResult_t firstError = braidSuccess;
  std::string firstErrorMessage;
  std::thread worker;
  // braidStreamCreateCuda: the cudaStream_t (NULL is the legacy default stream), and the
  // word it waits on for each call (set by the worker when the call is done, reset by the
  // CUDA stream). One word serves every call: the CUDA stream cannot reach a call's hand-off
  // before it has reset the word after the one before.
  void* cudaStream = nullptr;
  uint32_t* doneFlag = nullptr;
  bool cudaOrdered() const { return doneFlag != nullptr; }
  // Why the stream refuses calls: a wait or reset could not be queued on the CUDA stream,
  // so its word may stay set and no later call would be waited for. Empty: usable.
  std::string broken;
  // Held while a call's three operations are queued: two threads' calls interleaved on the
  // one word (hand-off, hand-off, wait, reset, ...) would leave the second wait forever.
  std::mutex enqueueMu;
  // Calls captured into a CUDA graph: each replay hands a copy to the worker, so they live
  // as long as the stream, each with a word of its own (a graph may be launched on another
  // CUDA stream while this one runs). The words come from blocks of kCaptureFlags.
  std::vector<std::unique_ptr<braid::CudaHandoff>> captured;
  std::vector<uint32_t*> flagBlocks;
  size_t flagsUsed = 0;  // of the last block
  static constexpr size_t kCaptureFlags = 1024;
};

namespace braid {

// What the CUDA stream hands to the worker when it reaches a call (cudaLaunchHostFunc's
// argument): freed by the hand-off itself, unless a graph may replay it.
struct CudaHandoff {
  braidStream* stream;
  std::function<braidResult_t()> work;
  uint32_t* flag;  // the word the CUDA stream waits on for this call
  bool replayable;
};

// Queues work on the stream. On a CUDA-ordered stream the work is handed to the worker when
// the CUDA stream reaches this point, and the CUDA stream waits for it. `replayable`: the CUDA
// stream is being captured, so the hand-off may run any number of times. Work that cannot be
// queued is destroyed without running.
braidResult_t streamEnqueue(braidStream* stream, std::function<braidResult_t()> work,
                            bool replayable = false);

}  // namespace braid
