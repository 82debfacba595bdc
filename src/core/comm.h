// The communicator: ranks, their connections, and the cache of compiled plans.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"
#include "core/control.h"
#include "core/executor.h"
#include "core/stall.h"
#include "core/trace.h"
#include "topology/topology.h"
#include "transport/net_proxy.h"
#include "transport/shm.h"
#include "transport/transport.h"
#include "tuning/cost_model.h"
#include "tuning/fabric.h"
#include "tuning/table.h"

namespace braid {

// What each rank tells the others during init.
struct PeerCard {
  std::string hostId;     // the logical host: BRAID_HOST_ID, else machineId
  std::string machineId;  // hostname plus boot id, whatever BRAID_HOST_ID says
  int pid = 0;
  std::string shmName;
  uint64_t shmAddr = 0;       // where this rank mapped its own segment (single copy's probe)
  bool check = false;         // this rank's BRAID_CHECK (rank 0's applies)
  bool fingerprints = true;   // this rank's BRAID_CALL_CHECK (rank 0's applies)
  uint64_t procToken = 0;     // random per process: same pid and token = same process
  size_t chunkSize = 0;       // this rank's BRAID_CHUNKSIZE (or its default)
  bool chunkSizeSet = false;  // whether BRAID_CHUNKSIZE was given
  std::string transport;      // this rank's BRAID_TRANSPORT ("" for the default)
  int nsocks = 0;             // this rank's BRAID_NSOCKS_PERPEER
  int numa = -1;              // NUMA node this rank runs on (topo::currentNumaNode), -1 unknown
  std::string tune;       // BRAID_TUNE_FILE's figures (tuning::formatCalibration, ';' for newlines)
  std::string ring;       // this rank's BRAID_RING (rank 0's applies)
  std::string table;      // BRAID_TUNE_TABLE's rows for this rank count (MeasuredTable::encode)
  std::string stallAddr;  // rank 0's: where its stall board listens ("" for none; stall.h)
  int memProbe = -1;      // hostmem::probeFd: this process's probe descriptor (-1: none)
  bool cudaIpc = false;   // has a CUDA device and BRAID_CUDA_IPC: reads peers' device memory
  std::string busId;      // that device's PCI bus id (device::Runtime::busId), "" for none
  std::string algo;       // this rank's BRAID_ALGO (NCCL_ALGO translated); rank 0's applies
  std::string ctrlAddr;   // where this rank's control plane listens (control.h), "" for none
  // Why this rank's settings fail init (settings_check.h), "" when they pass: every rank
  // fails with it after the exchange.
  std::string settingsError;

  std::string encode() const;
  static bool decode(const std::string& text, PeerCard* out);
};

// braidComm::callRecord: the collective a rank is in or made last, and the one before it.
// Written by the rank's calling thread (under the communicator's lock), read by its control
// thread to answer askWhere: a seqlock of atomics (version odd while a slot changes), a few
// relaxed stores per call.
struct CallRecord {
  struct Slot {
    std::atomic<uint64_t> number{0};
    std::atomic<uint64_t> count{0};
    // coll | dtype << 8 | op << 16 | (algorithm index + 1) << 32
    std::atomic<uint64_t> shape{0};
    std::atomic<int32_t> root{0};
  };
  std::atomic<uint64_t> version{0};
  Slot slots[2];  // by number % 2
  // algo: the call's index in algorithms() (-1: none, as for an exchange).
  void set(uint64_t n, const CollArgs& call, int algo = -1);
  // The call of number n where a slot holds it, else the latest (n 0: the latest).
  CallWhere read(uint64_t n = 0) const;
};

// This machine's identity: hostname plus boot id.
std::string localMachineId();
// This host's identity: BRAID_HOST_ID, else localMachineId().
std::string localHostId();

}  // namespace braid

namespace braid {
// Work queued on streams for a communicator. braidCommDestroy and braidCommFinalize wait
// until none is pending; braidCommAbort closes it and waits only for work that has started,
// so a CUDA stream that never reaches its calls cannot hold the abort. The work holds it too
// and checks it before touching the communicator, which may be gone by then.
struct QueuedWork {
  std::mutex mu;
  std::condition_variable cv;
  int pending = 0;      // queued and not finished
  int running = 0;      // started on a stream's worker
  bool closed = false;  // the communicator is gone: pending work must not touch it
};
}  // namespace braid

struct braidComm {
  static constexpr uint64_t kMagic = 0x6d6d6f6344696172ull;
  uint64_t magic = kMagic;
  int rank = 0;
  int nranks = 1;
  size_t chunkSize = 0;  // pipelining grain in bytes, the same on every rank (rank 0's)
  // Rank 0 set BRAID_CHUNKSIZE: every call's pieces are chunkSize. Else the cost model picks
  // each call's grain, chunkSize or smaller (tuning::choosePieceBytes).
  bool chunkFixed = false;
  std::vector<braid::PeerCard> peers;
  std::unique_ptr<braid::ShmSegment> segment;  // my inbound FIFOs
  std::vector<std::unique_ptr<braid::ShmSegment>> peerSegments;
  std::vector<std::unique_ptr<braid::Connection>> connections;  // by peer rank; null for self
  std::vector<braid::Connection*> connPtrs;  // same, as raw pointers for the executor
  // Carries the network connections; declared after them so it stops first.
  std::unique_ptr<braid::NetProxy> proxy;
  // This host's topology: BRAID_TOPO_FILE's when set (else empty until detection is wired
  // into the selector).
  std::unique_ptr<braid::topo::System> topology;
  std::vector<int> hostOf;  // host number of each rank, by first appearance in rank order
  int nhosts = 1;
  // The ring the ring and tree algorithms follow (CollArgs::ring): BRAID_RING, else ranks
  // grouped by host and NUMA node (topo::commRing). Empty when it is rank order.
  std::vector<int> ring;
  // What the selector's cost model knows of this communicator's ranks and links.
  braid::tuning::Fabric fabric;
  // braid-tune's measured best algorithms (rank 0's BRAID_TUNE_TABLE); empty without one.
  braid::tuning::MeasuredTable measured;
  std::vector<uint64_t> sendSeq, recvSeq;
  bool oversubscribed = false;  // more ranks on this host than online cores
  int localRanks = 1;           // ranks on this machine, this one included
  bool checkCalls = false;      // BRAID_CHECK (rank 0's): compare calls before each collective
  bool fingerprints = true;     // BRAID_CALL_CHECK (rank 0's): count-0 calls exchange theirs
  // Collectives this rank ran for its caller (runCollective, count-0 ones that exchanged
  // their fingerprint included; not sends and receives, which involve only some ranks): the
  // call number in a count-0 call's fingerprint and in callRecord.
  uint64_t collCount = 0;
  // The collective this rank is in or made last, as its caller passed it, numbered by
  // collCount: what its control plane answers a peer that asks (ControlPlane::askWhere), so
  // that a peer left waiting, or one that found misuse, can name both calls.
  braid::CallRecord callRecord;
  // Asks the peer a call waits on where it is (call_check.h), for the executor.
  std::unique_ptr<braid::PeerCallCheck> peerCallCheck;
  double timeoutSec = 0;      // bound of every wait, s (braidConfig_t, else BRAID_TIMEOUT)
  double stallWarnSec = 0;    // braidConfig_t's, else BRAID_STALL_WARN; 0: off
  std::vector<int> peerPids;  // pids of peers on this machine (0 elsewhere), for liveness
  // Their positions (ShmSegment::position; null elsewhere), for stall and timeout messages.
  std::vector<const braid::CallPosition*> peerPositions;
  // Rank 0's stall summary, or the channel that reports to it (stall.h); null for one rank.
  std::unique_ptr<braid::StallBoard> stallBoard;
  // Calls run (collectives and send/receive groups): each call's number, for messages, stall
  // positions and refusals (publishRefusal); advanced under mu.
  uint64_t opCount = 0;
  std::mutex mu;
  // Work queued on streams for this communicator (enqueueOnStream), shared with that work.
  std::shared_ptr<braid::QueuedWork> queuedWork = std::make_shared<braid::QueuedWork>();
  std::string lastError;
  std::string broken;  // why the communicator became unusable, once a call failed mid-way
  // and the result code it failed with (read without the lock: braidCommGetAsyncError)
  std::atomic<braidResult_t> brokenCode{braidSuccess};
  // braidCommAbort: every wait of a call on this communicator ends at once (and those of a
  // non-blocking init: WaitAbortScope).
  std::atomic<bool> aborted{false};
  // Non-blocking init (braidConfig_t::blocking = 0): braidInProgress while initThread runs it,
  // then braidSuccess or init's error, whose message initError holds (written before the
  // state; read only once the state says init failed). braidSuccess for a blocking init.
  std::atomic<braidResult_t> initState{braidSuccess};
  std::string initError;
  std::thread initThread;  // joined by braidCommDestroy and braidCommAbort
  int blamed = -1;         // the rank the failed call blamed (ExecContext::blamed), for abandon()
  // API calls running on this communicator (any thread); braidCommAbort frees it only once
  // they have returned.
  std::atomic<int> inFlight{0};
  bool finalized = false;  // braidCommFinalize: only Destroy and GetAsyncError are left
  int cudaDevice = -1;     // the creating thread's CUDA device, -1 for a host communicator
  // Every rank shares this host (shared memory to each) and has a device (PeerCard::cudaIpc):
  // calls whose buffers are device memory run device to device (the CUDA IPC transport:
  // device pieces in place, copies and reductions on the device) instead of being staged.
  bool deviceDirect = false;
  // The device path's scratch and staging block (ExecContext::deviceScratch, deviceBlock).
  braid::DeviceBuffer deviceScratch, deviceBlock;
  // braidCommRegister's records (under mu), freed with the communicator.
  struct Registration {
    void* buff;
    size_t size;
  };
  std::vector<std::unique_ptr<Registration>> registrations;
  std::string forcedAlgo[braid::kNumCollectives];  // braidCommSetAlgorithm
  braid::tuning::AlgoSpec algoSpec;                // rank 0's BRAID_ALGO, parsed at init
  // Ops made by braidRedOpCreatePreMulSum: op value braidNumOps + index.
  struct PreMulSum {
    braidDataType_t dtype;
    std::vector<char> scalar;         // host-immediate value
    const void* scalarPtr = nullptr;  // "device" residence: read at each call
    bool live = false;
  };
  std::vector<PreMulSum> preMulSums;
  std::vector<char*> bases;  // executor buffer table, reused across calls
  // Compiled plans, each with its chosen algorithm, by (collective, count, dtype, op, root,
  // in place); cleared (clearPlans) when braidCommSetAlgorithm changes the choice, and when it
  // reaches 256 entries.
  using PlanKey = std::tuple<int, size_t, int, int, int, bool>;
  std::map<PlanKey, std::unique_ptr<braid::Plan>> plans;
  // The plan of the last call and its key: a loop of one call shape skips the map's lookup.
  PlanKey lastKey{};
  braid::Plan* lastPlan = nullptr;
  void clearPlans() {
    plans.clear();
    lastPlan = nullptr;
  }
  // braidCommRevoke: the rank that revoked this communicator first (here or by a message to
  // its control plane), -1 while it is not revoked. Every wait and every later call fails.
  std::atomic<int> revokedBy{-1};
  // Why it was revoked, where a rank found misuse or a failure (revokeWithReason); "" for
  // braidCommRevoke. Set once, under revokeMu, before revokedBy.
  mutable std::mutex revokeMu;
  std::string revokeReason;
  // braidCommSuspend (under mu): calls fail until braidCommResume, which reserves the device
  // buffers again at these sizes (0: not released).
  bool suspended = false;
  size_t suspendedScratch = 0, suspendedBlock = 0;
  std::atomic<uint64_t> shrinks{0};  // braidCommShrink calls so far: each agreement's epoch
  // braidCommParentRanks: each rank's rank in the communicator this one was made from (shrink,
  // grow, split; -1 for a rank that joined through grow); empty for the identity.
  std::vector<int> parentRanks;
  // One-sided calls (braid_rma.h, window.cc): windows by id (each rank's k-th registration is
  // id k), and signals by (peer, sigIdx): how many arrived, how many waits consumed.
  struct Rma {
    std::mutex mu;
    std::condition_variable cv;
    uint32_t nextId = 1;
    std::map<uint32_t, struct braidWindow*> windows;
    std::map<std::pair<int, int>, uint64_t> arrived, consumed;
  };
  Rma rma;
  // The flight recorder (trace.h): this rank's, shared with the communicators split, shrunk or
  // grown from this one; null with BRAID_TRACE=off. commHash names this communicator in it (the
  // same on every rank: its unique id's hash), parentHash the one it was made from (0: none),
  // with the split's colour and key (-1: not a split); worldRanks each rank's rank in the
  // communicator the recorder was made for. stepTimes: BRAID_TRACE=steps' per-step times of
  // the running call (under mu). traceDumped: a failed call has written the dump already.
  std::shared_ptr<braid::trace::Recorder> recorder;
  uint64_t commHash = 0, parentHash = 0;
  int splitColor = -1, splitKey = -1;
  std::vector<int> worldRanks;
  std::vector<braid::trace::StepTimes> stepTimes;
  std::atomic<bool> traceDumped{false};
  // The control plane (null for one rank); declared last, so that its thread, which revokes
  // this communicator and lands puts in its windows, stops before anything else of it goes.
  std::unique_ptr<braid::ControlPlane> control;
};

namespace braid {
// An API call running on a communicator, counted for braidCommAbort, which frees the
// communicator only once every such call has returned.
class InFlight {
 public:
  explicit InFlight(braidComm* comm) : comm_(comm) { comm_->inFlight.fetch_add(1); }
  ~InFlight() { comm_->inFlight.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  braidComm* comm_;
};

// braidInvalidArgument naming `fn` when comm is NULL or not a live communicator (destroyed, or
// not one at all: its magic word does not match), else braidSuccess.
braidResult_t checkCommHandle(const braidComm* comm, const char* fn);
// checkCommHandle, and comm is ready: braidInvalidArgument while its non-blocking init runs
// (as NCCL's ncclCommEnsureReady), init's own error if that failed.
braidResult_t checkComm(const braidComm* comm, const char* fn);
// The caller's value as an int: one outside the enumeration's range (datatype 42, op -1) is
// not a value of its type, and loading it as one is undefined behaviour (UBSan's -fsanitize=enum).
template <typename Enum>
int rawValue(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}
// Refuses a config not made by BRAID_CONFIG_INITIALIZER or with bad Braid fields; fn names
// the call in the message. NULL is valid (the defaults).
braidResult_t checkConfig(const braidConfig_t* config, const char* fn);
// The config of a communicator made from comm (split, shrink, grow): config's fields, where
// set, else comm's timeoutSec, stallWarnSec and checkCalls; always blocking. config has been
// checked (checkConfig) and may be NULL.
braidConfig_t childConfig(const braidComm* comm, const braidConfig_t* config);
// Returns once the work queued on comm's streams has run. close (braidCommDestroy): then
// closes the queue, so a captured call that a CUDA graph replays later leaves comm alone,
// and waits for a replay that is running now (captured calls are never pending).
void waitForQueuedWork(braidComm* comm, bool close);
// braidInvalidUsage naming fn where comm was revoked, else braidSuccess.
braidResult_t checkNotRevoked(const braidComm* comm, const char* fn);
// The control thread's part of a put or signal (window.cc): the data of meta's range read
// from fd into the window, then the signal counted, then a one-byte answer (1 done, 0 refused).
void applyPut(braidComm* comm, int fd, int from, const std::vector<int32_t>& meta);
// Frees comm's windows (braidCommDestroy, braidCommAbort).
void freeWindows(braidComm* comm);
// Marks comm revoked by rank `by` (once; later calls do nothing), wakes its waiting calls and
// forwards the revocation to every peer but `by` (braidCommRevoke).
void revokeLocally(braidComm* comm, int by, const std::string& reason = "");
// comm's revokeReason ("" when none).
std::string revokeReasonOf(const braidComm* comm);
// config may be null (the environment's settings); it has been checked.
// True inside braidGroupStart/End on the calling thread (collectives are deferred there).
bool insideGroup();
braidResult_t commInit(braidComm_t* out, int nranks, const braidUniqueId& id, int rank,
                       const braidConfig_t* config = nullptr);
// Non-blocking init (config->blocking = 0): allocates the communicator, sets *out, starts the
// rest of commInit on comm->initThread and returns braidInProgress (braidSystemError, *out
// untouched, if the thread cannot start). The arguments have been checked.
braidResult_t commInitAsync(braidComm_t* out, int nranks, const braidUniqueId& id, int rank,
                            const braidConfig_t& config);
// braidCommSplit, where `prior` may carry the caller's own failure (a code, its message in
// lastError()): this rank still takes part in the exchange and fails with it, and its peers
// fail naming it (ncclCommSplit with a bad ncclConfig_t).
braidResult_t commSplit(braidComm* comm, int color, int key, braidComm_t* newcomm,
                        const braidConfig_t* config, braidResult_t prior);
// braidCommSplit after its argument checks: `local` is this rank's failure so far
// (braidSuccess, or a code with its message in lastError()); the rank takes part in the
// exchange either way, and every rank fails, naming the failed ranks, if any did.
braidResult_t splitComm(braidComm* comm, int color, int key, braidComm_t* newcomm,
                        const braidConfig_t* config, braidResult_t local);
// BRAID_CHECK: the ranks compare this call (collective, count, datatype, and op and root
// where they matter) through an all-gather; where they differ every rank returns
// braidInvalidUsage with a message listing each rank's call.
braidResult_t checkCallsMatch(braidComm* comm, const CollArgs& args);
// Runs one collective on comm now (the caller holds no lock). args.op is a built-in op.
// userCall: set for BRAID_CHECK's exchange before that call, which then stands for it in the
// rank's published position (its kind; not finished when the exchange is). device: the
// buffers are device memory, on a communicator that is deviceDirect (ExecContext::device).
// fingerprint (with userCall): the exchange is a count-0 call's (exchangeFingerprint), whose
// messages carry this call tag.
braidResult_t runCollective(braidComm* comm, const CollArgs& args, const void* sendbuff,
                            void* recvbuff, const CollArgs* userCall = nullptr, bool device = false,
                            uint32_t fingerprint = 0);

// Publishes this rank's last error as the message of a call of `kind` (stallKindLabel) that
// it refused before the call started (its own arguments), numbered as its next call, for the
// ranks of its host that wait on it (CallPosition::refusalOf). Not where that number is not
// known yet: inside a group, on a stream, or while calls queued on a stream are pending. No-op
// without a segment (one rank). Takes comm->mu.
void publishRefusal(braidComm* comm, uint32_t kind, braidStream_t stream);

// One point-to-point operation of a group.
struct P2POp {
  bool isSend;
  int peer;
  void* buff;
  size_t bytes;
};
// Runs a batch of sends and receives on comm as one fused schedule: every queue progresses
// at once, so no order of posting can deadlock; messages to one peer keep posting order.
// device: every buffer is device memory, on a deviceDirect communicator.
braidResult_t runP2P(braidComm* comm, const std::vector<P2POp>& ops, bool device = false);

// This process's BRAID_ALGO, or NCCL_ALGO translated to it when BRAID_ALGO is unset (names
// Braid lacks dropped with one warning): the text a rank puts in its card. commInit parses
// rank 0's on every rank (braidComm::algoSpec), so all ranks force alike, and a spec that
// does not parse fails init on every rank with the same message.
const std::string& envAlgoText();
// NCCL_ALGO's names that are neither Braid's nor NCCL's (comma list; "" for none).
const std::string& envAlgoUnknown();

// The algorithm for args on comm: braidCommSetAlgorithm's, else BRAID_ALGO's (per size
// range), else the cost model's least predicted time (tuning/cost_model.h). Fails, naming the
// algorithm and why, if the forced one cannot run args.
braidResult_t chooseAlgorithm(const braidComm* comm, const CollArgs& args,
                              const AlgorithmInfo** out);
// Queues work for comm on stream, counted so braidCommDestroy can wait for it.
braidResult_t enqueueOnStream(braidComm* comm, braidStream_t stream,
                              std::function<braidResult_t()> work);
// The same for work that drives several communicators (a group's share of one stream).
braidResult_t enqueueOnStream(const std::vector<braidComm*>& comms, braidStream_t stream,
                              std::function<braidResult_t()> work);
// The flight recorder's side of a communicator (trace_comm.cc). startRecording: at the end of
// init, the recorder made for this communicator (the rank's root) and its entry. inheritRecorder:
// a communicator made from parent (split with colour and key, shrink, grow: -1) records into
// the parent's recorder instead, its ranks mapped to the root's.
void startRecording(braidComm* comm);
void inheritRecorder(braidComm* child, const braidComm* parent, int color, int key);
// A call starts (its number taken, under comm->mu): its record, and the step table ctx fills
// with BRAID_TRACE=steps.
void traceCallBegin(braidComm* comm, const trace::CallInfo& call, uint32_t steps, ExecContext* ctx);
// The call ended with res: its record says so; the first failed call of comm writes the dump
// (BRAID_TRACE_DIR), and under braidrun asks it to have every rank dump. Returns res.
braidResult_t traceCallEnd(braidComm* comm, const ExecContext& ctx, braidResult_t res);
// Writes comm's rank's dump now (reason: timeout, abort, error, signal, api); *path: the file.
braidResult_t dumpTrace(braidComm* comm, const char* reason, const std::string& detail,
                        std::string* path);
// Marks comm unusable after a failed exchange (its connections hold partial messages).
braidResult_t markBroken(braidComm* comm, braidResult_t res);
}  // namespace braid
