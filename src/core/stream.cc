#include "core/stream.h"

#include <memory>

#include "core/device.h"
#include "core/error.h"

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
void releaseCudaStream(braidStream* s) { __atomic_store_n(s->doneFlag, 1u, __ATOMIC_RELEASE); }

// cudaLaunchHostFunc's callback: runs on CUDA's own thread once everything queued on the CUDA
// stream before the call has finished. It may neither call CUDA nor wait (other streams'
// callbacks can share its thread, and in one process the peer ranks' calls are among them),
// so it only queues the call for the worker.
void handOff(void* arg) {
  auto* h = static_cast<CudaHandoff*>(arg);
  std::unique_ptr<CudaHandoff> owned(h->replayable ? nullptr : h);
  braidStream* s = h->stream;
  try {
    std::function<braidResult_t()> work = h->replayable ? h->work : std::move(h->work);
    push(s, [s, work = std::move(work)] {
      braidResult_t res;
      {
        device::ProxyScope proxy;  // staging copies must not wait for the blocked CUDA stream
        res = guardApi("a call on a CUDA stream", work);
      }
      releaseCudaStream(s);
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
    releaseCudaStream(s);
  }
}

}  // namespace

braidResult_t streamEnqueue(braidStream* s, std::function<braidResult_t()> work, bool replayable,
                            bool* queued) {
  if (queued) *queued = false;
  if (!s->cudaOrdered()) {
    push(s, std::move(work));
    if (queued) *queued = true;
    return braidSuccess;
  }
  const device::Runtime& rt = device::runtime();
  auto handoff = std::make_unique<CudaHandoff>(CudaHandoff{s, std::move(work), replayable});
  CudaHandoff* h = handoff.get();
  if (replayable) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->captured.push_back(std::move(handoff));
  }
  BRAID_TRY(rt.hostFunc(s->cudaStream, handOff, h));
  handoff.release();  // the hand-off frees it (or s->captured holds it)
  if (queued) *queued = true;
  BRAID_TRY(rt.waitValue(s->cudaStream, s->doneFlag, 1));
  return rt.writeValue(s->cudaStream, s->doneFlag, 0);
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
    const int device = rt.currentDevice(&why);
    if (device < 0)
      return braid::fail(braidUnhandledCudaError, "braidStreamCreateCuda: %s", why.c_str());
    auto s = std::make_unique<braidStream>();
    s->cudaStream = cudaStream;
    BRAID_TRY(rt.allocFlag(&s->doneFlag));
    // The worker stages on the creating thread's device (a thread may drive several GPUs).
    s->queue.push_back([device] { return braid::device::runtime().setDevice(device); });
    s->worker = std::thread(braid::workerLoop, s.get());
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
    if (s->doneFlag) braid::device::runtime().freeFlag(s->doneFlag);
    delete s;
    return res;
  });
}

}  // extern "C"
