#include "core/stream.h"

#include <memory>

#include "base/error.h"
#include "device/device.h"

namespace braid {
namespace {

void workerLoop(braidStream* s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    s->cv.wait(lock, [s] { return s->stopping || !s->queue.empty(); });
    if (s->queue.empty()) return;
    auto work = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->running;
    lock.unlock();
    braidResult_t res = guardApi("work queued on a stream", work);
    std::string msg = res == braidSuccess ? std::string() : lastError();
    lock.lock();
    --s->running;
    if (res != braidSuccess && s->firstError == braidSuccess) {
      s->firstError = res;
      s->firstErrorMessage = msg;
    }
    s->cv.notify_all();
  }
}

}  // namespace

namespace {

void push(braidStream* s, std::function<braidResult_t()> work) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->queue.push_back(std::move(work));
  s->cv.notify_all();
}

// Lets the CUDA stream go on (Runtime::waitValue waits for this).
void releaseCudaStream(uint32_t* flag) { __atomic_store_n(flag, 1u, __ATOMIC_RELEASE); }

// cudaLaunchHostFunc's callback: runs on CUDA's own thread once everything queued on the CUDA
// stream before the call has finished. It may neither call CUDA nor wait (other streams'
// callbacks can share its thread, and in one process the peer ranks' calls are among them),
// so it only queues the call for the worker.
void handOff(void* arg) {
  auto* h = static_cast<CudaHandoff*>(arg);
  std::unique_ptr<CudaHandoff> owned(h->replayable ? nullptr : h);
  braidStream* s = h->stream;
  uint32_t* flag = h->flag;
  try {
    std::function<braidResult_t()> work = h->replayable ? h->work : std::move(h->work);
    push(s, [flag, work = std::move(work)] {
      const braidResult_t res = guardApi("a call on a CUDA stream", work);
      releaseCudaStream(flag);
      return res;
    });
  } catch (...) {  // not queued (out of memory): the call fails, and the stream goes on
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->firstError == braidSuccess) {
        s->firstError = braidSystemError;
        s->firstErrorMessage = "a call on a CUDA stream could not be queued (out of memory)";
      }
    }
    releaseCudaStream(flag);
  }
}

// A word of its own for a captured call.
braidResult_t captureFlag(braidStream* s, uint32_t** flag) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->flagBlocks.empty() || s->flagsUsed == braidStream::kCaptureFlags) {
    uint32_t* block = nullptr;
    BRAID_TRY(device::runtime().allocFlags(&block, braidStream::kCaptureFlags));
    s->flagBlocks.push_back(block);
    s->flagsUsed = 0;
  }
  *flag = s->flagBlocks.back() + s->flagsUsed++;
  return braidSuccess;
}

}  // namespace

braidResult_t streamEnqueue(braidStream* s, std::function<braidResult_t()> work, bool replayable) {
  if (!s->cudaOrdered()) {
    push(s, std::move(work));
    return braidSuccess;
  }
  std::lock_guard<std::mutex> order(s->enqueueMu);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->broken.empty())
      return fail(braidInvalidUsage,
                  "the stream refuses calls since one could not be ordered "
                  "on its CUDA stream: %s",
                  s->broken.c_str());
  }
  const device::Runtime& rt = device::runtime();
  uint32_t* flag = s->doneFlag;
  if (replayable) BRAID_TRY(captureFlag(s, &flag));
  auto handoff = std::make_unique<CudaHandoff>(CudaHandoff{s, std::move(work), flag, replayable});
  CudaHandoff* h = handoff.get();
  if (replayable) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->captured.push_back(std::move(handoff));
  }
  BRAID_TRY(rt.hostFunc(s->cudaStream, handOff, h));
  handoff.release();  // the hand-off frees it (or s->captured holds it)
  braidResult_t res = rt.waitValue(s->cudaStream, flag, 1);
  if (res == braidSuccess) res = rt.writeValue(s->cudaStream, flag, 0);
  if (res != braidSuccess && !replayable) {
    // The call still runs and sets the word; with no reset after it, later waits would pass
    // at once.
    std::lock_guard<std::mutex> lock(s->mu);
    s->broken = lastError();
  }
  return res;
}

}  // namespace braid

extern "C" {

braidResult_t braidStreamCreate(braidStream_t* stream) {
  return braid::guardApi("braidStreamCreate", [&]() -> braidResult_t {
    if (!stream) return braid::fail(braidInvalidArgument, "braidStreamCreate: stream is NULL");
    auto s = std::make_unique<braidStream>();
    s->worker = std::thread(braid::workerLoop, s.get());
    *stream = s.release();
    return braidSuccess;
  });
}

braidResult_t braidStreamCreateCuda(braidStream_t* stream, void* cudaStream) {
  return braid::guardApi("braidStreamCreateCuda", [&]() -> braidResult_t {
    if (!stream) return braid::fail(braidInvalidArgument, "braidStreamCreateCuda: stream is NULL");
    *stream = nullptr;
    const braid::device::Runtime& rt = braid::device::runtime();
    std::string why;
    if (rt.currentDevice(&why) < 0)
      return braid::fail(braidUnhandledCudaError, "braidStreamCreateCuda: %s", why.c_str());
    auto s = std::make_unique<braidStream>();
    s->cudaStream = cudaStream;
    BRAID_TRY(rt.allocFlags(&s->doneFlag, 1));
    try {
      s->worker = std::thread(braid::workerLoop, s.get());
    } catch (...) {
      rt.freeFlags(s->doneFlag);
      throw;
    }
    *stream = s.release();
    return braidSuccess;
  });
}

braidResult_t braidStreamSynchronize(braidStream_t s) {
  return braid::guardApi("braidStreamSynchronize", [&]() -> braidResult_t {
    if (!s) return braid::fail(braidInvalidArgument, "braidStreamSynchronize: stream is NULL");
    // The CUDA stream first: a call is handed to the worker only when the stream reaches it.
    if (s->cudaOrdered()) BRAID_TRY(braid::device::runtime().streamSynchronize(s->cudaStream));
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait(lock, [s] { return s->queue.empty() && s->running == 0; });
    braidResult_t res = s->firstError;
    if (res != braidSuccess) {
      std::string msg = s->firstErrorMessage;
      s->firstError = braidSuccess;
      s->firstErrorMessage.clear();
      lock.unlock();
      return braid::fail(res, "work queued on the stream failed: %s", msg.c_str());
    }
    return braidSuccess;
  });
}

braidResult_t braidStreamDestroy(braidStream_t s) {
  return braid::guardApi("braidStreamDestroy", [&]() -> braidResult_t {
    if (!s) return braid::fail(braidInvalidArgument, "braidStreamDestroy: stream is NULL");
    braidResult_t res = braidStreamSynchronize(s);
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->stopping = true;
      s->cv.notify_all();
    }
    s->worker.join();
    // A graph that still holds captured calls must not be launched after this (braid.h).
    const braid::device::Runtime& rt = braid::device::runtime();
    if (s->doneFlag && rt.freeFlags(s->doneFlag) != braidSuccess && res == braidSuccess)
      res = braidUnhandledCudaError;
    for (uint32_t* block : s->flagBlocks) rt.freeFlags(block);
    delete s;
    return res;
  });
}

}  // extern "C"
