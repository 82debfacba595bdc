#include "core/comm.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/bootstrap.h"
#include "core/config.h"
#include "core/error.h"

namespace braid {

std::string PeerCard::encode() const {
  return hostId + "\n" + std::to_string(pid) + "\n" + shmName + "\n";
}

bool PeerCard::decode(const std::string& text, PeerCard* out) {
  std::istringstream in(text);
  std::string pid;
  if (!std::getline(in, out->hostId) || !std::getline(in, pid) || !std::getline(in, out->shmName))
    return false;
  out->pid = std::atoi(pid.c_str());
  return true;
}

std::string localHostId() {
  if (!config().hostId.empty()) return config().hostId;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

braidResult_t commInit(braidComm_t* out, int nranks, const braidUniqueId& id, int rank) {
  setLogRank(rank);
  auto comm = std::make_unique<braidComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  std::unique_ptr<Bootstrap> boot;
  BRAID_TRY(Bootstrap::join(id, rank, nranks, &boot));

  const Config& cfg = config();
  const int slots = static_cast<int>(cfg.buffSize / cfg.chunkSize);
  PeerCard mine;
  mine.hostId = localHostId();
  mine.pid = getpid();
  if (nranks > 1) {
    BRAID_TRY(ShmSegment::create(nranks, slots, cfg.chunkSize, &comm->segment));
    mine.shmName = comm->segment->name();
  }
  std::vector<std::string> cards;
  BRAID_TRY(boot->allGather(mine.encode(), &cards));
  comm->peers.resize(nranks);
  for (int r = 0; r < nranks; ++r)
    if (!PeerCard::decode(cards[r], &comm->peers[r]))
      return fail(braidInternalError, "init: malformed card from rank %d", r);

  comm->peerSegments.resize(nranks);
  comm->connections.resize(nranks);
  comm->sendSeq.assign(nranks, 0);
  comm->recvSeq.assign(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    const PeerCard& p = comm->peers[r];
    if (p.hostId != mine.hostId)
      return fail(braidInvalidUsage,
                  "init: rank %d is on host \"%s\" but this rank is on \"%s\"; this build has only "
                  "the shared-memory transport, so every rank must run on one host (unset "
                  "BRAID_HOST_ID or give all ranks the same value)",
                  r, p.hostId.c_str(), mine.hostId.c_str());
    BRAID_TRY(ShmSegment::open(p.shmName, &comm->peerSegments[r]));
    const ShmSegment& peerSeg = *comm->peerSegments[r];
    comm->connections[r] =
        std::make_unique<ShmConnection>(peerSeg.fifo(rank), comm->segment->fifo(r),
                                        comm->segment->slots(), comm->segment->slotBytes());
    BRAID_INFO("INIT", "rank %d -> rank %d via shm (same host %s): %d slots of %zu bytes", rank, r,
               mine.hostId.c_str(), comm->segment->slots(), comm->segment->slotBytes());
  }
  for (auto& c : comm->connections) comm->connPtrs.push_back(c.get());
  // Once every rank has mapped every segment, the names can go: nothing stays in /dev/shm.
  BRAID_TRY(boot->barrier());
  if (comm->segment) comm->segment->unlink();
  boot->close();
  BRAID_INFO("INIT", "communicator ready: rank %d of %d", rank, nranks);
  *out = comm.release();
  return braidSuccess;
}

braidResult_t runCollective(braidComm* comm, const CollArgs& in, const void* sendbuff,
                            void* recvbuff) {
  std::lock_guard<std::mutex> lock(comm->mu);
  setLogRank(comm->rank);
  CollArgs args = in;
  args.rank = comm->rank;
  args.nranks = comm->nranks;
  const size_t elemSize = braidTypeSize(args.dtype);
  args.pieceElems = std::max<size_t>(1, config().chunkSize / elemSize);
  const AlgorithmInfo* algo = &algorithms().front();
  if (!config().algo.empty()) {
    algo = findAlgorithm(args.coll, config().algo);
    if (!algo)
      return fail(braidInvalidArgument, "BRAID_ALGO=%s: no such %s algorithm (known: ring)",
                  config().algo.c_str(), collectiveName(args.coll));
  }
  ++comm->opCount;
  auto key =
      std::make_tuple(static_cast<int>(args.coll), static_cast<const void*>(algo), args.count,
                      static_cast<int>(args.dtype), static_cast<int>(args.op), args.root);
  auto it = comm->plans.find(key);
  if (it == comm->plans.end()) {
    if (comm->plans.size() >= 256) comm->plans.clear();
    auto plan = std::make_unique<Plan>();
    algo->build(args, &plan->schedule);
    compilePlan(plan.get(), elemSize);
    it = comm->plans.emplace(key, std::move(plan)).first;
  }
  ExecContext ctx{comm->rank, comm->nranks,          args.dtype,           args.op,
                  elemSize,   "all-reduce",          comm->opCount,        sendbuff,
                  recvbuff,   comm->connPtrs.data(), comm->sendSeq.data(), comm->recvSeq.data()};
  return execute(it->second.get(), ctx);
}

}  // namespace braid
