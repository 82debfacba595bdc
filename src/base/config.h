// Environment configuration, read once per process. The compat layer's NCCL_ names are
// honoured where a BRAID_ name is unset.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"

namespace braid {

struct Config {
  LogLevel debugLevel = LogLevel::kWarn;  // BRAID_DEBUG: WARN | INFO | TRACE | NONE
  std::string debugSubsys;                // BRAID_DEBUG_SUBSYS: comma list, ^ excludes; empty = all
  double timeoutSec = 300;                // BRAID_TIMEOUT: bound of every wait, seconds
  // BRAID_STALL_WARN: seconds a call may wait without progress before the rank logs what
  // it waits for (once per call); 0 turns the warning off.
  double stallWarnSec = 60;
  // BRAID_CHECK=1: before each collective the ranks compare their calls (collective, count,
  // datatype, op, root) and all fail with braidInvalidUsage, listing them, where they
  // differ. Rank 0's setting applies.
  bool checkCalls = false;
  // BRAID_CALL_CHECK: count-0 calls exchange their fingerprint; each rank keeps its calls'
  // (CallRecord) for a peer that waits on it to ask, and for the cause of misuse
  bool callCheck = true;
  // BRAID_CUDA_IPC (NCCL_P2P_DISABLE=1 is its 0): whether calls on device buffers of a
  // communicator whose ranks all share this host and each have a device go device to device
  // (the CUDA IPC transport) instead of through host memory. Off on any rank: off for all.
  bool cudaIpc = true;
  std::string socketIfname;       // BRAID_SOCKET_IFNAME (NCCL syntax)
  std::string hostId;             // BRAID_HOST_ID: overrides hostname + boot id
  std::string algo;               // BRAID_ALGO
  size_t buffSize = 2u << 20;     // BRAID_BUFFSIZE: shm bytes per peer connection
  size_t chunkSize = 128u << 10;  // BRAID_CHUNKSIZE: bytes per pipelined step
  bool chunkSizeSet = false;      // BRAID_CHUNKSIZE was given (else the comm picks)
  // Single copy within a host: steps of at least BRAID_SINGLE_COPY_BYTES to a rank of this
  // host are read by the receiver straight from the sender's buffer instead of going through
  // the shared FIFO (a copy in and a copy out). BRAID_SINGLE_COPY says between whom:
  // "shared" (the default: buffers from braidMemAllocHost, which the receiver maps once),
  // "threads" (also any buffer of a rank that is a thread of the same process: a plain copy
  // or reduction from the peer's buffer), "all" (also any buffer of another process, with
  // process_vm_readv), "off" (never). A send that goes single copy waits for its receiver,
  // and a rank whose call failed must keep its buffers until its peers have left. On
  // virtual machines process_vm_readv is slower than the FIFO's two copies.
  enum class SingleCopy { kOff, kShared, kThreads, kAll };
  SingleCopy singleCopy = SingleCopy::kShared;
  // BRAID_STREAM_STORES: whether receives of 64 KiB or more write the receive buffer with
  // streaming (non-temporal) stores: "auto" (the default) when the call's buffers on this
  // machine outgrow the last-level cache, "on" always, "off" never.
  enum class StreamStores { kAuto, kOn, kOff };
  StreamStores streamStores = StreamStores::kAuto;
  // BRAID_CACHE_BYTES: the last-level cache Braid assumes when it asks whether a call's
  // buffers outgrow it (streaming stores, single copy from braidMemAllocHost buffers);
  // 0: what sysfs says for cpu 0, else glibc up to 32 MiB (assumedCacheBytes).
  size_t cacheBytes = 0;
  size_t singleCopyBytes = 0;  // BRAID_SINGLE_COPY_BYTES; 0: 64K for shared, 1M for the rest
  std::string transport;       // BRAID_TRANSPORT: "" (shm within a host, tcp across), shm, tcp, ucx
  int nsocksPerPeer = 2;       // BRAID_NSOCKS_PERPEER: tcp sockets per peer and direction, 1..16
  std::string tuneTable;       // BRAID_TUNE_TABLE: braid-tune --json's table (rank 0's)
  std::string tuneFile;        // BRAID_TUNE_FILE: braid-tune --calibrate's link figures (rank 0's)
  std::string ring;            // BRAID_RING: the ranks' ring order ("0 2 1 3"); empty: from layout
  std::string topoFile;        // BRAID_TOPO_FILE: NCCL or hwloc XML used instead of detection
  std::string topoDumpFile;    // BRAID_TOPO_DUMP_FILE: where rank 0 writes its view (NCCL XML)

  bool subsysEnabled(const char* subsys) const;
};

const Config& config();

// One environment variable's value, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char* name)>;
// The variable each setting's value was taken from, by setting name: "BRAID_BUFFSIZE" ->
// "NCCL_BUFFSIZE" when only NCCL's name was set. A setting that is absent has its default:
// nothing was set, or what was set was refused (and warned about).
using SettingSources = std::map<std::string, std::string>;

// A value that reads as its setting's type but lies outside what Braid accepts
// ("BRAID_NSOCKS_PERPEER=0", "NCCL_CHUNKSIZE=16", "BRAID_TIMEOUT=-1"). configFrom keeps the
// default for it, as for a malformed one, and init refuses it (checkSettings): a typo is
// NCCL's to forgive, but a number the user chose and Braid cannot honour would run every
// layout with another value than the one asked for.
struct RefusedSetting {
  std::string var;    // as the user set it: BRAID_X, or NCCL_X when only that one was set
  std::string value;  // the variable's text
  std::string why;    // "is not a whole number in [1, 16]"
};
using RefusedSettings = std::vector<RefusedSetting>;

// The configuration an environment gives, as config() reads the process's own. warn: report
// refused values on stderr (config() does, once a process); from (if given): where each
// taken value came from; outOfRange (if given): the values refused although well-formed.
Config configFrom(const EnvLookup& env, bool warn = false, SettingSources* from = nullptr,
                  RefusedSettings* outOfRange = nullptr);
// Where config()'s values came from (the environment as config() first read it).
const SettingSources& configSources();
// The values config() refused although well-formed (configFrom's outOfRange).
const RefusedSettings& configOutOfRange();
// The variable the user set for `setting` ("NCCL_SOCKET_IFNAME" when only NCCL's name was set),
// for messages about its value; the setting's own name when neither was set.
std::string settingVar(const std::string& setting);

// The bound of waits on this thread, in seconds: a communicator's own timeout while its init
// runs here (WaitTimeoutScope), else BRAID_TIMEOUT.
double waitTimeoutSec();
class WaitTimeoutScope {
 public:
  explicit WaitTimeoutScope(double seconds);  // 0: BRAID_TIMEOUT
  ~WaitTimeoutScope();
  WaitTimeoutScope(const WaitTimeoutScope&) = delete;
  WaitTimeoutScope& operator=(const WaitTimeoutScope&) = delete;

 private:
  double saved_;
};

// The abort flag of the communicator whose non-blocking init runs on this thread
// (WaitAbortScope), else none: the socket waits of that init (base/socket.h, the bootstrap, the
// tcp backend's connect) poll it at least every kAbortPollMs and end with braidInvalidUsage
// once it is set, so braidCommAbort stops the init promptly.
constexpr int kAbortPollMs = 20;
const std::atomic<bool>* waitAbortFlag();
bool waitAborted();  // the flag is set
class WaitAbortScope {
 public:
  explicit WaitAbortScope(const std::atomic<bool>* flag);
  ~WaitAbortScope();
  WaitAbortScope(const WaitAbortScope&) = delete;
  WaitAbortScope& operator=(const WaitAbortScope&) = delete;

 private:
  const std::atomic<bool>* saved_;
};

// The last-level cache Braid assumes where BRAID_CACHE_BYTES is unset, in bytes, from what
// the machine says: sysfsBytes, the largest cache level sysfs lists for cpu 0 (what one core
// shares; 0: none listed), else cpuidBytes, glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) (<= 0:
// unknown), at most kUnlistedCacheBytes, else kUnlistedCacheBytes.
// sysfs comes first because glibc reports the whole package's L3 on some virtual machines
// (384 MiB for a 32 MiB L3). Where sysfs lists nothing, sysconf's figure is the CPUID that a
// hypervisor made up: 508 MiB on a 2-vCPU AMD EPYC guest whose host has 32 MiB per CCD. Taken
// as is, every call there counted as fitting in cache: no streaming stores and no single copy
// from braidMemAllocHost buffers at any size (2 ranks, 64 and 256 MiB, best of 5 interleaved
// runs: 3-5% less busbw on heap buffers, 17-20% less on braidMemAllocHost ones).
constexpr size_t kUnlistedCacheBytes = size_t{32} << 20;  // one CCD's L3, AMD EPYC Zen 3/4
size_t assumedCacheBytes(size_t sysfsBytes, long cpuidBytes);

// BRAID_<name>, else NCCL_<name>, else nullptr.
const char* getEnv(const char* name);

// A byte count as every Braid setting and tool writes it: decimal digits and an optional
// 1024-based suffix K, M, G or T (also lower case, and KB/KiB, MB/MiB, GB/GiB, TB/TiB, or B
// alone): "1536", "64K", "1M", "2G", "1T". false, leaving *out alone, when malformed or
// past SIZE_MAX.
bool parseByteSize(const std::string& text, size_t* out);

}  // namespace braid
