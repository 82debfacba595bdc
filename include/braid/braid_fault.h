/// @file braid_fault.h
/// Surviving a lost rank: revoke a communicator, shrink it to the ranks that are left, grow it
/// with new ones. NCCL's ncclCommRevoke (2.28), ncclCommShrink (2.27), ncclCommGetUniqueId and
/// ncclCommGrow (2.29) map onto these; revoke's propagation and shrink's agreement follow MPI's
/// ULFM (MPIX_Comm_revoke, MPIX_Comm_shrink), which NCCL leaves to the caller. Part of the
/// public API: braid.h includes it (inside its extern "C"); not meant to be included alone.
///
/// How it works (docs/fault-tolerance.md): every communicator of more than one rank has a
/// control plane, a TCP listener per rank with a thread of its own, apart from the data
/// connections, so a revoked or broken communicator can still be talked over. A message proves
/// the job's secret (the unique id's) before anything else of it is read.
#ifndef BRAID_BRAID_FAULT_H_
#define BRAID_BRAID_FAULT_H_

#ifndef BRAID_BRAID_H_
#error "include braid/braid.h, which includes braid/braid_fault.h"
#endif

/// braidCommRevoke's only flag value (NCCL_REVOKE_DEFAULT).
#define BRAID_REVOKE_DEFAULT 0x00
/// braidCommShrink flags (NCCL_SHRINK_DEFAULT, NCCL_SHRINK_ABORT).
#define BRAID_SHRINK_DEFAULT 0x00
/// Revoke comm first, so that calls stuck on it in other threads end (NCCL: "abort" mode).
#define BRAID_SHRINK_ABORT 0x01

/// Revokes comm on every rank that can still be reached (ULFM's MPIX_Comm_revoke; NCCL's
/// ncclCommRevoke, which is local only). Not collective: one rank calls it. Every call on comm
/// that is waiting, on any of its ranks, ends within about 10 ms of the revocation reaching
/// that rank, and every later call fails at once; both return braidInvalidUsage (as NCCL does
/// on a revoked communicator) with a message naming the rank that revoked. The revocation is
/// forwarded by each rank that receives it, so it reaches every live rank even if the revoking
/// rank dies while sending it. Afterwards comm is good for braidCommShrink (with a dead rank
/// or not), braidCommIsRevoked, braidCommDestroy and braidCommAbort only. Returns at once: the
/// messages leave from the control plane's thread. Revoking twice is harmless.
/// @param revokeFlags BRAID_REVOKE_DEFAULT (0)
/// @return braidInvalidArgument for a bad comm or flag.
braidResult_t braidCommRevoke(braidComm_t comm, int revokeFlags);

/// Whether comm was revoked (MPIX_Comm_is_revoked), here or by a message from a peer: *revoked
/// 1 or 0; *byRank, which may be NULL, the rank that revoked it first (-1 when not revoked).
braidResult_t braidCommIsRevoked(braidComm_t comm, int* revoked, int* byRank);

/// Forms a new communicator of comm's ranks without those in excludeRanks (NCCL's
/// ncclCommShrink; ULFM's MPIX_Comm_shrink). Every rank that is not excluded calls it; the
/// excluded ones do not (a live excluded rank that calls it anyway gets braidSuccess and
/// *newcomm = NULL). No new unique id is shared by hand: the surviving ranks agree over comm's
/// control plane and the coordinator of the agreement starts the new bootstrap.
///
/// Agreement: every caller ends with the same set of excluded ranks, the union of every
/// caller's excludeRanks and of the ranks found dead on the way, also when a rank dies during
/// the shrink. The coordinator is the lowest rank not known to be excluded; each other caller
/// sends it what it excludes and waits for the verdict. A caller that cannot reach the
/// coordinator (connection refused or dropped: the process is gone) counts it as dead and
/// turns to the next lowest rank. The coordinator waits for every rank it does not exclude,
/// probes the missing ones every 100 ms (refused: dead) and counts those still missing after
/// comm's timeout as dead. A rank that dies after the verdict fails the new communicator's
/// init on every member, which then agree again without it. (This is the coordinator with
/// failover that ULFM's early agreement falls back to, over the bootstrap-free control plane.)
///
/// Ranks of the new communicator are comm's survivors in rank order, renumbered densely;
/// braidCommParentRanks gives the mapping. comm itself stays as it was (revoked or not): the
/// new communicator shares nothing with it, so a comm that failed mid-call can be shrunk.
/// @param excludeRanks   ranks of comm to leave out, each in [0, nranks); may be NULL when
///                       excludeCount is 0 (then only the ranks found dead are left out)
/// @param config         as braidCommSplit's: NULL or unset fields inherit comm's settings
/// @param shrinkFlags    BRAID_SHRINK_DEFAULT, or BRAID_SHRINK_ABORT to revoke comm first
/// @return braidInvalidArgument for a bad comm, list, flag or config, or a list that excludes
///         the caller; braidInvalidUsage inside a group; braidTimeout/braidRemoteError if no
///         agreement could be reached within comm's timeout (after n failed coordinators).
braidResult_t braidCommShrink(braidComm_t comm, const int* excludeRanks, int excludeCount,
                              braidComm_t* newcomm, braidConfig_t* config, int shrinkFlags);

/// For each rank of comm, in order, its rank in the communicator comm was made from by
/// braidCommShrink or braidCommGrow (-1 for a rank that joined through grow); the identity for
/// a communicator made by init or split. Writes comm's nranks entries into parentRanks.
braidResult_t braidCommParentRanks(braidComm_t comm, int* parentRanks);

/// An id for braidCommGrow (NCCL's ncclCommGetUniqueId): starts a bootstrap root in this
/// process, as braidGetUniqueId. Called on one rank of comm, which passes the id to
/// braidCommGrow and hands it to the joining processes out of band.
braidResult_t braidCommGetUniqueId(braidComm_t comm, braidUniqueId* uniqueId);

/// Grows comm to nranks ranks (NCCL's ncclCommGrow). Collective over comm and the joining
/// processes. Ranks of comm pass comm, rank = -1 and keep their ranks; exactly one of them
/// passes the id from braidCommGetUniqueId, the others NULL (comm carries it to them). Each
/// joining process passes comm = NULL, that id and its new rank in [comm's nranks, nranks).
/// The grown communicator has comm's ranks first; comm stays usable.
/// @return braidInvalidArgument for nranks below comm's size, a bad rank, NULL newcomm, a
///         joining process without an id; braidInvalidUsage where no rank or several ranks of
///         comm passed an id; init's errors otherwise.
braidResult_t braidCommGrow(braidComm_t comm, int nranks, const braidUniqueId* uniqueId, int rank,
                            braidComm_t* newcomm, braidConfig_t* config);

#endif  // BRAID_BRAID_FAULT_H_
