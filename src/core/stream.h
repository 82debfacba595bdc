// Host streams: a FIFO of work items run in order by one worker thread, so callers can
// overlap communication with compute (the training layer's DDP buckets).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "braid/braid.h"

struct braidStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<braidResult_t()>> queue;
  size_t running = 0;
  bool stopping = false;
  braidResult_t firstError = braidSuccess;
  std::string firstErrorMessage;
  std::thread worker;
};

namespace braid {
braidResult_t streamEnqueue(braidStream* stream, std::function<braidResult_t()> work);
}  // namespace braid
