// The flight recorder (issue 36; docs/trace.md): every call on every communicator of a rank, in
// a bounded ring of fixed-size records, written as JSON (one record per line) on a timeout, an
// abort or a failed call, on SIGUSR1 and on braidCommDumpTrace; braid-trace reads a job's dumps.
//
// One Recorder per rank: made for the communicator a rank created by init and shared by the
// communicators split, shrunk or grown from it, so one file holds a rank's calls on all of them.
// Recording is lock-free and allocates nothing: a call claims the next slot (one fetch_add)
// and fills it with relaxed stores under the slot's seqlock; progress (steps done, the peer
// waited on) and the end are single stores. A dump, on any thread but a signal handler's,
// copies a slot and keeps it only if its version did not move meanwhile. SIGUSR1's handler
// only posts a semaphore; a thread of the recorder writes the dumps (no allocation, no lock,
// nothing that can block inside the handler).
//
// BRAID_TRACE=steps adds one StepRecord per schedule step of each call (peer, bytes; the time
// waited with the step at the head of what the rank waited on, copying and reducing): the
// executor fills a StepTimes table per run, copied into the steps ring as the call ends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::trace {

enum class Mode { kOff, kCalls, kSteps };  // BRAID_TRACE: off, calls (default), steps
enum class State : uint32_t { kEnqueued = 0, kStarted, kDone, kFailed };
// A record's call (CallInfo::kind): a Collective's value, or one of the point-to-point forms.
constexpr uint32_t kSend = 100, kRecv = 101, kSendRecv = 102;
// A step's kind: schedule.h's StepKind values (send, recv, recv_reduce, copy).

// The calls' clock with BRAID_TRACE=calls: CLOCK_MONOTONIC_COARSE, the same time base as
// nowNs() read in a few ns (two reads a call; 4 ms resolution on Linux's default tick): enough to
// say how long a rank has been in a call, cheap enough for an 8-byte all-reduce of half a
// microsecond. BRAID_TRACE=steps times calls and steps with nowNs().
uint64_t coarseNowNs();

inline uint64_t nowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// When the call the calling thread runs was queued on a stream (0: not queued): set around
// the queued work (queued_work.cc), read as the call's record starts.
extern thread_local uint64_t t_enqueuedAt;

// What a call is, as its caller passed it.
struct CallInfo {
  uint64_t comm = 0;  // the communicator's hash
  uint64_t seq = 0;   // its sequence number on that communicator
  uint32_t kind = 0;  // Collective value, or kSend / kRecv / kSendRecv
  int dtype = 0;
  int op = -1;  // -1: not a reducing call
  int root = -1;
  int peer = -1;
  uint64_t count = 0;
  uint64_t bytes = 0;
  const char* algo = "";  // static text (the algorithm table's name)
  uint64_t tEnqueue = 0;  // 0: handed over when it started
};

// Per step of one run, when steps are recorded (ExecContext::stepTimes).
struct StepTimes {
  uint64_t start = 0, end = 0;  // first piece moved, finished
  uint64_t wait = 0, copy = 0, reduce = 0;
  uint32_t kind = 0;  // StepKind
  int32_t peer = -1;
  uint64_t bytes = 0;
};

// One slot of the calls ring; every field an atomic word, so a dump may read while a rank
// writes (the seqlock tells a torn copy from a whole one). Two cache lines: a call writes one
// slot, the next call the next one.
struct alignas(64) Slot {
  std::atomic<uint64_t> version{0};  // odd while being written
  std::atomic<uint64_t> id{0};       // record number, 1-based; 0: never written
  std::atomic<uint64_t> comm{0}, seq{0}, count{0}, bytes{0};
  std::atomic<uint64_t> kindDtype{0};  // kind << 32 | dtype
  std::atomic<uint64_t> opRoot{0};     // (op + 1) << 32 | (root + 1)
  std::atomic<const char*> algo{""};
  std::atomic<uint64_t> tEnqueue{0}, tStart{0}, tEnd{0};
  std::atomic<uint32_t> state{0}, step{0}, steps{0};
  std::atomic<int32_t> peer{-1}, waitingOn{-1};
  std::atomic<uint32_t> waited{0};  // the call slept waiting (CallHandle::waited)
};
static_assert(sizeof(Slot) == 128);

struct StepRecord {
  uint64_t callId, comm, seq;
  uint32_t index;
  StepTimes t;
};

// What the dump says of each communicator (comms of the rank, newest last).
struct CommInfo {
  uint64_t hash = 0, parent = 0;
  int rank = 0, nranks = 1, color = -1, key = -1;
  std::vector<int> worldRanks;
  std::vector<std::string> hosts;
};

// A handle on a call's slot while the call runs (null slot: not recorded).
struct CallHandle {
  Slot* slot = nullptr;
  uint64_t id = 0;
  bool coarse = false;  // times from the coarse clock (BRAID_TRACE=calls)
  void progress(uint32_t done) const {
    if (slot) slot->step.store(done, std::memory_order_relaxed);
  }
  void waitingOn(int peer) const {
    if (slot) slot->waitingOn.store(peer, std::memory_order_relaxed);
  }
  // The call went past spinning into a wait at `now` (nowNs's clock): its end is read from the
  // clock (see end()), and a start taken from a stale reading (the program's own work since the
  // last one) moves up to now, within a few microseconds of the call's real start.
  void waited(uint64_t now) const {
    if (!slot) return;
    slot->waited.store(1, std::memory_order_relaxed);
    if (coarse && now > slot->tStart.load(std::memory_order_relaxed) + kStaleNs)
      slot->tStart.store(now, std::memory_order_relaxed);
  }
  static constexpr uint64_t kStaleNs = 4000000;  // the coarse clock's resolution
};

class Recorder {
 public:
  static constexpr uint64_t kTimedBytes = 1 << 20;
  static constexpr uint64_t kClockEvery = 32;
  // capacity: calls kept (BRAID_TRACE_BUFFER); rank: this rank's in the communicator the
  // recorder is made for, which names its file.
  Recorder(Mode mode, size_t capacity, int rank, uint64_t rootHash);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Mode mode() const { return mode_; }
  size_t capacity() const { return capacity_; }
  uint64_t recorded() const { return next_.load(std::memory_order_relaxed); }

  CallHandle begin(const CallInfo& call, uint32_t steps);
  // The call ended: done or failed (its error text kept for the dump), its step times if any.
  //
  // With BRAID_TRACE=calls, times are the coarse clock's (4 ms resolution), and read from it
  // only where they can differ from the last reading by that much: a call's start every
  // kClockEvery calls and for calls of kTimedBytes or more (else the last reading), its end for
  // a call that waited (CallHandle::waited), a failed one and those of kTimedBytes or more (else
  // its start). Calls in between are short ones that never waited: their times are the last
  // reading, a few ms old at most. A clock read costs as much as the rest of the record, and
  // two a call were 4% of an 8-byte all-reduce between two processes (0.5 us).
  void end(const CallHandle& h, bool ok, const char* error, const StepTimes* steps, size_t n);

  void addComm(const CommInfo& info);
  // Writes the dump (BRAID_TRACE_DIR/<job>/rank-N.json); the path written, or "" with why.
  // reason: timeout, abort, error, signal or api.
  bool dump(const char* reason, const std::string& detail, std::string* pathOrWhy);
  std::string json(const char* reason, const std::string& detail) const;
  // Whether a dump was written in the last `ns` (SIGUSR1 then keeps a failed call's dump, whose
  // reason says more than the signal's).
  bool dumpedWithin(uint64_t ns) const {
    const uint64_t t = lastDump_.load(std::memory_order_relaxed);
    return t && nowNs() - t < ns;
  }

  // BRAID_TRACE and BRAID_TRACE_BUFFER as this process reads them now.
  static Mode modeFromEnv();
  static size_t capacityFromEnv();
  static constexpr size_t kMaxCapacity = size_t{1} << 24;  // BRAID_TRACE_BUFFER's bound

 private:
  std::string fileName() const;
  uint64_t startTime(uint64_t id, uint64_t bytes);

  const Mode mode_;
  const int rank_;
  const uint64_t rootHash_;
  std::unique_ptr<Slot[]> slots_;
  size_t capacity_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> shared_{false};  // more than one communicator records here
  std::atomic<uint64_t> coarseNow_;  // the coarse clock's last reading (calls mode)
  mutable std::mutex mu_;            // the rest: comms, errors, steps, the file name
  std::mutex dumpMu_;                // one dump at a time
  std::vector<CommInfo> comms_;
  std::vector<std::pair<uint64_t, std::string>> errors_;  // failed calls' texts, by id
  std::vector<StepRecord> steps_;                         // ring of step records
  size_t stepsNext_ = 0;
  uint64_t stepsRecorded_ = 0;
  mutable std::string file_;
  std::atomic<uint64_t> lastDump_{0};  // when the last dump was written (nowNs), 0: never
};

// The 16-hex-digit name of a communicator's hash.
std::string hashText(uint64_t hash);
// A communicator's hash from its unique id's bytes (FNV-1a): the same on every rank.
uint64_t hashBytes(const void* data, size_t size);
// The name braid-trace reads for a record's call kind and step kind.
const char* callName(uint32_t kind);
const char* stepKindName(uint32_t kind);

// SIGUSR1 dumps every live recorder of this process (installed once BRAID_TRACE_DIR is set
// and SIGUSR1 is at its default); braidrun forwards it to every rank.
void registerRecorder(const std::shared_ptr<Recorder>& r);

}  // namespace braid::trace
