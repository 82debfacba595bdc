// Bootstrap: ranks find each other through a root that the unique id names.
//
// braidGetUniqueId starts the root, a thread of the calling process, listening on one
// interface. Every rank connects, proves the id's 32-byte random secret before the root
// reads anything else, and then takes part in all-gather rounds through the root: each
// rank sends one blob, the root answers every rank with all blobs in rank order. Init uses
// two rounds (peer cards, then "segments mapped"); afterwards ranks close the connection
// and the root thread ends. A stranger or a wrong secret is refused and logged without
// disturbing the job.
//
// An id may also name a root at a fixed address that the launch environment chose
// (BRAID_COMM_ID, MASTER_ADDR; see launch_env.cc): rank 0 starts that root with
// createRootAt, every rank builds the same id with makeUniqueId, and ranks other than 0
// keep retrying the connection until BRAID_TIMEOUT, since rank 0 may start later.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid {

struct UniqueIdData {
  static constexpr uint32_t kMagic = 0x31445242;  // "BRD1"
  // flags: the root may not be listening yet (a fixed address from the environment):
  // join retries connecting until BRAID_TIMEOUT instead of failing at once.
  static constexpr uint32_t kRetryConnect = 1;
  uint32_t magic;
  uint32_t flags;
  sockaddr_in root;
  uint8_t secret[32];
  uint64_t checksum;  // FNV-1a of the fields above: detects a corrupted id
};
static_assert(sizeof(UniqueIdData) <= BRAID_UNIQUE_ID_BYTES);

// FNV-1a of the id's fields before the checksum.
uint64_t uniqueIdChecksum(const UniqueIdData& id);

// Creates an id and starts its root thread.
braidResult_t createUniqueId(braidUniqueId* id);
// Decodes and validates an id (magic, checksum); names the problem on failure.
braidResult_t decodeUniqueId(const braidUniqueId& id, UniqueIdData* out);

// An id naming the root at `root` with `secret`, flagged kRetryConnect; starts nothing.
void makeUniqueId(const sockaddr_in& root, const uint8_t secret[32], braidUniqueId* id);
// Starts a root listening on every interface at root's port, after checking that root's
// address is one of this host's, and writes makeUniqueId's id. `origin` names where the
// address came from in messages (e.g. "BRAID_COMM_ID=node0:29500"). braidInvalidArgument
// if the address is not this host's, braidSystemError if the port cannot be bound.
braidResult_t createRootAt(const sockaddr_in& root, const uint8_t secret[32],
                           const std::string& origin, braidUniqueId* id);

// SHA-256 (FIPS 180-4) of len bytes: derives a job's secret from the environment.
void sha256(const void* data, size_t len, uint8_t out[32]);

// Where this process sits in a job that a launcher started, read from the environment at
// the time of the call (launch_env.cc; braidCommInitFromEnv documents the variables).
struct EnvLaunch {
  int rank = -1;
  int nranks = 0;
  int localRank = -1;      // -1: the launcher does not say
  std::string rankSource;  // e.g. "SLURM_PROCID/SLURM_NTASKS"
  std::string rendezvous;  // e.g. "BRAID_COMM_ID=node0:29500"
  braidUniqueId id{};
};
// Reads rank, size and rendezvous; on rank 0 of an address rendezvous starts the root.
// braidInvalidArgument, naming the variable and its value, for anything malformed,
// missing or inconsistent.
braidResult_t launchFromEnv(EnvLaunch* out);

class Bootstrap {
 public:
  // Connects to the root, proves the secret and registers (rank, nranks).
  static braidResult_t join(const braidUniqueId& id, int rank, int nranks,
                            std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Every rank contributes `mine`; *all receives nranks blobs in rank order.
  braidResult_t allGather(const std::string& mine, std::vector<std::string>* all);
  braidResult_t barrier();
  void close();

 private:
  Bootstrap(int fd, int rank, int nranks) : fd_(fd), rank_(rank), nranks_(nranks) {}
  int fd_;
  int rank_;
  int nranks_;
};

}  // namespace braid
