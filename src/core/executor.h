// The executor: runs one rank's schedule over its connections.
//
// A schedule is compiled once into a Plan (per-peer send and receive queues, local steps,
// completion flags) and cached by the communicator, so a call walks precomputed steps with
// no allocation. Every queue advances as far as its dependencies and the connection's free
// space allow; pieces of consecutive steps are in flight together, which is the pipelining.
// Receive-reduce steps reduce straight out of the connection's buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"
#include "core/trace.h"
#include "transport/transport.h"

namespace braid {

class StallBoard;
struct CallPosition;

// Device memory (device::Runtime's alloc and free), grown on demand: a communicator's scratch
// and staging block on the device path (one of each, whatever its plans: calls on a
// communicator run one at a time). Memory freed on a CUDA stream's proxy thread (a buffer
// that grows) is freed later, by the next free outside a proxy (the communicator's destroy at
// the latest): cudaFree waits for the whole device, whose stream waits for the proxy.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes` (contents not kept when it grows).
  braidResult_t reserve(size_t bytes);
  char* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Frees the memory (braidCommSuspend); reserve allocates it again.
  void release();

 private:
  char* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct Plan {
  const AlgorithmInfo* algo = nullptr;  // what built the schedule
  Schedule schedule;
  struct Queue {
    int peer;
    std::vector<int32_t> steps;  // indices into schedule.steps, in posting order
    // Send queues: per step, the ticket of its last in-place piece, or kCopied when its
    // bytes were copied into the connection (the step finished when committed).
    std::vector<uint64_t> tickets;
  };
  static constexpr uint64_t kCopied = ~0ull;
  std::vector<Queue> sends, recvs;
  std::vector<int32_t> locals;
  std::vector<uint8_t> done;  // per step, reset each run
  // Progress of each queue during a run: head step and bytes of it done (reused).
  struct Cursor {
    size_t index = 0;
    size_t bytesDone = 0;
    size_t retired = 0;  // send queues: steps before this one are finished
  };
  std::vector<Cursor> sendCur, recvCur;
  std::vector<char> scratch;
  std::vector<char> pullBlock;  // receive-reduce of pieces read from another process
  std::vector<char> hostBlock;  // the device path's pulls from another process's memory
  // Elements of the send and the receive buffer the steps touch (the highest offset + count
  // of each): the call's footprint, for the choice of streaming stores.
  size_t sendExtent = 0, recvExtent = 0;
  // ExecContext's outgrowsCache and streamStores for this plan's calls: set once when the
  // plan is made (runCollective), for its form (inPlace below).
  bool outgrowsCache = false;
  bool streamStores = false;
  uint32_t callTag = 0;  // ExecContext::callTag of the calls this plan runs (runCollective)
  // The schedule was built for the in-place form (CollArgs::inPlace); set before compilePlan.
  bool inPlace = false;
  // Per step, set by compilePlan: a receive-reduce into the receive buffer whose output no
  // later step of the call reads (out of place only), so that in a call that outgrows the
  // cache it may go to memory with streaming stores (ExecContext::streamStores).
  std::vector<uint8_t> finalOutput;
};

void compilePlan(Plan* plan, size_t elemSize);

// Asks a peer that a call has waited on for a while which collective it is in (core/
// call_check.cc, over the control plane), so that ranks in different calls that send each
// other nothing (mismatched roots) learn it long before the timeout.
class PeerCallCheck {
 public:
  virtual ~PeerCallCheck() = default;
  // braidInvalidUsage, its message saying that `peer` "is in a different call", where the
  // peer is at this rank's collective number in another call; braidSuccess otherwise (the
  // same call, another number, no answer).
  virtual braidResult_t check(int peer) const = 0;
};

struct ExecContext {
  int rank;
  int nranks;
  braidDataType_t dtype;
  braidRedOp_t op;
  size_t elemSize;
  const char* what;  // "all-reduce", for messages
  uint64_t opCount;  // the call's sequence number, for messages
  // Base address of each BufferId: [kSend], [kRecv], then user buffers from kFirstUser;
  // the executor points [kScratch] at the plan's scratch (deviceScratch on the device path).
  char** bases;
  size_t nbases;
  Connection* const* connections;  // by peer
  uint64_t* sendSeq;
  uint64_t* recvSeq;
  const int* peerPids;  // by peer, for liveness checks of processes on this host; may be null
  Doorbell* doorbell;   // this rank's, for sleeping while idle; may be null
  bool oversubscribed;  // more ranks on this host than cores: sleep instead of spinning
  uint32_t callTag;     // fingerprint of (collective, count, dtype, op, root); 0 for send/recv
  size_t count = 0;     // the call's count, for messages (0 for send/recv)
  // Set by braidCommAbort (from any thread): the call ends at its next wait. May be null.
  const std::atomic<bool>* aborted = nullptr;
  // braidCommRevoke (a rank's, from any thread): >= 0, the revoking rank, ends the call at its
  // next wait. May be null.
  const std::atomic<int>* revokedBy = nullptr;
  double timeoutSec = 0;     // bound of every wait, s (0: BRAID_TIMEOUT)
  double stallWarnSec = -1;  // BRAID_STALL_WARN for this call (negative: the environment's)
  // Where a failed call writes the rank it blames (the peer lost or waited on at the
  // timeout, or the one that peer blamed); -1 when none. May be null.
  int* blamed = nullptr;
  // Rank 0's stall summary (stall.h): a stalled call reports to it; may be null.
  StallBoard* stall = nullptr;
  // By peer, its published position where it is on this host (else null), so that a wait on a
  // peer whose last act was to refuse a call says so (CallPosition::latestRefusal). May be
  // null.
  const CallPosition* const* peerPositions = nullptr;
  uint32_t kind = 0;  // the call's kind in stall reports (stallKindLabel)
  // Asked of the peer waited on after kFirstPeerCheckSec of a collective's wait, each
  // kPeerCheckSec after that, and before the timeout; may be null.
  const PeerCallCheck* peerCheck = nullptr;
  // BRAID_CHECK's exchange before the user's call `kind` (its own count, datatype and op are
  // not the user's, so messages leave them out; `what` names the exchange).
  bool checkExchange = false;
  // Receives of at least kStreamMinBytes land in the receive buffer with streaming stores
  // (kernels::copyStreaming), and so do receive-reduces of that size whose output no later
  // step reads (Plan::finalOutput; kernels::reduceStreaming): set when the call's buffers on
  // this host outgrow the last-level cache, so its output would only push other data out on
  // its way to memory.
  bool streamStores = false;
  // The call's buffers on this host outgrow the last-level cache: sends from
  // braidMemAllocHost buffers go single copy (Connection::sendKind).
  bool outgrowsCache = false;
  // The device path (braidComm::deviceDirect, with device buffers): the call's buffers and the
  // scratch are device memory. Copies and reductions run on the device (device::Runtime's
  // copyOnOwnStream, deviceReduce, deviceDivide; each waited for before its step counts as
  // done), and sends go in place where the connection can (Connection::sendKind),
  // else through host memory. A piece on the other side of the call's (a peer that passed
  // host buffers) is copied over first.
  // The executor runs such a call as Run<DeviceMemory> (exec_memory.h), any other as
  // Run<HostMemory>: the choice is made once, at the call's start.
  bool device = false;
  // On a deviceDirect communicator, its device, which every call runs on (a peer's device
  // pieces are opened there); -1 elsewhere.
  int cudaDevice = -1;
  // The device path's scratch and the block through which a receive-reduce brings a piece
  // of host memory to the device: the communicator's (set with cudaDevice).
  DeviceBuffer* deviceScratch = nullptr;
  DeviceBuffer* deviceBlock = nullptr;
  // The flight recorder's record of this call (its steps done and the peer waited on are
  // written there), and with BRAID_TRACE=steps a table of per-step times, one per schedule
  // step (null: not timed).
  trace::CallHandle traceCall{};
  trace::StepTimes* stepTimes = nullptr;
};

constexpr size_t kStreamMinBytes = 64 << 10;
// A quarter second: a wait that long is rare in a loop of calls that match, and asking costs
// one connection to the peer's control plane (about 0.1 ms).
constexpr double kFirstPeerCheckSec = 0.25;
constexpr double kPeerCheckSec = 1.0;

braidResult_t execute(Plan* plan, const ExecContext& ctx);

}  // namespace braid
