#include "core/comm.h"

#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/config.h"
#include "base/error.h"
#include "base/host_mem.h"
#include "base/socket.h"
#include "core/bootstrap.h"
#include "core/call_check.h"
#include "core/settings_check.h"
#include "core/stream.h"
#include "device/device.h"
#include "topology/placement.h"
#include "transport/net.h"
#include "tuning/cost_model.h"

namespace braid {

braidResult_t checkCommHandle(const braidComm* comm, const char* fn) {
  if (!comm) return fail(braidInvalidArgument, "%s: comm is NULL", fn);
  if (comm->magic != braidComm::kMagic)
    return fail(braidInvalidArgument, "%s: comm is not a live communicator (destroyed?)", fn);
  return braidSuccess;
}

braidResult_t checkComm(const braidComm* comm, const char* fn) {
  BRAID_TRY(checkCommHandle(comm, fn));
  const braidResult_t state = comm->initState.load(std::memory_order_acquire);
  if (state == braidSuccess) return braidSuccess;
  if (state == braidInProgress)
    return fail(braidInvalidArgument,
                "%s: the communicator's init is still in progress (non-blocking); poll "
                "braidCommGetAsyncError until it returns braidSuccess",
                fn);
  return fail(state, "%s: the communicator's non-blocking init failed: %s", fn,
              comm->initError.c_str());
}

namespace {

// The default pipelining grain of a communicator with network peers (NCCL's socket
// transport moves 512 KiB steps as well: 4 MiB buffers of 8 steps).
constexpr size_t kNetChunkBytes = 512u << 10;

// How this rank reaches peer r, by rank 0's BRAID_TRANSPORT: shared memory within a host,
// the network across hosts; "tcp" or "ucx" put every peer on the network (one host too),
// "shm" refuses other hosts.
braidResult_t pickTransport(const braidComm& comm, int r, const std::string& rule, bool* net,
                            std::string* why) {
  const PeerCard& me = comm.peers[comm.rank];
  const PeerCard& p = comm.peers[r];
  const bool sameHost = p.hostId == me.hostId;
  if (rule == "shm") {
    if (!sameHost)
      return fail(braidInvalidUsage,
                  "init: BRAID_TRANSPORT=shm (rank 0's setting) but rank %d is on host \"%s\" and "
                  "this rank on \"%s\": shared memory cannot reach another host (unset "
                  "BRAID_TRANSPORT, or give every rank the same BRAID_HOST_ID)",
                  r, p.hostId.c_str(), me.hostId.c_str());
    *net = false;
    *why = "BRAID_TRANSPORT=shm";
  } else if (!rule.empty()) {
    *net = true;
    *why = "BRAID_TRANSPORT=" + rule;
  } else {
    *net = !sameHost;
    *why = sameHost ? "same host " + me.hostId : "host " + p.hostId + " is not " + me.hostId;
  }
  return braidSuccess;
}

// A random number drawn once per process, sent in the cards.
uint64_t processToken() {
  static const uint64_t token = [] {
    uint64_t t = 0;
    if (randomBytes(&t, sizeof(t)) != braidSuccess)
      t = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return t;
  }();
  return token;
}

// Whether the card's rank is a thread of this process. A pid alone does not say so: ranks in
// other pid namespaces share pids.
bool sameProcess(const PeerCard& p) {
  return p.pid == static_cast<int>(getpid()) && p.procToken == processToken();
}

// Whether this process can read rank r's memory (single copy): r itself, or a process whose
// own mapping of its segment (at the address its card gives) reads back, through
// process_vm_readv, as this process's mapping of it does. Fails where ptrace rules forbid it
// (another user, Yama's ptrace_scope, a container without the capability); *why says so.
bool canReadPeer(const braidComm& comm, int r, std::string* why) {
  const PeerCard& p = comm.peers[r];
  if (sameProcess(p)) {
    *why = "a thread of this process";
    return true;
  }
  if (config().singleCopy != Config::SingleCopy::kAll) {
    // On virtual machines process_vm_readv often moves half of what memcpy does (page
    // pinning under nested paging): slower than the FIFO's two copies on two cores.
    *why = "another process; BRAID_SINGLE_COPY=all would read it with process_vm_readv";
    return false;
  }
  char theirs[64], ours[64];
  std::memcpy(ours, comm.peerSegments[r]->base(), sizeof(ours));
  iovec local{theirs, sizeof(theirs)};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(p.shmAddr)), sizeof(theirs)};
  const ssize_t got = process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
  if (got != static_cast<ssize_t>(sizeof(theirs))) {
    *why = std::string("process_vm_readv refused: ") + (got < 0 ? strerror(errno) : "short read");
    return false;
  }
  if (std::memcmp(theirs, ours, sizeof(ours)) != 0) {
    *why = "process_vm_readv read other bytes than the segment holds";
    return false;
  }
  *why = "process_vm_readv";
  return true;
}

// Whether this process can map rank r's braidMemAllocHost allocations: r is a thread of it,
// or a process whose probe descriptor this one can open through /proc (host_mem.h).
bool canMapPeer(const braidComm& comm, int r, std::string* why) {
  const PeerCard& p = comm.peers[r];
  if (sameProcess(p)) {
    *why = "a thread of this process";
    return true;
  }
  return hostmem::canMapPeer(p.pid, p.memProbe, p.procToken, why);
}

// The shared-memory connection to same-host peer r; single copy where BRAID_SINGLE_COPY
// allows it and this rank can map or read r's memory.
braidResult_t connectShm(braidComm* comm, int r) {
  BRAID_TRY(ShmSegment::open(comm->peers[r].shmName, &comm->peerSegments[r]));
  const ShmSegment& peerSeg = *comm->peerSegments[r];
  auto conn = std::make_unique<FifoConnection>(
      "shm", peerSeg.fifo(comm->rank), peerSeg.slots(), peerSeg.slotBytes(), comm->segment->fifo(r),
      comm->segment->slots(), comm->segment->slotBytes(), peerSeg.doorbell());
  conn->pollsCells();  // r's FifoConnection fills this rank's FIFO from r
  // The smallest step that goes single copy: from braidMemAllocHost buffers, a ring's
  // 128 KiB pieces; from other memory 1 MiB, since below it the sender, which then waits
  // for its receiver, loses more than the copy saves (2 thread ranks, 128 KiB-2 MiB: 9-12
  // GB/s at 64 KiB against 16-18 at 1 MiB).
  const size_t given = config().singleCopyBytes;
  const size_t sharedMin = given ? given : size_t{64} << 10;
  const size_t single = given ? given : size_t{1} << 20;
  if (config().singleCopy != Config::SingleCopy::kOff) {
    // Sends from braidMemAllocHost buffers go in place once r says it maps them.
    conn->offerSharedSends(sharedMin);
    std::string why;
    const bool maps = canMapPeer(*comm, r, &why);
    if (maps) conn->mapsFrom(comm->peers[r].pid);
    BRAID_INFO("INIT", "rank %d <- rank %d: %s braidMemAllocHost buffers (%s)", comm->rank, r,
               maps ? "reads in place from its" : "copies through shared memory from its",
               why.c_str());
  }
  if (config().singleCopy == Config::SingleCopy::kThreads ||
      config().singleCopy == Config::SingleCopy::kAll) {
    // Sends to r go in place once r says it reads them (its own probe of this rank).
    conn->offerSingleCopy(single);
    std::string why;
    const bool pull = canReadPeer(*comm, r, &why);
    if (pull) conn->pullFrom(comm->peers[r].pid);
    BRAID_INFO("INIT", "rank %d <- rank %d: %s (%s)", comm->rank, r,
               pull ? "reads its large pieces from its memory (single copy)"
                    : "copies through shared memory",
               why.c_str());
  }
  // Device pieces of r go in place once this rank says it reads them: where this rank's
  // device can read r's (the same device, or peer access); else r copies them through the
  // FIFO's host memory.
  if (comm->peers[comm->rank].cudaIpc && comm->peers[r].cudaIpc) {
    std::string why;
    const bool same = sameProcess(comm->peers[r]);
    bool reach = device::runtime().reachPeer(comm->peers[r].busId, &why);
    if (reach && !same && comm->segment->slotBytes() < sizeof(device::IpcRef)) {
      reach = false;
      why = "cells of " + std::to_string(comm->segment->slotBytes()) +
            " bytes (BRAID_CHUNKSIZE) cannot hold a CUDA IPC handle";
    }
    if (reach) conn->opensDeviceFrom(same);
    BRAID_INFO("INIT", "rank %d <- rank %d: %s its device memory (%s)", comm->rank, r,
               reach ? "reads in place from" : "copies through host memory from", why.c_str());
  }
  comm->connections[r] = std::move(conn);
  return braidSuccess;
}

// Starts the network backend, swaps handles with every rank and connects the network peers.
braidResult_t connectNetwork(braidComm* comm, Bootstrap* boot, const std::string& backendName,
                             const std::vector<char>& remote, bool anyNet, const UniqueIdData& id) {
  std::unique_ptr<NetBackend> backend;
  if (anyNet) {
    if (backendName == "ucx")
      BRAID_TRY(createUcxBackend(comm->rank, comm->nranks, &backend));
    else
      BRAID_TRY(createTcpBackend(comm->rank, comm->nranks, id.secret, &backend,
                                 comm->peers[0].nsocks));  // rank 0's, like its transport
  }
  // Every rank takes part in the round, even one without network peers.
  std::vector<std::string> handles;
  BRAID_TRY(boot->allGather(backend ? backend->handle() : std::string(), &handles));
  if (!backend) return braidSuccess;
  const PeerCard& me = comm->peers[comm->rank];
  for (int r = 0; r < comm->nranks; ++r) {
    if (!remote[r]) continue;
    // Loopback is never used between machines: it would reach the wrong host.
    if (backendName == "tcp" && handles[r].rfind("127.", 0) == 0 &&
        comm->peers[r].machineId != me.machineId)
      return fail(braidInvalidUsage,
                  "init: rank %d listens on loopback (%s) but runs on another machine (%s); set "
                  "%s to an interface both hosts share",
                  r, handles[r].c_str(), comm->peers[r].machineId.c_str(),
                  settingVar("BRAID_SOCKET_IFNAME").c_str());
  }
  BRAID_TRY(backend->connect(handles, remote, deadlineAfter(waitTimeoutSec())));
  const int slots = static_cast<int>(std::clamp<size_t>(
      std::max<size_t>(config().buffSize / comm->chunkSize, 2 * comm->peers[0].nsocks), 4, 64));
  const size_t slotBytes = (comm->chunkSize + kFifoLine - 1) / kFifoLine * kFifoLine;
  comm->proxy = std::make_unique<NetProxy>(std::move(backend), comm->rank,
                                           comm->segment->doorbell(), slots, slotBytes);
  for (int r = 0; r < comm->nranks; ++r)
    if (remote[r]) comm->connections[r] = comm->proxy->addPeer(r);
  return comm->proxy->start();
}

// BRAID_TOPO_FILE replaces detection: load it and say what it holds; one that does not load is
// a setting that fails (*settingsError, naming it), not an error of this call.
// BRAID_TOPO_DUMP_FILE: rank 0 writes its view (the file's, else detection's) as NCCL XML.
braidResult_t loadTopology(braidComm* comm, std::string* settingsError) {
  const Config& cfg = config();
  if (cfg.topoFile.empty() && (cfg.topoDumpFile.empty() || comm->rank != 0)) return braidSuccess;
  auto sys = std::make_unique<topo::System>();
  if (!cfg.topoFile.empty()) {
    if (topo::loadTopologyFile(cfg.topoFile, sys.get()) != braidSuccess) {
      settingFailed("BRAID_TOPO_FILE", cfg.topoFile);
      *settingsError = lastError();
      return braidSuccess;
    }
    BRAID_INFO("TOPO", "topology from BRAID_TOPO_FILE=%s: %zu NUMA nodes, %zu GPUs, %zu NICs",
               cfg.topoFile.c_str(), sys->cpus.size(), sys->gpus.size(), sys->nics.size());
  } else {
    BRAID_TRY(topo::detectSystem(sys.get()));
  }
  if (logEnabled(LogLevel::kInfo) && comm->rank == 0) {
    std::string text = topo::toText(*sys);
    BRAID_INFO("TOPO", "layout:\n%s", text.c_str());
  }
  if (!cfg.topoDumpFile.empty() && comm->rank == 0) {
    std::string xml;
    BRAID_TRY(topo::dumpNcclTopoXml(*sys, &xml));
    FILE* f = std::fopen(cfg.topoDumpFile.c_str(), "w");
    if (!f || std::fwrite(xml.data(), 1, xml.size(), f) != xml.size()) {
      if (f) std::fclose(f);
      return fail(braidSystemError, "BRAID_TOPO_DUMP_FILE=%s: cannot write: %s",
                  cfg.topoDumpFile.c_str(), strerror(errno));
    }
    std::fclose(f);
    BRAID_INFO("TOPO", "topology written to BRAID_TOPO_DUMP_FILE=%s", cfg.topoDumpFile.c_str());
  }
  comm->topology = std::move(sys);
  return braidSuccess;
}

// What the cost model assumes of this communicator's links until braid-tune's calibration
// is loaded: shared memory moves a few GB/s per rank pair with microseconds of latency (two
// copies through a FIFO; perf/ shows it), the network about a 10 Gb/s NIC with tens of
// microseconds of latency through the proxy thread.
void setDefaultFigures(tuning::Fabric* f) {
  f->intra = {2.0, 5.0};
  f->inter = {40.0, 1.25};
  f->reduce_gbs = 5.0;
  f->copy_gbs = 8.0;
  f->step_overhead_us = 1.0;
}

// The communicator's fabric: its layout and ring, and the default figures, or rank 0's
// BRAID_TUNE_FILE (braid-tune --calibrate) on every rank alike, so that all ranks choose the
// same algorithms.
braidResult_t commFabric(braidComm* comm) {
  tuning::Fabric& f = comm->fabric;
  f.hostOf = comm->hostOf;
  f.ring = comm->ring;
  setDefaultFigures(&f);
  f.chunk_bytes = comm->chunkSize;
  // Every rank must predict alike, so only what all ranks share goes in: rank 0's chunk and
  // BRAID_BUFFSIZE's default (a rank's own BRAID_BUFFSIZE is not sent with the cards).
  f.fifo_slots = static_cast<int>(std::max<size_t>(2, (size_t{2} << 20) / comm->chunkSize));
  if (!tuning::MeasuredTable::decode(comm->peers[0].table, &comm->measured))
    return fail(braidInternalError, "rank 0's BRAID_TUNE_TABLE rows do not decode");
  if (comm->rank == 0 && !comm->measured.entries.empty())
    BRAID_INFO("TUNING", "%zu measured rows from BRAID_TUNE_TABLE take precedence over the model",
               comm->measured.entries.size());
  std::string tune = comm->peers[0].tune;
  if (tune.empty()) return braidSuccess;
  std::replace(tune.begin(), tune.end(), ';', '\n');
  BRAID_TRY(tuning::parseCalibration(tune, "rank 0's BRAID_TUNE_FILE (as sent)", &f));
  if (comm->rank == 0)
    BRAID_INFO("TUNING", "calibration from BRAID_TUNE_FILE: %s", f.describe().c_str());
  return braidSuccess;
}

// Rank 0's BRAID_ALGO on every rank, so that all force the same algorithms: every rank parses
// the same text, so a spec that does not parse fails init everywhere alike (no rank is left
// waiting for one that left), naming the item.
braidResult_t commAlgoSpec(braidComm* comm) {
  const std::string& spec = comm->peers[0].algo;
  if (comm->rank != 0 && spec != comm->peers[comm->rank].algo)
    BRAID_WARN("INIT", "BRAID_ALGO=\"%s\" here but \"%s\" on rank 0: rank 0's applies",
               comm->peers[comm->rank].algo.c_str(), spec.c_str());
  if (tuning::parseAlgoSpec(spec, &comm->algoSpec) != braidSuccess) {
    const std::string why = lastError();
    return failVerbatim(braidInvalidArgument,
                        why + " (rank 0's BRAID_ALGO, which every rank applies)");
  }
  return braidSuccess;
}

// The ring of the ring and tree algorithms: rank 0's BRAID_RING, else the ranks grouped by
// host and NUMA node. Every rank computes it from the same cards (rank 0's spec, everyone's
// host and NUMA node), so all agree.
braidResult_t chooseRing(braidComm* comm) {
  std::vector<int> ring;
  const char* why = "BRAID_RING";
  // Rank 0's BRAID_RING applies: ranks that read different ones would build different rings
  // and wait on each other forever.
  const std::string& spec = comm->peers[0].ring;
  if (!spec.empty()) {
    BRAID_TRY(topo::parseRingSpec(spec, comm->nranks, &ring));
  } else {
    std::vector<int> numaOf;
    for (const PeerCard& p : comm->peers) numaOf.push_back(p.numa);
    ring = topo::commRing(comm->hostOf, numaOf);
    why = "ranks grouped by host, then NUMA node";
  }
  bool identity = true;
  for (int i = 0; i < comm->nranks; ++i) identity = identity && ring[i] == i;
  comm->ring = identity ? std::vector<int>() : ring;
  if (comm->rank == 0 && logEnabled(LogLevel::kInfo)) {
    std::string text;
    for (int r : ring) text += (text.empty() ? "" : " ") + std::to_string(r);
    BRAID_INFO("INIT", "ring: %s (%s%s)", text.c_str(), why, identity ? ", rank order" : "");
  }
  return braidSuccess;
}

}  // namespace

namespace {

// Everything of init after the communicator's allocation: comm's rank, nranks and cudaDevice
// are set. On failure comm is left half made, for the caller to delete.
braidResult_t commSetup(braidComm* comm, const braidUniqueId& id, const braidConfig_t* userConfig) {
  const int rank = comm->rank, nranks = comm->nranks;
  LogRankScope rankScope(rank);
  comm->timeoutSec =
      userConfig && userConfig->timeoutSec > 0 ? userConfig->timeoutSec : config().timeoutSec;
  comm->stallWarnSec = userConfig && userConfig->stallWarnSec >= 0 ? userConfig->stallWarnSec
                                                                   : config().stallWarnSec;
  WaitTimeoutScope initBound(comm->timeoutSec);
  UniqueIdData idData;
  BRAID_TRY(decodeUniqueId(id, &idData));
  // This rank's settings, checked whatever the layout (settings_check.h). A rank whose settings
  // fail still joins, and its card carries the reason: every rank then fails with it after the
  // exchange instead of waiting for one that left. Until then it opens nothing that the
  // settings steer (segment, sockets).
  tuning::Fabric calibrated;
  setDefaultFigures(&calibrated);
  tuning::MeasuredTable table;
  std::string settingsError;
  if (checkSettings(nranks, &calibrated, &table) != braidSuccess)
    settingsError = lastError();
  else
    BRAID_TRY(loadTopology(comm, &settingsError));
  const bool settingsOk = settingsError.empty();
  std::unique_ptr<Bootstrap> boot;
  BRAID_TRY(Bootstrap::join(id, rank, nranks, &boot));

  const Config& cfg = config();
  const int slots = static_cast<int>(cfg.buffSize / cfg.chunkSize);
  PeerCard mine;
  mine.hostId = localHostId();
  mine.machineId = localMachineId();
  mine.pid = getpid();
  mine.procToken = processToken();
  mine.memProbe = hostmem::probeFd(mine.procToken);
  mine.chunkSize = cfg.chunkSize;
  mine.chunkSizeSet = cfg.chunkSizeSet;
  mine.nsocks = cfg.nsocksPerPeer;
  mine.transport = cfg.transport;
  mine.numa = topo::currentNumaNode();
  mine.check =
      userConfig && userConfig->size == sizeof(braidConfig_t) && userConfig->checkCalls >= 0
          ? userConfig->checkCalls != 0
          : cfg.checkCalls;
  mine.fingerprints = cfg.callCheck;
  mine.cudaIpc =
      cfg.cudaIpc && comm->cudaDevice >= 0 && device::runtime().busId(&mine.busId) == braidSuccess;
  mine.ring = cfg.ring;  // newlines would split the card; they separate like spaces
  std::replace(mine.ring.begin(), mine.ring.end(), '\n', ' ');
  mine.algo = envAlgoText();
  std::replace(mine.algo.begin(), mine.algo.end(), '\n', ' ');
  mine.settingsError = settingsError;
  std::replace(mine.settingsError.begin(), mine.settingsError.end(), '\n', ' ');
  // Rank 0's tuning files (loaded by checkSettings) travel with its card.
  if (settingsOk && !cfg.tuneFile.empty() && rank == 0) {
    mine.tune = tuning::formatCalibration(calibrated);
    std::replace(mine.tune.begin(), mine.tune.end(), '\n', ';');
  }
  if (settingsOk && !cfg.tuneTable.empty() && rank == 0) {
    mine.table = table.encode();
    std::replace(mine.table.begin(), mine.table.end(), '\n', ' ');
  }
  if (nranks > 1 && settingsOk) {
    BRAID_TRY(ShmSegment::create(nranks, slots, cfg.chunkSize, mine.numa, &comm->segment));
    mine.shmName = comm->segment->name();
    mine.shmAddr = reinterpret_cast<uintptr_t>(comm->segment->base());
  }
  // Rank 0's stall board (stall.h): diagnosis only, so a rank 0 that cannot listen says so and
  // goes on without it; none (no listening socket) when its stall warnings are off.
  if (rank == 0 && nranks > 1 && comm->stallWarnSec > 0 && settingsOk) {
    if (StallBoard::createRoot(idData.secret, nranks, &comm->stallBoard) == braidSuccess)
      mine.stallAddr = comm->stallBoard->address();
    else
      BRAID_WARN("STALL", "init: no stall summary on rank 0: %s", lastError());
  }
  // The control plane (control.h): revocation and shrink's agreement, apart from the data
  // connections.
  if (nranks > 1 && settingsOk) {
    BRAID_TRY(ControlPlane::create(
        idData.secret, rank,
        [comm](int from, const std::string& reason) { revokeLocally(comm, from, reason); },
        &comm->control));
    comm->control->setPutHandler([comm](int fd, int from, const std::vector<int32_t>& meta) {
      applyPut(comm, fd, from, meta);
    });
    comm->control->setWhereHandler([comm](uint64_t n) { return comm->callRecord.read(n); });
    comm->peerCallCheck = makePeerCallCheck(comm);
    mine.ctrlAddr = comm->control->address();
  }
  std::vector<std::string> cards;
  BRAID_TRY(boot->allGather(mine.encode(), &cards));
  comm->peers.resize(nranks);
  std::vector<std::string> ctrlAddrs(nranks);
  for (int r = 0; r < nranks; ++r) {
    if (!PeerCard::decode(cards[r], &comm->peers[r]))
      return fail(braidInternalError, "init: malformed card from rank %d", r);
    ctrlAddrs[r] = comm->peers[r].ctrlAddr;
  }
  // A rank's settings that fail fail every rank: this rank's own reason first, else the first
  // rank's that has one.
  if (!settingsOk) return failVerbatim(braidInvalidArgument, settingsError);
  for (int r = 0; r < nranks; ++r) {
    const std::string& theirs = comm->peers[r].settingsError;
    if (theirs.empty()) continue;
    // Their text starts with their rank ("rank 2: "), as this rank's errors do.
    return fail(braidInvalidArgument, "init: rank %d's settings fail: %s", r, theirs.c_str());
  }
  if (comm->control) comm->control->setPeers(ctrlAddrs);

  // Every rank must pick the same transports and cut messages into the same pieces: rank
  // 0's BRAID_TRANSPORT and BRAID_CHUNKSIZE rule.
  const std::string& rule = comm->peers[0].transport;
  if (rule != cfg.transport)
    BRAID_WARN("INIT", "BRAID_TRANSPORT=\"%s\" here but \"%s\" on rank 0: rank 0's applies",
               cfg.transport.c_str(), rule.c_str());
  comm->peerSegments.resize(nranks);
  comm->connections.resize(nranks);
  comm->sendSeq.assign(nranks, 0);
  comm->recvSeq.assign(nranks, 0);
  // Which pairs go over the network: decided from the cards alone, so every rank agrees.
  std::vector<char> remote(nranks, 0);
  bool anyNet = false;
  for (int r = 0; r < nranks; ++r) {
    for (int q = 0; q < nranks && !anyNet; ++q) {
      if (q == r) continue;
      anyNet |= !rule.empty() ? rule != "shm" : comm->peers[q].hostId != comm->peers[r].hostId;
    }
  }
  // Without BRAID_CHUNKSIZE on rank 0: kNetChunkBytes once any pair crosses the network,
  // where each piece costs system calls and thread wake-ups; else the configured default.
  const PeerCard& first = comm->peers[0];
  comm->chunkSize =
      first.chunkSizeSet || !anyNet ? first.chunkSize : std::max(first.chunkSize, kNetChunkBytes);
  comm->chunkFixed = first.chunkSizeSet;
  const std::string backendName = rule == "ucx" ? "ucx" : "tcp";
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    bool net = false;
    std::string why;
    BRAID_TRY(pickTransport(*comm, r, rule, &net, &why));
    remote[r] = net;
    if (!net) BRAID_TRY(connectShm(comm, r));
    // A network peer on this machine: its segment too, where it publishes its position (the
    // stall summary) and, after a failure, the rank it blamed (its connection says only that
    // it closed). Best effort: another /dev/shm (a container) just goes without.
    if (net && comm->peers[r].machineId == comm->peers[rank].machineId &&
        !comm->peers[r].shmName.empty() &&
        ShmSegment::open(comm->peers[r].shmName, &comm->peerSegments[r], /*quiet=*/true) !=
            braidSuccess) {
      BRAID_INFO("INIT", "rank %d: no view of rank %d's segment (another /dev/shm?)", rank, r);
      comm->peerSegments[r].reset();
    }
    BRAID_INFO("INIT", "rank %d -> rank %d via %s (%s)", rank, r, net ? backendName.c_str() : "shm",
               why.c_str());
  }
  BRAID_TRY(connectNetwork(comm, boot.get(), backendName, remote, anyNet, idData));
  for (int r = 0; r < nranks; ++r)
    if (remote[r] && comm->peerSegments[r])
      if (auto* f = dynamic_cast<FifoConnection*>(comm->connections[r].get()))
        f->watchPeer(&callPosition(*comm->peerSegments[r])->gaveUp);
  for (auto& c : comm->connections) comm->connPtrs.push_back(c.get());
  // Hosts numbered by first appearance, for hierarchical algorithms.
  std::vector<std::string> hostNames;
  int local = 0;
  for (const PeerCard& p : comm->peers) {
    auto it = std::find(hostNames.begin(), hostNames.end(), p.hostId);
    comm->hostOf.push_back(static_cast<int>(it - hostNames.begin()));
    if (it == hostNames.end()) hostNames.push_back(p.hostId);
    // Pids mean something only on this machine; all its ranks share its cores. A network
    // peer that exits may still have pieces in flight: its connection, not its pid, says
    // when it is gone.
    const bool sameMachine = p.machineId == mine.machineId;
    const size_t r = comm->peerPids.size();
    comm->peerPids.push_back(sameMachine && !remote[r] ? p.pid : 0);
    local += sameMachine;
  }
  comm->nhosts = static_cast<int>(hostNames.size());
  comm->deviceDirect = nranks > 1 &&
                       std::all_of(comm->peers.begin(), comm->peers.end(),
                                   [](const PeerCard& p) { return p.cudaIpc; }) &&
                       std::none_of(remote.begin(), remote.end(), [](auto net) { return net; });
  if (comm->deviceDirect)
    BRAID_INFO("INIT",
               "rank %d: calls on device buffers run on the device, unstaged (CUDA IPC where "
               "the lines above say a peer's device memory is read in place)",
               rank);
  else if (comm->cudaDevice >= 0)
    BRAID_INFO("INIT", "rank %d: calls on device buffers are staged through host memory (%s)", rank,
               !mine.cudaIpc ? "BRAID_CUDA_IPC=0 or NCCL_P2P_DISABLE=1 here"
               : nranks == 1 ? "one rank"
                             : "a rank has BRAID_CUDA_IPC=0 or no device, or is on another host");
  comm->peerPositions.assign(nranks, nullptr);
  for (int r = 0; r < nranks; ++r)
    if (comm->peerSegments[r]) comm->peerPositions[r] = callPosition(*comm->peerSegments[r]);
  if (comm->stallBoard) {
    comm->stallBoard->setPositions(comm->peerPositions);
  } else if (rank != 0 && !comm->peers[0].stallAddr.empty()) {
    comm->stallBoard = StallBoard::forPeer(comm->peers[0].stallAddr, idData.secret);
  }
  BRAID_TRY(chooseRing(comm));
  BRAID_TRY(commFabric(comm));
  BRAID_TRY(commAlgoSpec(comm));
  // A rank with network peers has a busy second thread, its proxy.
  comm->oversubscribed = local * (comm->proxy ? 2 : 1) > sysconf(_SC_NPROCESSORS_ONLN);
  comm->localRanks = std::max(local, 1);
  comm->checkCalls = comm->peers[0].check;
  comm->fingerprints = comm->peers[0].fingerprints;
  // Once every rank has mapped every segment, the names can go: nothing stays in /dev/shm.
  BRAID_TRY(boot->barrier());
  if (comm->segment) comm->segment->unlink();
  boot->close();
  comm->commHash = trace::hashBytes(&id, sizeof id);
  startRecording(comm);
  BRAID_INFO("INIT", "communicator ready: rank %d of %d, %d host%s", rank, nranks, comm->nhosts,
             comm->nhosts == 1 ? "" : "s");
  return braidSuccess;
}

}  // namespace

braidResult_t commInit(braidComm_t* out, int nranks, const braidUniqueId& id, int rank,
                       const braidConfig_t* userConfig) {
  auto comm = std::make_unique<braidComm>();
  comm->cudaDevice = device::runtime().currentDevice(nullptr);
  comm->rank = rank;
  comm->nranks = nranks;
  BRAID_TRY(commSetup(comm.get(), id, userConfig));
  *out = comm.release();
  return braidSuccess;
}

braidResult_t commInitAsync(braidComm_t* out, int nranks, const braidUniqueId& id, int rank,
                            const braidConfig_t& userConfig) {
  auto comm = std::make_unique<braidComm>();
  comm->cudaDevice = device::runtime().currentDevice(nullptr);
  comm->rank = rank;
  comm->nranks = nranks;
  // The caller's config and id need not outlive the call: the thread has its own copies.
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  std::memcpy(&config, &userConfig, userConfig.size);  // a size checkConfig accepted
  config.size = sizeof config;
  comm->initState.store(braidInProgress, std::memory_order_relaxed);
  braidComm* c = comm.get();
  c->initThread = std::thread([c, id, config] {
    // braidCommAbort and braidCommDestroy set c->aborted: every wait of this init polls it.
    WaitAbortScope abortable(&c->aborted);
    const braidResult_t res = guardApi("braidCommInitRankConfig", [&]() -> braidResult_t {
      if (c->cudaDevice >= 0) BRAID_TRY(device::runtime().setDevice(c->cudaDevice));
      return commSetup(c, id, &config);
    });
    if (res != braidSuccess) c->initError = lastError();
    c->initState.store(res, std::memory_order_release);
  });
  *out = comm.release();
  return braidInProgress;
}

}  // namespace braid
