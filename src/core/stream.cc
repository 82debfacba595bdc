#include "core/stream.h"

#include <memory>

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

braidResult_t streamEnqueue(braidStream* s, std::function<braidResult_t()> work) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->queue.push_back(std::move(work));
  s->cv.notify_all();
  return braidSuccess;
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

braidResult_t braidStreamSynchronize(braidStream_t s) {
  return braid::guardApi("braidStreamSynchronize", [&]() -> braidResult_t {
    if (!s) return braid::fail(braidInvalidArgument, "braidStreamSynchronize: stream is NULL");
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
    delete s;
    return res;
  });
}

}  // extern "C"
