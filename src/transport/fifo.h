// The FIFO every connection is made of, and the connection that reads and writes it.
//
// A FIFO is single-producer single-consumer: a head counter (written by the producer only)
// and a tail counter (written by the consumer only), each on its own cache line, then
// `slots` cells of a 64-byte header {seq, bytes, turn, ...} and `slotBytes` of payload. A
// piece of at most Fifo::kInlineBytes is copied into its header's line instead. Publication
// is a release store of the cell's turn (its position + 1: a sequence number, never reset),
// then of head; a consumer on this host waits on the next cell's turn, so that a small piece
// arrives in one cache line, and the network proxy on head. No lock and no system call on
// the data path.
//
// Between ranks of one host the FIFO lives in the receiver's shared-memory segment (shm.h)
// and the two ranks are its two ends. Towards another host each direction has a FIFO in
// this process's memory whose far end is the network proxy (net_proxy.h), which turns
// pieces into network messages and back. Either way the executor sees a FifoConnection.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.h"
#include "transport/transport.h"

namespace braid {

constexpr size_t kFifoLine = 64;

struct Fifo {
  alignas(kFifoLine) std::atomic<uint64_t> head;
  // Set by the producer when it abandons the connection: 1 + the rank it blamed (0 for none),
  // plus 1: 0 while it works (FifoConnection::abandon).
  std::atomic<int32_t> producerGone;
  alignas(kFifoLine) std::atomic<uint64_t> tail;
  // The same, set by the consumer.
  std::atomic<int32_t> consumerGone;
  // The consumer's pid when it reads in-place pieces from the producer's memory (single
  // copy), else 0. Written by the consumer during init, before the bootstrap barrier that
  // ends it; the producer reads it at its first send.
  std::atomic<int32_t> consumerPulls;
  // The consumer's pid when it maps the producer's braidMemAllocHost allocations (host_mem.h),
  // else 0; written like consumerPulls.
  std::atomic<int32_t> consumerMaps;
  // Whether the consumer reads the producer's CUDA device pieces (the CUDA IPC transport):
  // 0 no, kOpensHandles (it opens the IPC handle each piece carries), kSameProcess (a thread
  // of the producer's process: it reads the pointer itself). Written like consumerPulls.
  std::atomic<int32_t> consumerOpens;
  static constexpr int32_t kOpensHandles = 1, kSameProcess = 2;
  // A cell's header: one cache line, which a consumer on this host (pollsCells) polls
  // instead of head, so that a small piece reaches it in one line (NCCL's LL protocol and
  // Open MPI's vader fast boxes put the flag beside the data for the same reason).
  struct alignas(kFifoLine) CellHeader {
    uint64_t seq;
    uint32_t bytes;  // at most slotBytes (BRAID_CHUNKSIZE is at most 64 MiB)
    // The cell's position in the FIFO + 1 (mod 2^32), written last, with release, once the
    // rest of the cell is (sequence numbers, not resets: the cell's previous turn differs
    // by `slots`). A FIFO's memory starts zeroed (a fresh shm_open'd segment), so no cell
    // starts at the turn of position 0.
    uint32_t turn;
    uint32_t memEpoch;  // on every piece, in place or not
    int32_t memFd;
    const void* src;  // in-place piece: the payload is there, not in the cell (else null)
    // An in-place piece in a braidMemAllocHost allocation, for a consumer that maps them:
    // the allocation's id (0: none), its bytes, the piece's offset in it, the memfd's inode
    // (the consumer maps only that file) and, above, its number in the producer. Every
    // piece carries the producer's free epoch (hostmem::freeEpoch).
    uint64_t memId;
    // A copied piece (src null) of at most kInlineBytes: its payload, here in the header's
    // line instead of after it. An in-place piece: where its allocation is.
    union {
      struct {
        uint64_t memBytes;
        uint64_t memOffset;
        uint64_t memIno;
      } mem;
      alignas(8) unsigned char payload[24];
    } in;
    // Where a copied piece's payload is: inline when it fits, else after the header.
    unsigned char* data() {
      return inlined() ? in.payload : reinterpret_cast<unsigned char*>(this + 1);
    }
    bool inlined() const { return src == nullptr && bytes <= sizeof(in.payload); }
  };
  static constexpr size_t kInlineBytes = sizeof(CellHeader::in.payload);
  static constexpr uint64_t kDevicePiece = ~0ull;
  // Cell i: its header, then slotBytes of payload.
  CellHeader* cell(int i, size_t slotBytes) {
    char* base = reinterpret_cast<char*>(this) + 2 * kFifoLine;
    return reinterpret_cast<CellHeader*>(base + static_cast<size_t>(i) * (kFifoLine + slotBytes));
  }
  // Sets both counters to 0 in memory laid out for a FIFO.
  static Fifo* init(void* at);
};
static_assert(sizeof(Fifo::CellHeader) == kFifoLine);
// A cell's turn is read and written through std::atomic_ref by two processes: it must be a
// plain lock-free 32-bit word in the shared mapping.
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);

// Bytes a FIFO of `slots` cells of `slotBytes` (a multiple of kFifoLine) takes.
inline size_t fifoBytesFor(int slots, size_t slotBytes) {
  return 2 * kFifoLine + static_cast<size_t>(slots) * (kFifoLine + slotBytes);
}

// A FIFO in this process's heap (page aligned; pages are touched only when used).
class LocalFifo {
 public:
  LocalFifo(int slots, size_t slotBytes);
  ~LocalFifo();
  LocalFifo(const LocalFifo&) = delete;
  LocalFifo& operator=(const LocalFifo&) = delete;
  Fifo* fifo() const { return fifo_; }
  int slots() const { return slots_; }
  size_t slotBytes() const { return slotBytes_; }

 private:
  Fifo* fifo_;
  size_t bytes_;
  int slots_;
  size_t slotBytes_;
};

// One rank's end of one pair: it writes pieces into sendFifo and reads them from recvFifo.
// The two FIFOs may have different geometries (each laid out by its owner, so ranks with
// different BRAID_BUFFSIZE / BRAID_CHUNKSIZE still agree on every address). peerBell is
// rung after each publish and each freed slot: the far end's doorbell.
class FifoConnection : public Connection {
 public:
  FifoConnection(const char* name, void* sendFifo, int slots, size_t slotBytes, void* recvFifo,
                 int recvSlots, size_t recvSlotBytes, Doorbell* peerBell);
  ~FifoConnection() override;

  SendKind sendKind(const SendStep& step) override;
  braidResult_t send(const SendPiece& piece, Sent* out) override;
  bool retired(uint64_t ticket) override;
  bool recv(RecvPiece* out) override;
  int pull(void* dst, size_t offset, size_t n) override;
  void release() override;
  ConnectionState state() const override { return {failure(), blamed()}; }
  void abandon(int blamed) override;
  // Also consults the peer's published CallPosition::gaveUp (a network peer on this
  // machine: its failures travel no other way).
  void watchPeer(const std::atomic<int32_t>* gaveUp) { peerGaveUp_ = gaveUp; }
  // The watched flag: 0 while the peer's calls work (or nothing is watched), else 2 + the
  // rank it blamed (1: none).
  int32_t peerGaveUp() const {
    return peerGaveUp_ ? peerGaveUp_->load(std::memory_order_acquire) : 0;
  }
  // The far end is the network proxy, a thread of this process: steps of minBytes or more
  // go in place.
  void offerInPlaceSends(size_t minBytes) { inPlaceMin_ = minBytes; }
  // Single copy between ranks of one host. Receive side: this rank reads the producer's
  // in-place pieces straight from its memory, with process_vm_readv when `producerPid` is
  // another process, directly when it is this one (ranks as threads); it says so in the
  // FIFO. Call during init, before the barrier after which the producer sends.
  void pullFrom(int producerPid);
  // Send side: steps of minBytes or more go in place, once the consumer has said (pullFrom)
  // that it reads them; until then, and if it never does, every step is copied.
  void offerSingleCopy(size_t minBytes) { pullMin_ = minBytes; }
  // Single copy from braidMemAllocHost memory. Receive side: this rank maps the producer's
  // allocations that its pieces name (the producer is process producerPid; this process:
  // read in place); it says so in the FIFO. Call during init, like pullFrom. Send side: steps
  // of minBytes or more that lie in one such allocation go in place, once the consumer says
  // it maps them.
  void mapsFrom(int producerPid);
  void offerSharedSends(size_t minBytes) { sharedMin_ = minBytes; }
  // The CUDA IPC transport. Receive side: this rank reads the device memory the producer's
  // pieces name, opening their handles (device::Runtime::ipcOpen), or, when the producer is
  // a thread of this process (sameProcess: pid and process token), at their pointers; it says
  // so in the FIFO. Call during init, like pullFrom, and only where this rank's device can
  // reach the producer's. Send side: every step in device memory goes in place once the
  // consumer says it reads them and (another process) the memory can be exported.
  void opensDeviceFrom(bool sameProcess);
  // Receive side: the producer is a FifoConnection (a rank of this host), which writes each
  // cell's turn last: wait on the next cell's turn instead of the FIFO's head, so that a
  // piece of at most Fifo::kInlineBytes arrives in the one line it shares with its flag.
  // Not for a FIFO the network proxy fills (its header may land before its payload).
  void pollsCells() { pollsCells_ = true; }

 protected:
  // state()'s two halves: why the connection failed (nullptr: it works), and whom the far
  // end blamed.
  const char* failure() const;
  int blamed() const;

 private:
  // The verbs' parts: the head slot's payload (nullptr: none free) and its publication as a
  // copied piece; the copy of a host piece; the in-place pieces; the decisions of sendKind.
  void* sendReserve(size_t* capacity);
  void sendCommit(size_t bytes, uint64_t seq);
  bool sendCopy(const void* src, size_t bytes, uint64_t seq, size_t* taken);
  bool sendInPlace(const void* src, size_t bytes, uint64_t seq, uint64_t* ticket);
  bool sendDeviceInPlace(const void* src, size_t bytes, uint64_t seq, uint64_t* ticket);
  bool sendsInPlace(const void* src, size_t bytes, bool large) const;
  bool sendsDeviceInPlace(const void* src, size_t bytes, bool sameStep);
  const void* recvPeek(size_t* bytes, uint64_t* seq);
  Fifo* send_;
  Fifo* recv_;
  Doorbell* peerBell_;
  int slots_;  // of the FIFO this rank sends into
  size_t slotBytes_;
  int recvSlots_;  // of the FIFO this rank receives from
  size_t recvSlotBytes_;
  uint64_t sendHead_ = 0;  // local copies: each counter has one writer
  uint64_t sendTailSeen_ = 0;
  uint64_t recvTail_ = 0;
  uint64_t recvHeadSeen_ = 0;
  bool pollsCells_ = false;
  size_t inPlaceMin_ = SIZE_MAX;  // producer side, for the network proxy
  // Producer side, single copy: the threshold offered, and the consumer's verdict, read at
  // the first send.
  size_t pullMin_ = SIZE_MAX;
  mutable int pullChecked_ = -1;   // -1: not read yet, else whether the consumer pulls
  size_t sharedMin_ = SIZE_MAX;    // producer side, braidMemAllocHost memory
  mutable int mapsChecked_ = -1;   // -1: not read yet, else whether the consumer maps
  mutable int opensChecked_ = -1;  // -1: not read yet, else Fifo::consumerOpens
  // The head cell's header, filled for a piece (src: an in-place piece's, else null), and its
  // publication (returns its ticket).
  Fifo::CellHeader* headCell(uint64_t seq, size_t bytes, const void* src, uint64_t memId);
  uint64_t publish();
  bool consumerPulls() const;
  bool consumerMaps() const;
  int consumerOpens() const;
  // Consumer side, device memory: Fifo::consumerOpens's mode (0: not reading them), the
  // handles this connection opened (closed with it; at most kMaxOpen, oldest closed first),
  // and whether the last peeked piece is device memory.
  int devMode_ = 0;
  struct Opened {
    unsigned char handle[64];
    char* base;
  };
  std::vector<Opened> opened_;
  static constexpr size_t kMaxOpen = 64;
  bool peekedDevice_ = false;
  // Send side, device memory: the step sendsDeviceInPlace accepted, and its reference
  // (refValid_ false: the consumer is a thread of this process and reads src itself).
  const char* stepSrc_ = nullptr;
  size_t stepBytes_ = 0;
  device::IpcRef stepRef_{};
  bool refValid_ = false;
  bool stepExported_ = false;  // stepRef_ holds the export of [stepSrc_, + stepBytes_)
  bool exportWarned_ = false;
  const char* openedDevice(Fifo::CellHeader* c);
  void closeAll();
  // Consumer side, braidMemAllocHost memory: the producer's pid (0: not mapping), its
  // allocations mapped here, and the free epoch they were mapped under.
  int mapPid_ = 0;
  struct Mapping {
    uint64_t id;
    const char* base;
    size_t bytes;
    int fd;  // in the producer
    uint64_t ino;
  };
  std::vector<Mapping> maps_;
  uint32_t mapEpoch_ = 0;
  bool mapFailed_ = false;
  const char* mapped(const Fifo::CellHeader& c);
  void noteEpoch(uint32_t epoch);
  void unmapAll();
  // Consumer side, single copy: the producer's pid (0: none) and the remote piece peeked.
  int producerPid_ = 0;
  bool producerIsMe_ = false;
  const char* peekedRemote_ = nullptr;
  mutable char failure_[160] = {0};
  const std::atomic<int32_t>* peerGaveUp_ = nullptr;
};

}  // namespace braid
