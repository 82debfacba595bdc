// Misuse named in the caller's terms (issue 38): count-0 calls that still meet their peers
// (BRAID_CALL_CHECK), and the words every mismatch message uses for ranks, calls and the
// communicator.
#pragma once

#include <cstdint>
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

// "rank 1 (world rank 3, host node-b)": rank r of comm as a message names it.
std::string rankLabel(const braidComm* comm, int r);

// "communicator 0x1f2e3d4c5b6a7980" and, for a split one, " (split from 0x...: colour 1,
// key 0)".
std::string commLabel(const braidComm* comm);

// "all-reduce count 1 float32 op sum" (root for rooted collectives): a call as its caller
// passed it.
std::string callLabel(Collective coll, size_t count, braidDataType_t dtype, braidRedOp_t op,
                      int root);

}  // namespace braid
