// Misuse named in the caller's terms (issue 38): count-0 calls that still meet their peers
// (BRAID_CALL_CHECK), and the words every mismatch message uses for ranks, calls and the
// communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "braid/braid.h"
#include "core/comm.h"

namespace braid {

// A count-0 call with BRAID_CALL_CHECK=1 (the default): it moves no data, but the ranks
// exchange its fingerprint (collective, count 0, datatype, op and root where they matter, and
// the communicator's call number) in a tiny all-gather whose messages carry that fingerprint
// as their call tag. A peer in another call (count 1, a different datatype, a skipped call)
// then fails with braidInvalidUsage instead of pairing with this rank's next call; ranks that
// all make the same count-0 call succeed. Takes comm->mu (through runCollective).
braidResult_t exchangeFingerprint(braidComm* comm, const CollArgs& call);

// The call tag of that exchange (never 0, and never one a call with count > 0 has but by a
// 32-bit hash collision).
uint32_t fingerprintTag(const CollArgs& call, uint64_t callNumber);

// What the executor's messages call that exchange: "the fingerprint exchange of a count-0
// all-reduce".
const char* fingerprintExchangeLabel(Collective c);

// A call on comm that failed mid-way with res (its message in lastError()), before comm is
// marked broken: every rank must learn the same cause. Misuse found here (a peer in a
// different call) revokes comm over the control plane with this rank's message as the reason;
// a call failing because of such a revocation (or losing a peer that gave up because of it:
// braidRemoteError waits a moment for the revocation) reports that reason first, then its own
// failure. Returns the call's result.
braidResult_t shareCause(braidComm* comm, braidResult_t res);

// What misuse every rank reports, whichever rank found it: the collective number at which
// this rank's call (comm->callRecord) met another, and every rank's call there, asked of each
// over the control plane (ranks not yet at that number are asked again for up to half a
// second), grouped by call, the smallest group first:
//   misuse on communicator 1f2e3d4c5b6a7980 at collective #3 (every rank must make the same
//   collective calls in the same order): rank 1 called all-reduce count 2 int64 op sum;
//   ranks 0, 2 called all-reduce count 1 int64 op sum
// Ranks as rankLabel names them. *everyone (if given): every rank answered, at this number.
// Holds no lock the control thread takes.
std::string misuseCause(braidComm* comm, bool* everyone = nullptr);

// Asks the executor's waited-on peer where it is (ExecContext::peerCheck).
std::unique_ptr<PeerCallCheck> makePeerCallCheck(braidComm* comm);

// "rank 1 (world rank 3, host node-b)": rank r of comm as a message names it (the world rank
// where it differs or the communicator was split, the host name without its boot id).
std::string rankLabel(const braidComm* comm, int r);

// "communicator 1f2e3d4c5b6a7980" and, for a split one, " (split from ...: colour 1)" (the
// key differs by rank: the messages give this rank's beside its own part).
std::string commLabel(const braidComm* comm);

// "all-reduce count 1 float32 op sum" (root for rooted collectives): a call as its caller
// passed it.
std::string callLabel(Collective coll, size_t count, braidDataType_t dtype, braidRedOp_t op,
                      int root);

}  // namespace braid
