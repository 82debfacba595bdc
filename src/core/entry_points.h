// Internal to the C entry points that make calls (collectives.cc, groups.cc, algorithm_api.cc):
// what they share. record keeps a failure for braidGetLastError(comm); the calling thread's open
// group (groups.cc) is the depth it is open to, the calls deferred to it and its first refused
// call, which collectives.cc's entry points defer to and refuse into.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/comm.h"

namespace braid {

// Keeps the message for braidGetLastError(comm) as well as the thread's.
inline braidResult_t record(braidComm* comm, braidResult_t res) {
  if (res != braidSuccess && comm && comm->magic == braidComm::kMagic)
    comm->lastError = braid::lastError();
  return res;
}

// The first call of the open group that was refused (its code and message): the outermost
// braidGroupEnd then returns it and runs nothing of the group, as ncclGroupEnd does.
extern thread_local braidResult_t t_groupError;
extern thread_local std::string t_groupErrorMessage;
extern thread_local int t_groupErrorRank;  // the refusing communicator's rank, for the log line

// Deferred work of the calling thread's open group.
struct Pending {
  braidComm* comm;
  braidStream_t stream;
  bool isP2P;
  braid::P2POp p2p;
  std::function<braidResult_t()> work;
  // A collective's shape (no buffers or arrays; all-to-all-v's count is its mean block), for
  // braidGroupSimulateEnd's prediction; empty for sends and receives, and for a call of
  // nothing (count 0), which takes no time.
  std::optional<braid::CollArgs> call;
};
// Each call reads it: initial-exec and constinit, as error.h's t_log_rank (one load).
BRAID_STATIC_TLS extern constinit thread_local int t_groupDepth;
extern thread_local std::vector<Pending> t_pending;

}  // namespace braid
