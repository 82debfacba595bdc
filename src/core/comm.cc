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

#include "core/bootstrap.h"
#include "core/config.h"
#include "core/device.h"
#include "core/error.h"
#include "core/host_mem.h"
#include "core/socket.h"
#include "core/stream.h"
#include "topology/placement.h"
#include "transport/net.h"
#include "tuning/cost_model.h"

namespace braid {

std::string PeerCard::encode() const {
  return hostId + "\n" + machineId + "\n" + std::to_string(pid) + "\n" + shmName + "\n" +
         std::to_string(chunkSize) + "\n" + (chunkSizeSet ? "1" : "0") + "\n" + transport + "\n" +
         std::to_string(nsocks) + "\n" + std::to_string(numa) + "\n" + tune + "\n" + table + "\n" +
         ring + "\n" + std::to_string(shmAddr) + "\n" + (check ? "1" : "0") + "\n" +
         std::to_string(procToken) + "\n" + stallAddr + "\n" + std::to_string(memProbe) + "\n";
}

bool PeerCard::decode(const std::string& text, PeerCard* out) {
  std::istringstream in(text);
  std::string pid, chunk, chunkSet, nsocks, numa, shmAddr, check, token, probe;
  if (!std::getline(in, out->hostId) || !std::getline(in, out->machineId) ||
      !std::getline(in, pid) || !std::getline(in, out->shmName) || !std::getline(in, chunk) ||
      !std::getline(in, chunkSet) || !std::getline(in, out->transport) ||
      !std::getline(in, nsocks) || !std::getline(in, numa) || !std::getline(in, out->tune) ||
      !std::getline(in, out->table) || !std::getline(in, out->ring) || !std::getline(in, shmAddr) ||
      !std::getline(in, check) || !std::getline(in, token) || !std::getline(in, out->stallAddr) ||
      !std::getline(in, probe))
    return false;
  out->memProbe = std::atoi(probe.c_str());
  out->procToken = std::strtoull(token.c_str(), nullptr, 10);
  out->check = check == "1";
  out->shmAddr = std::strtoull(shmAddr.c_str(), nullptr, 10);
  out->numa = std::atoi(numa.c_str());
  out->nsocks = std::atoi(nsocks.c_str());
  out->chunkSizeSet = chunkSet == "1";
  out->pid = std::atoi(pid.c_str());
  out->chunkSize = std::strtoull(chunk.c_str(), nullptr, 10);
  return true;
}

std::string localMachineId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

std::string localHostId() {
  if (!config().hostId.empty()) return config().hostId;
  return localMachineId();
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
                  "BRAID_SOCKET_IFNAME to an interface both hosts share",
                  r, handles[r].c_str(), comm->peers[r].machineId.c_str());
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

// BRAID_TOPO_FILE replaces detection: load it and say what it holds. BRAID_TOPO_DUMP_FILE:
// rank 0 writes its view (the file's, else detection's) as NCCL XML.
braidResult_t loadTopology(braidComm* comm) {
  const Config& cfg = config();
  if (cfg.topoFile.empty() && (cfg.topoDumpFile.empty() || comm->rank != 0)) return braidSuccess;
  auto sys = std::make_unique<topo::System>();
  if (!cfg.topoFile.empty()) {
    BRAID_TRY(topo::loadTopologyFile(cfg.topoFile, sys.get()));
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
// Marks a card field that carries rank 0's error instead of its value.
constexpr char kCardError = '\x01';

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
  for (const std::string* sent : {&comm->peers[0].tune, &comm->peers[0].table})
    if (!sent->empty() && (*sent)[0] == kCardError)
      return fail(braidInvalidArgument, "rank 0's tuning file: %s", sent->c_str() + 1);
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

braidResult_t commInit(braidComm_t* out, int nranks, const braidUniqueId& id, int rank,
                       const braidConfig_t* userConfig) {
  LogRankScope rankScope(rank);
  auto comm = std::make_unique<braidComm>();
  comm->cudaDevice = device::runtime().currentDevice(nullptr);
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutSec =
      userConfig && userConfig->timeoutSec > 0 ? userConfig->timeoutSec : config().timeoutSec;
  comm->stallWarnSec = userConfig && userConfig->stallWarnSec >= 0 ? userConfig->stallWarnSec
                                                                   : config().stallWarnSec;
  WaitTimeoutScope initBound(comm->timeoutSec);
  UniqueIdData idData;
  BRAID_TRY(decodeUniqueId(id, &idData));
  BRAID_TRY(loadTopology(comm.get()));
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
  mine.check = cfg.checkCalls;
  mine.ring = cfg.ring;  // newlines would split the card; they separate like spaces
  std::replace(mine.ring.begin(), mine.ring.end(), '\n', ' ');
  // Rank 0's tuning files travel with its card. A file it cannot use travels as its error
  // (kCardError first), so that every rank fails with the same message after the exchange
  // rather than waiting for a rank 0 that left.
  if (!cfg.tuneFile.empty() && rank == 0) {
    tuning::Fabric calibrated;
    setDefaultFigures(&calibrated);
    if (tuning::loadCalibration(cfg.tuneFile, &calibrated) == braidSuccess)
      mine.tune = tuning::formatCalibration(calibrated);
    else
      mine.tune = kCardError + std::string(lastError());
    std::replace(mine.tune.begin(), mine.tune.end(), '\n', ';');
  }
  if (!cfg.tuneTable.empty() && rank == 0) {
    tuning::MeasuredTable table;
    if (tuning::loadMeasuredTable(cfg.tuneTable, nranks, &table) == braidSuccess)
      mine.table = table.encode();
    else
      mine.table = kCardError + std::string(lastError());
    std::replace(mine.table.begin(), mine.table.end(), '\n', ' ');
  }
  if (nranks > 1) {
    BRAID_TRY(ShmSegment::create(nranks, slots, cfg.chunkSize, &comm->segment));
    mine.shmName = comm->segment->name();
    mine.shmAddr = reinterpret_cast<uintptr_t>(comm->segment->base());
  }
  // Rank 0's stall board (stall.h): diagnosis only, so a rank 0 that cannot listen says so and
  // goes on without it; none (no listening socket) when its stall warnings are off.
  if (rank == 0 && nranks > 1 && comm->stallWarnSec > 0) {
    if (StallBoard::createRoot(idData.secret, nranks, &comm->stallBoard) == braidSuccess)
      mine.stallAddr = comm->stallBoard->address();
    else
      BRAID_WARN("STALL", "init: no stall summary on rank 0: %s", lastError());
  }
  std::vector<std::string> cards;
  BRAID_TRY(boot->allGather(mine.encode(), &cards));
  comm->peers.resize(nranks);
  for (int r = 0; r < nranks; ++r)
    if (!PeerCard::decode(cards[r], &comm->peers[r]))
      return fail(braidInternalError, "init: malformed card from rank %d", r);

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
  const std::string backendName = rule == "ucx" ? "ucx" : "tcp";
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    bool net = false;
    std::string why;
    BRAID_TRY(pickTransport(*comm, r, rule, &net, &why));
    remote[r] = net;
    if (!net) BRAID_TRY(connectShm(comm.get(), r));
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
  BRAID_TRY(connectNetwork(comm.get(), boot.get(), backendName, remote, anyNet, idData));
  for (int r = 0; r < nranks; ++r)
    if (remote[r] && comm->peerSegments[r])
      if (auto* f = dynamic_cast<FifoConnection*>(comm->connections[r].get()))
        f->watchPeer(&comm->peerSegments[r]->position()->gaveUp);
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
  if (comm->stallBoard) {
    std::vector<const CallPosition*> positions(nranks, nullptr);
    for (int r = 0; r < nranks; ++r)
      if (comm->peerSegments[r]) positions[r] = comm->peerSegments[r]->position();
    comm->stallBoard->setPositions(std::move(positions));
  } else if (rank != 0 && !comm->peers[0].stallAddr.empty()) {
    comm->stallBoard = StallBoard::forPeer(comm->peers[0].stallAddr, idData.secret);
  }
  BRAID_TRY(chooseRing(comm.get()));
  BRAID_TRY(commFabric(comm.get()));
  // A rank with network peers has a busy second thread, its proxy.
  comm->oversubscribed = local * (comm->proxy ? 2 : 1) > sysconf(_SC_NPROCESSORS_ONLN);
  comm->localRanks = std::max(local, 1);
  comm->checkCalls = comm->peers[0].check;
  // Once every rank has mapped every segment, the names can go: nothing stays in /dev/shm.
  BRAID_TRY(boot->barrier());
  if (comm->segment) comm->segment->unlink();
  boot->close();
  BRAID_INFO("INIT", "communicator ready: rank %d of %d, %d host%s", rank, nranks, comm->nhosts,
             comm->nhosts == 1 ? "" : "s");
  *out = comm.release();
  return braidSuccess;
}

const char* collectiveLabel(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllGather:
      return "all-gather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kAllToAllv:
      return "all-to-all-v";
    case Collective::kGather:
      return "gather";
    case Collective::kScatter:
      return "scatter";
    case Collective::kBarrier:
      return "barrier";
  }
  return "collective";
}

namespace {

// BRAID_ALGO, parsed once per process (tuning::parseAlgoSpec's syntax); a bad spec fails every
// call that consults it, naming the problem.
// NCCL_ALGO (read when BRAID_ALGO is unset) in NCCL's spelling: "Ring", "Tree,Ring",
// "allreduce:tree;broadcast:ring" (2.24's per-collective form) or "^NVLS" (an exclusion).
// Names Braid has are kept, lower-cased; the others, and exclusions, are dropped with one
// warning, leaving those calls to the selector, as NCCL does with an algorithm it cannot use.
std::string fromNcclAlgo(const std::string& text) {
  std::string lower = text, kept, dropped;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!lower.empty() && lower[0] == '^') {
    BRAID_WARN("INIT", "NCCL_ALGO=\"%s\": exclusions are not supported; the selector decides",
               text.c_str());
    return "";
  }
  std::stringstream sections(lower);
  std::string section;
  while (std::getline(sections, section, ';')) {
    const size_t colon = section.find(':');
    const std::string prefix = colon == std::string::npos ? "" : section.substr(0, colon + 1);
    std::stringstream names(colon == std::string::npos ? section : section.substr(colon + 1));
    std::string name, list;
    while (std::getline(names, name, ',')) {
      name.erase(0, name.find_first_not_of(" \t"));  // "Ring, Tree": names without spaces
      name.erase(name.find_last_not_of(" \t") + 1);
      if (name.empty()) continue;
      const bool known = std::any_of(algorithms().begin(), algorithms().end(),
                                     [&](const AlgorithmInfo& a) { return name == a.name; });
      (known ? list : dropped) += (known ? (list.empty() ? "" : ",") : " ") + name;
    }
    if (!list.empty()) kept += (kept.empty() ? "" : ";") + prefix + list;
  }
  if (!dropped.empty())
    BRAID_WARN("INIT", "NCCL_ALGO=\"%s\": Braid has no%s; %s", text.c_str(), dropped.c_str(),
               kept.empty() ? "the selector decides" : ("using \"" + kept + "\"").c_str());
  return kept;
}

braidResult_t envAlgoSpec(const tuning::AlgoSpec** out) {
  static tuning::AlgoSpec spec;
  static braidResult_t rc = braidSuccess;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    const bool ncclName = !std::getenv("BRAID_ALGO") && std::getenv("NCCL_ALGO");
    rc = tuning::parseAlgoSpec(ncclName ? fromNcclAlgo(config().algo) : config().algo, &spec);
    if (rc != braidSuccess) error = lastError();
  });
  *out = &spec;
  if (rc != braidSuccess) return failVerbatim(rc, error);
  return braidSuccess;
}

std::string namesFor(Collective coll) {
  std::string names;
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == coll) names += std::string(names.empty() ? "" : ", ") + a.name;
  return names.empty() ? "none" : names;
}

}  // namespace

namespace {

// What every rank must agree on for one call (alltoallv's counts differ per rank by design).
uint32_t callTag(const CollArgs& a) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v :
       {static_cast<uint64_t>(a.coll) + 1,
        a.coll == Collective::kAllToAllv ? 0 : static_cast<uint64_t>(a.count),
        static_cast<uint64_t>(a.dtype), static_cast<uint64_t>(a.op), static_cast<uint64_t>(a.root)})
    h = (h ^ v) * 1099511628211ull;
  uint32_t tag = static_cast<uint32_t>(h ^ (h >> 32));
  return tag == 0 ? 1 : tag;
}

// After a failed exchange the connections hold partial messages: refuse later calls.
braidResult_t markBroken(braidComm* comm, braidResult_t res) {
  if (res != braidSuccess && comm->broken.empty()) {
    comm->broken = lastError();
    comm->brokenCode = res;
    // Pieces this rank published in place point into buffers its caller may now free or
    // reuse: its peers must not read them (nor wait for this rank any longer).
    // For network peers on this machine, which see only this rank's connections close.
    if (comm->segment)
      comm->segment->position()->gaveUp.store(2 + std::max(comm->blamed, -1),
                                              std::memory_order_release);
    for (Connection* c : comm->connPtrs)
      if (c) c->abandon(comm->blamed);
  }
  return res;
}

// Publishes the call this rank is in, and then the last it finished, in its segment's
// CallPosition, where rank 0's stall summary reads it (two relaxed stores per call).
class CallScope {
 public:
  // finishes false: the scope only starts the call (BRAID_CHECK's exchange before it).
  CallScope(braidComm* comm, uint32_t kind, bool finishes = true)
      : pos_(comm->segment ? comm->segment->position() : nullptr),
        seq_(comm->opCount),
        finishes_(finishes) {
    if (!pos_) return;
    pos_->what.store(kind, std::memory_order_relaxed);
    pos_->started.store(seq_, std::memory_order_relaxed);
  }
  ~CallScope() {
    if (pos_ && finishes_) pos_->done.store(seq_, std::memory_order_relaxed);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  CallPosition* pos_;
  uint64_t seq_;
  bool finishes_;
};

braidResult_t checkUsable(const braidComm* comm) {
  if (comm->aborted.load(std::memory_order_relaxed))
    return fail(braidInvalidUsage, "this communicator was aborted (braidCommAbort)");
  if (comm->finalized)
    return fail(braidInvalidUsage,
                "this communicator was finalized (braidCommFinalize): only braidCommDestroy "
                "and braidCommGetAsyncError may follow");
  if (comm->broken.empty()) return braidSuccess;
  return fail(braidInvalidUsage,
              "this communicator failed earlier and cannot be used again (destroy it): %s",
              comm->broken.c_str());
}

}  // namespace

braidResult_t chooseAlgorithm(const braidComm* comm, const CollArgs& args,
                              const AlgorithmInfo** out) {
  const size_t elemSize = braidTypeSize(args.dtype);
  const size_t bytes = tuning::callBytes(args.coll, args.count, elemSize, args.nranks);
  std::string forced = comm->forcedAlgo[static_cast<int>(args.coll)];
  const char* source = "braidCommSetAlgorithm";
  if (forced.empty()) {
    const tuning::AlgoSpec* spec = nullptr;
    BRAID_TRY(envAlgoSpec(&spec));
    forced = spec->forced(args.coll, bytes);
    source = "BRAID_ALGO";
  }
  if (!forced.empty()) {
    const AlgorithmInfo* a = findAlgorithm(args.coll, forced);
    if (!a)
      return fail(braidInvalidArgument, "%s=%s: no %s algorithm of that name (known: %s)", source,
                  forced.c_str(), collectiveName(args.coll), namesFor(args.coll).c_str());
    if (const char* why = unsupportedReason(*a, args))
      return fail(braidInvalidUsage, "%s=%s cannot run this %s: %s", source, forced.c_str(),
                  collectiveLabel(args.coll), why);
    *out = a;
    if (comm->rank == 0)
      BRAID_INFO("TUNING", "%s %zu B: %s (forced by %s)", collectiveName(args.coll), bytes, a->name,
                 source);
    return braidSuccess;
  }
  // braid-tune's measurement for the nearest size, where it has one the call can run.
  if (const tuning::MeasuredEntry* e = comm->measured.lookup(args.coll, bytes)) {
    const AlgorithmInfo* a = findAlgorithm(args.coll, e->best);
    if (a && !unsupportedReason(*a, args)) {
      *out = a;
      if (comm->rank == 0)
        BRAID_INFO("TUNING", "%s %zu B: %s (measured fastest at %zu B, BRAID_TUNE_TABLE)",
                   collectiveName(args.coll), bytes, a->name, e->bytes);
      return braidSuccess;
    }
  }
  // The cost model's least predicted time; the fixed rule only if it knows no candidate.
  int best = -1;
  const std::vector<tuning::Candidate> cands =
      tuning::rankCandidates(args, elemSize, comm->fabric, &best);
  *out = best >= 0 ? cands[best].algo : defaultAlgorithm(args, elemSize);
  if (!*out)
    return fail(braidInternalError, "no algorithm implements %s for this call",
                collectiveLabel(args.coll));
  if (comm->rank == 0 && logEnabled(LogLevel::kInfo) && config().subsysEnabled("TUNING")) {
    std::string all;
    for (const tuning::Candidate& c : cands) {
      char item[160];
      if (c.unsupported)
        std::snprintf(item, sizeof(item), "%s n/a", c.algo->name);
      else
        std::snprintf(item, sizeof(item), "%s %.1f us", c.algo->name, c.predicted_us);
      all += (all.empty() ? "" : ", ") + std::string(item);
    }
    BRAID_INFO("TUNING", "%s %zu B on %d ranks, %d host(s): %s (predicted: %s)",
               collectiveName(args.coll), bytes, args.nranks, comm->nhosts, (*out)->name,
               all.c_str());
  }
  return braidSuccess;
}

namespace {

// The last-level cache of the core this rank started on, in bytes: the largest level sysfs
// lists for cpu 0 (what one core shares; glibc's sysconf reports the whole package's on some
// virtual machines: 384 MiB for a 32 MiB L3 here), else sysconf, else 32 MiB.
size_t lastLevelCacheBytes() {
  static const size_t bytes = [] {
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
      FILE* f = std::fopen((dir + "/size").c_str(), "r");
      if (!f) continue;
      unsigned long v = 0;
      char unit = 0;
      if (std::fscanf(f, "%lu%c", &v, &unit) >= 1)
        best = std::max<size_t>(best, v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0));
      std::fclose(f);
    }
    if (best > 0) return best;
    const long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{32} << 20;
  }();
  return bytes;
}

// Whether the buffers a call touches on every rank of this machine together outgrow the
// last-level cache (per placement of the plan's call): its data then streams from and to
// memory, and two choices change.
// Receives write with streaming stores, which spare the read of each line they overwrite
// (2 ranks, all-reduce of 64-256 MiB out of place: 5-8% more busbw; at 16 MiB in place,
// where the buffers fit, they cost 25%). Sends from braidMemAllocHost buffers go single copy
// (2 ranks, 32-256 MiB: 11-15 GB/s against the FIFO's 8-9); on calls that fit in cache the
// FIFO's two copies win, the sender running ahead (128 KiB-4 MiB: 17 GB/s against 10-12 on
// this VM; perf/compare_peers.sh runs both kinds of buffer).
void setCacheChoices(const braidComm* comm, size_t elemSize, Plan* plan) {
  const size_t cache = config().cacheBytes ? config().cacheBytes : lastLevelCacheBytes();
  const size_t ranks = static_cast<size_t>(comm->localRanks);
  const size_t elems[2] = {plan->sendExtent + plan->recvExtent,
                           std::max(plan->sendExtent, plan->recvExtent)};
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    plan->outgrowsCache[inPlace] = elems[inPlace] * elemSize * ranks > cache;
    plan->streamStores[inPlace] = config().streamStores == Config::StreamStores::kAuto
                                      ? plan->outgrowsCache[inPlace]
                                      : config().streamStores == Config::StreamStores::kOn;
  }
}

}  // namespace

braidResult_t runCollective(braidComm* comm, const CollArgs& in, const void* sendbuff,
                            void* recvbuff, const CollArgs* userCall) {
  std::lock_guard<std::mutex> lock(comm->mu);
  LogRankScope rankScope(comm->rank);
  BRAID_TRY(checkUsable(comm));
  CollArgs args = in;
  args.rank = comm->rank;
  args.nranks = comm->nranks;
  const size_t elemSize = braidTypeSize(args.dtype);
  args.pieceElems = std::max<size_t>(1, comm->chunkSize / elemSize);
  args.hostOf = comm->nhosts > 1 ? comm->hostOf.data() : nullptr;
  args.ring = comm->ring.empty() ? nullptr : comm->ring.data();
  // The algorithm is chosen once per plan: a cached call goes straight to its steps.
  Plan* plan = nullptr;
  std::unique_ptr<Plan> uncached;
  auto compile = [&](Plan* p) -> braidResult_t {
    BRAID_TRY(chooseAlgorithm(comm, args, &p->algo));
    p->algo->build(args, &p->schedule);
    compilePlan(p, elemSize);
    setCacheChoices(comm, elemSize, p);
    return braidSuccess;
  };
  if (args.coll == Collective::kAllToAllv) {
    uncached = std::make_unique<Plan>();  // counts vary per call: not cached
    BRAID_TRY(compile(uncached.get()));
    plan = uncached.get();
  } else {
    auto key = std::make_tuple(static_cast<int>(args.coll), args.count,
                               static_cast<int>(args.dtype), static_cast<int>(args.op), args.root);
    auto it = comm->plans.find(key);
    if (it == comm->plans.end()) {
      if (comm->plans.size() >= 256) comm->plans.clear();
      auto p = std::make_unique<Plan>();
      BRAID_TRY(compile(p.get()));
      it = comm->plans.emplace(key, std::move(p)).first;
    }
    plan = it->second.get();
  }
  ++comm->opCount;
  const AlgorithmInfo* algo = plan->algo;
  comm->bases.assign(3, nullptr);
  comm->bases[0] = static_cast<char*>(const_cast<void*>(sendbuff));
  comm->bases[1] = static_cast<char*>(recvbuff);
  BRAID_INFO("COLL", "%s #%llu count %zu %s %s root %d: algorithm %s", collectiveLabel(args.coll),
             static_cast<unsigned long long>(comm->opCount), args.count, braidTypeName(args.dtype),
             braidOpName(args.op), args.root, algo->name);
  ExecContext ctx{comm->rank,
                  comm->nranks,
                  args.dtype,
                  args.op,
                  elemSize,
                  collectiveLabel(args.coll),
                  comm->opCount,
                  comm->bases.data(),
                  comm->bases.size(),
                  comm->connPtrs.data(),
                  comm->sendSeq.data(),
                  comm->recvSeq.data(),
                  comm->peerPids.data(),
                  comm->segment ? comm->segment->doorbell() : nullptr,
                  comm->oversubscribed,
                  callTag(args)};
  ctx.count = args.count;
  ctx.outgrowsCache = plan->outgrowsCache[sendbuff == recvbuff];
  ctx.streamStores = plan->streamStores[sendbuff == recvbuff];
  ctx.aborted = &comm->aborted;
  ctx.timeoutSec = comm->timeoutSec;
  ctx.stallWarnSec = comm->stallWarnSec;
  ctx.blamed = &comm->blamed;
  ctx.stall = comm->stallBoard.get();
  // BRAID_CHECK's exchange reports (and publishes) the user's call it precedes, whose number
  // it has: a rank stuck in it is at that call, not past it.
  ctx.kind = static_cast<uint32_t>(userCall ? userCall->coll : args.coll) + 1;
  CallScope position(comm, ctx.kind, userCall == nullptr);
  return markBroken(comm, execute(plan, ctx));
}

braidResult_t checkCallsMatch(braidComm* comm, const CollArgs& a) {
  LogRankScope rankScope(comm->rank);
  constexpr int kFields = 5;
  const uint64_t mine[kFields] = {
      static_cast<uint64_t>(a.coll),
      // All-to-all-v's count is a per-rank maximum that may differ (as in callTag).
      a.coll == Collective::kAllToAllv ? 0 : static_cast<uint64_t>(a.count),
      static_cast<uint64_t>(a.dtype),
      isReducing(a.coll) ? static_cast<uint64_t>(a.op) : 0,
      isRooted(a.coll) ? static_cast<uint64_t>(static_cast<uint32_t>(a.root)) : 0,
  };
  const size_t n = static_cast<size_t>(comm->nranks);
  std::vector<uint64_t> all(kFields * n);
  CollArgs g;
  g.coll = Collective::kAllGather;
  g.count = kFields;
  g.dtype = braidUint64;
  g.op = braidSum;
  // The exchange is not one of the user's calls: it keeps their numbering.
  const uint64_t userCalls = comm->opCount;
  const braidResult_t res = runCollective(comm, g, mine, all.data(), &a);
  comm->opCount = userCalls;
  if (res != braidSuccess)
    return fail(res, "BRAID_CHECK's exchange before call #%llu (%s) failed: %s",
                static_cast<unsigned long long>(userCalls + 1), collectiveLabel(a.coll),
                std::string(lastError()).c_str());
  bool same = true;
  for (size_t r = 1; r < n && same; ++r)
    same = std::equal(all.begin(), all.begin() + kFields, all.begin() + r * kFields);
  if (same) return braidSuccess;
  // Every rank gathered the same table, so every rank fails alike, with the same list.
  std::string calls;
  constexpr size_t kListed = 16;
  for (size_t r = 0; r < n && r < kListed; ++r) {
    const uint64_t* f = &all[r * kFields];
    const bool known = f[0] < static_cast<uint64_t>(kNumCollectives);
    const auto coll = static_cast<Collective>(f[0]);
    char line[200];
    std::snprintf(line, sizeof(line), "%srank %zu: %s count %llu %s", r ? "; " : "", r,
                  known ? collectiveLabel(coll) : "?", static_cast<unsigned long long>(f[1]),
                  braidTypeName(static_cast<braidDataType_t>(f[2])));
    calls += line;
    if (known && isReducing(coll))
      calls += std::string(" op ") + braidOpName(static_cast<braidRedOp_t>(f[3]));
    if (known && isRooted(coll)) calls += " root " + std::to_string(f[4]);
  }
  if (n > kListed) calls += "; and " + std::to_string(n - kListed) + " more";
  return fail(braidInvalidUsage,
              "BRAID_CHECK: the ranks made different calls at call #%llu (every rank must make "
              "the same collective calls in the same order): %s",
              static_cast<unsigned long long>(userCalls + 1), calls.c_str());
}

braidResult_t enqueueOnStream(braidComm* comm, braidStream_t stream,
                              std::function<braidResult_t()> work) {
  {
    std::lock_guard<std::mutex> lock(comm->queueMu);
    ++comm->queued;
  }
  auto dequeued = [comm] {
    std::lock_guard<std::mutex> lock(comm->queueMu);
    --comm->queued;
    comm->queueCv.notify_all();
  };
  try {
    return streamEnqueue(stream, [dequeued, work = std::move(work)] {
      // Guarded here, so that the count below drops even if the work throws.
      braidResult_t res = guardApi("a call queued on a stream", work);
      dequeued();
      return res;
    });
  } catch (...) {  // not queued (out of memory): destroy must not wait for it
    dequeued();
    throw;
  }
}

braidResult_t runP2P(braidComm* comm, const std::vector<P2POp>& ops) {
  std::lock_guard<std::mutex> lock(comm->mu);
  LogRankScope rankScope(comm->rank);
  BRAID_TRY(checkUsable(comm));
  ++comm->opCount;
  Plan plan;
  comm->bases.assign(3 + ops.size(), nullptr);
  std::vector<int> selfSends, selfRecvs;
  for (size_t k = 0; k < ops.size(); ++k) {
    const P2POp& op = ops[k];
    comm->bases[3 + k] = static_cast<char*>(op.buff);
    if (op.bytes == 0) continue;  // both sides skip empty messages
    if (op.peer == comm->rank) {
      (op.isSend ? selfSends : selfRecvs).push_back(static_cast<int>(k));
      continue;
    }
    Step s;
    s.kind = op.isSend ? StepKind::kSend : StepKind::kRecv;
    s.peer = op.peer;
    s.src = {userBuffer(static_cast<int>(k)), 0};
    s.dst = {userBuffer(static_cast<int>(k)), 0};
    s.count = op.bytes;
    plan.schedule.add(s);
  }
  if (selfSends.size() != selfRecvs.size())
    return fail(braidInvalidUsage,
                "group: %zu sends to self but %zu receives from self; each send to self needs a "
                "matching receive in the same group",
                selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); ++i) {
    const P2POp& snd = ops[selfSends[i]];
    const P2POp& rcv = ops[selfRecvs[i]];
    if (snd.bytes != rcv.bytes)
      return fail(braidInvalidUsage,
                  "group: send to self of %zu bytes meets a receive of %zu bytes", snd.bytes,
                  rcv.bytes);
    Step s;
    s.kind = StepKind::kCopy;
    s.src = {userBuffer(selfSends[i]), 0};
    s.dst = {userBuffer(selfRecvs[i]), 0};
    s.count = snd.bytes;
    plan.schedule.add(s);
  }
  compilePlan(&plan, 1);
  ExecContext ctx{comm->rank,
                  comm->nranks,
                  braidUint8,
                  braidSum,
                  1,
                  "send/recv group",
                  comm->opCount,
                  comm->bases.data(),
                  comm->bases.size(),
                  comm->connPtrs.data(),
                  comm->sendSeq.data(),
                  comm->recvSeq.data(),
                  comm->peerPids.data(),
                  comm->segment ? comm->segment->doorbell() : nullptr,
                  comm->oversubscribed,
                  0};
  ctx.aborted = &comm->aborted;
  ctx.timeoutSec = comm->timeoutSec;
  ctx.stallWarnSec = comm->stallWarnSec;
  ctx.blamed = &comm->blamed;
  ctx.stall = comm->stallBoard.get();
  CallScope position(comm, 0);
  return markBroken(comm, execute(&plan, ctx));
}

}  // namespace braid
