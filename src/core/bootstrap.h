// Bootstrap: ranks find each other through a root that the unique id names.
//
// braidGetUniqueId starts the root, a thread of the calling process, listening on one
// interface. Every rank connects, proves the id's 32-byte random secret before the root
// reads anything else, and then takes part in all-gather rounds through the root: each
// rank sends one blob, the root answers every rank with all blobs in rank order. Init uses
// two rounds (peer cards, then "segments mapped"); afterwards ranks close the connection
// and the root thread ends. A stranger or a wrong secret is refused and logged without
// disturbing the job.
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
  uint32_t magic;
  uint32_t reserved;
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
