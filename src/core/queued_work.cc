// Calls queued on streams (braidStream_t, CUDA streams): enqueueOnStream hands a call to its
// stream's worker and keeps its place in each communicator's queue of pending work, so that
// braidCommDestroy waits for it and braidCommAbort drops what has not started (comm.h's
// QueuedWork). Moved out of calls.cc, which runs the calls themselves.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/error.h"
#include "core/comm.h"
#include "core/stream.h"
#include "core/trace.h"
#include "device/device.h"

namespace braid {

namespace {

// Enters the queues of a piece of work's communicators: false (and none entered) if one is
// closed, i.e. its communicator was destroyed or aborted.
bool enterQueues(const std::vector<std::shared_ptr<QueuedWork>>& queues) {
  for (size_t k = 0; k < queues.size(); ++k) {
    std::lock_guard<std::mutex> lock(queues[k]->mu);
    if (queues[k]->closed) {
      for (size_t j = 0; j < k; ++j) {
        std::lock_guard<std::mutex> undo(queues[j]->mu);
        --queues[j]->running;
        queues[j]->cv.notify_all();
      }
      return false;
    }
    ++queues[k]->running;
  }
  return true;
}

// Leaves them: pending (counted) and running drop by one.
void leaveQueues(const std::vector<std::shared_ptr<QueuedWork>>& queues, bool entered,
                 bool counted) {
  for (const auto& q : queues) {
    std::lock_guard<std::mutex> lock(q->mu);
    if (entered) --q->running;
    if (counted) --q->pending;
    q->cv.notify_all();
  }
}

// A piece of work's place in its queues' pending counts: given up once, when it has run, or
// when the work is destroyed without running (a hand-off that could not be queued, a stream
// destroyed with work left), so that braidCommDestroy never waits for it forever.
struct QueueTicket {
  std::vector<std::shared_ptr<QueuedWork>> queues;
  bool counted;  // a captured call is never pending
  std::atomic<bool> settled{false};
  QueueTicket(std::vector<std::shared_ptr<QueuedWork>> q, bool c)
      : queues(std::move(q)), counted(c) {}
  ~QueueTicket() { settle(); }
  void settle() {
    if (!settled.exchange(true)) leaveQueues(queues, false, counted);
  }
};

}  // namespace

braidResult_t enqueueOnStream(const std::vector<braidComm*>& comms, braidStream_t stream,
                              std::function<braidResult_t()> work) {
  // Captured into a CUDA graph: it runs at each replay, perhaps never, so braidCommDestroy
  // cannot wait for it (NCCL's rule too: a graph must not outlive its communicators; a
  // replay after the communicator's end fails without touching it).
  const bool cuda = stream->cudaOrdered();
  const bool counted = !(cuda && device::runtime().isCapturing(stream->cudaStream));
  std::vector<std::shared_ptr<QueuedWork>> queues;
  for (braidComm* comm : comms) queues.push_back(comm->queuedWork);
  if (counted)
    for (const auto& q : queues) {
      std::lock_guard<std::mutex> lock(q->mu);
      ++q->pending;
    }
  // On a CUDA stream the worker is a proxy that stages on the communicator's device (a group
  // of several sets each one's on its own thread: runSideBySide).
  const int device = comms.size() == 1 ? comms[0]->cudaDevice : -1;
  auto ticket = std::make_shared<QueueTicket>(queues, counted);
  const uint64_t enqueued = trace::nowNs();  // the flight recorder's t_enqueue
  auto run = [comms, ticket, cuda, device, enqueued, work = std::move(work)]() -> braidResult_t {
    if (!enterQueues(ticket->queues)) {
      ticket->settle();
      return fail(braidInvalidUsage,
                  "a call queued on a stream: its communicator was destroyed or aborted before "
                  "the stream reached it");
    }
    braidResult_t res;
    {
      std::optional<device::ProxyScope> proxy;
      if (cuda) proxy.emplace(device);
      // Guarded here, so that the counts below drop even if the work throws.
      trace::t_enqueuedAt = enqueued;
      res = guardApi("a call queued on a stream", work);
      trace::t_enqueuedAt = 0;
    }
    // No caller waits for a call on a CUDA stream: its failure is each communicator's
    // asynchronous error (braidCommGetAsyncError, ncclCommGetAsyncError), as in NCCL.
    if (res != braidSuccess && cuda)
      for (braidComm* comm : comms) {
        std::lock_guard<std::mutex> lock(comm->mu);
        comm->lastError = lastError();
        markBroken(comm, res);
      }
    leaveQueues(ticket->queues, true, false);
    ticket->settle();
    return res;
  };
  return streamEnqueue(stream, std::move(run), !counted);
}

braidResult_t enqueueOnStream(braidComm* comm, braidStream_t stream,
                              std::function<braidResult_t()> work) {
  return enqueueOnStream(std::vector<braidComm*>{comm}, stream, std::move(work));
}

}  // namespace braid
