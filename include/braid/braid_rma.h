/// @file braid_rma.h
/// One-sided communication (NCCL 2.27-2.29's windows and signals: ncclCommWindowRegister,
/// ncclCommWindowDeregister, ncclWinGetUserPtr, ncclPutSignal, ncclSignal, ncclWaitSignal map
/// onto these). A rank writes into a peer's registered window and raises a signal there,
/// without a matching call on the peer; the peer waits for the signal, after which the data
/// is in its window. Part of the public API: braid.h includes it (inside its extern "C"); not
/// meant to be included alone.
///
/// How (docs/fault-tolerance.md, "One-sided calls"): puts and signals travel over the
/// communicator's control plane, a TCP connection per call to the target's control thread,
/// which writes the data into the window (through host memory for a device window) and then
/// counts the signal. A target therefore needs no call of its own for the data to land; each
/// put costs a connection (tens of microseconds on one host), so this path is for correctness
/// and control traffic first: a put over the data transports is on the roadmap.
#ifndef BRAID_BRAID_RMA_H_
#define BRAID_BRAID_RMA_H_

#ifndef BRAID_BRAID_H_
#error "include braid/braid.h, which includes braid/braid_rma.h"
#endif

/// A window: a buffer registered on every rank of a communicator (NCCL's ncclWindow_t).
typedef struct braidWindow* braidWindow_t;
/// braidCommWindowRegister's flags (NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC,
/// NCCL_WIN_STRICT_ORDERING): accepted; puts are always ordered per pair of ranks here.
#define BRAID_WIN_DEFAULT 0x00
#define BRAID_WIN_COLL_SYMMETRIC 0x01
#define BRAID_WIN_STRICT_ORDERING 0x02
/// Signals per (peer, context): sigIdx lies in [0, BRAID_MAX_SIGNALS).
#define BRAID_MAX_SIGNALS 1024

/// Registers buff (size bytes, host or device memory) on every rank of comm, in the same
/// order on every rank (collective): the k-th window of each rank is one window. size may
/// differ per rank; each rank learns its peers' sizes, so a put beyond a peer's window is
/// refused at the caller. *win is this rank's handle, also naming the peers' windows.
/// @return braidInvalidArgument for a bad comm, NULL buff with size > 0, NULL win or unknown
///         flags; comm's errors if the exchange fails.
braidResult_t braidCommWindowRegister(braidComm_t comm, void* buff, size_t size, braidWindow_t* win,
                                      int winFlags);
/// Deregisters win on every rank (collective; after it, puts to it are refused).
braidResult_t braidCommWindowDeregister(braidComm_t comm, braidWindow_t win);
/// *userPtr = the buffer this rank registered as win.
braidResult_t braidWinGetUserPtr(braidComm_t comm, braidWindow_t win, void** userPtr);

/// Writes count elements of datatype from localbuff into peer's window peerWin at byte offset
/// peerWinOffset, then raises signal sigIdx (from this rank) there. Ordered on stream (NULL:
/// now, on the calling thread); localbuff may be reused once it has run. peer may be this rank.
/// @param ctx   0 (one context)
/// @param flags 0
/// @return braidInvalidArgument, naming the argument, for a bad peer, window, range (beyond
///         the peer's window), sigIdx, ctx or flags; braidRemoteError if peer cannot be reached.
braidResult_t braidPutSignal(const void* localbuff, size_t count, braidDataType_t datatype,
                             int peer, braidWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                             int ctx, unsigned int flags, braidComm_t comm, braidStream_t stream);
/// Raises signal sigIdx at peer without data (ordered after this rank's earlier puts to it).
braidResult_t braidSignal(int peer, int sigIdx, int ctx, unsigned int flags, braidComm_t comm,
                          braidStream_t stream);

/// One wait of braidWaitSignal: opCnt signals from rank peer at sigIdx of context ctx.
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} braidWaitSignalDesc_t;
/// Waits until, for each desc, opCnt more signals from desc.peer at desc.sigIdx have arrived
/// than earlier waits consumed (NCCL's ncclWaitSignal), and consumes them; the data of the puts
/// they end is then in this rank's windows. Bounded by comm's timeout (braidTimeout, naming
/// the desc still short); a revoked comm ends it at once.
braidResult_t braidWaitSignal(int nDesc, const braidWaitSignalDesc_t* signalDescs, braidComm_t comm,
                              braidStream_t stream);

#endif  // BRAID_BRAID_RMA_H_
