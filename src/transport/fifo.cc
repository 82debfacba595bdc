#include "transport/fifo.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "base/error.h"
#include "base/host_mem.h"

namespace braid {

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free);

Fifo* Fifo::init(void* at) {
  auto* f = static_cast<Fifo*>(at);
  new (&f->head) std::atomic<uint64_t>(0);
  new (&f->tail) std::atomic<uint64_t>(0);
  new (&f->consumerPulls) std::atomic<int32_t>(0);
  new (&f->consumerMaps) std::atomic<int32_t>(0);
  new (&f->consumerOpens) std::atomic<int32_t>(0);
  new (&f->producerGone) std::atomic<int32_t>(0);
  new (&f->consumerGone) std::atomic<int32_t>(0);
  return f;
}

LocalFifo::LocalFifo(int slots, size_t slotBytes) : slots_(slots), slotBytes_(slotBytes) {
  bytes_ = fifoBytesFor(slots, slotBytes);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  fifo_ = Fifo::init(p);
}

LocalFifo::~LocalFifo() { munmap(fifo_, bytes_); }

void Doorbell::ring() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_relaxed)) {
    ticket.fetch_add(1, std::memory_order_release);
    if (eventFd >= 0) {
      uint64_t one = 1;
      (void)!write(eventFd, &one, sizeof(one));
      return;
    }
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ticket), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
  }
}

void Doorbell::wait(uint32_t seen, long timeoutUs) {
  timespec ts{timeoutUs / 1000000, (timeoutUs % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ticket), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

FifoConnection::FifoConnection(const char* name, void* sendFifo, int slots, size_t slotBytes,
                               void* recvFifo, int recvSlots, size_t recvSlotBytes,
                               Doorbell* peerBell)
    : Connection(name, slotBytes),
      send_(static_cast<Fifo*>(sendFifo)),
      recv_(static_cast<Fifo*>(recvFifo)),
      peerBell_(peerBell),
      slots_(slots),
      slotBytes_(slotBytes),
      recvSlots_(recvSlots),
      recvSlotBytes_(recvSlotBytes) {}

FifoConnection::~FifoConnection() {
  unmapAll();
  closeAll();
}

void* FifoConnection::sendReserve(size_t* capacity) {
  if (sendHead_ - sendTailSeen_ >= static_cast<uint64_t>(slots_)) {
    sendTailSeen_ = send_->tail.load(std::memory_order_acquire);
    if (sendHead_ - sendTailSeen_ >= static_cast<uint64_t>(slots_)) return nullptr;
  }
  *capacity = slotBytes_;
  return send_->cell(static_cast<int>(sendHead_ % slots_), slotBytes_) + 1;
}

Fifo::CellHeader* FifoConnection::headCell(uint64_t seq, size_t bytes, const void* src,
                                           uint64_t memId) {
  Fifo::CellHeader* c = send_->cell(static_cast<int>(sendHead_ % slots_), slotBytes_);
  c->seq = seq;
  c->bytes = static_cast<uint32_t>(bytes);  // at most slotBytes_
  c->src = src;
  c->memId = memId;
  c->memEpoch = hostmem::freeEpoch();
  return c;
}

uint64_t FifoConnection::publish() {
  Fifo::CellHeader* c = send_->cell(static_cast<int>(sendHead_ % slots_), slotBytes_);
  const uint64_t ticket = sendHead_++;
  // The cell's turn last: a consumer that polls cells sees the whole piece once it sees it.
  std::atomic_ref<uint32_t>(c->turn).store(static_cast<uint32_t>(sendHead_),
                                           std::memory_order_release);
  send_->head.store(sendHead_, std::memory_order_release);
  peerBell_->ring();
  return ticket;
}

void FifoConnection::sendCommit(size_t bytes, uint64_t seq) {
  Fifo::CellHeader* c = headCell(seq, bytes, nullptr, 0);
  // Written after the header (sendReserve's buffer): a piece that fits goes beside the flag.
  if (bytes > 0 && c->inlined()) std::memcpy(c->in.payload, c + 1, bytes);
  publish();
}

bool FifoConnection::sendCopy(const void* src, size_t bytes, uint64_t seq, size_t* taken) {
  size_t capacity = 0;
  if (!sendReserve(&capacity)) return false;
  const size_t n = std::min(capacity, bytes);
  Fifo::CellHeader* c = headCell(seq, n, nullptr, 0);
  if (n > 0) std::memcpy(c->data(), src, n);  // a small piece never touches the payload's lines
  publish();
  *taken = n;
  return true;
}

SendKind FifoConnection::sendKind(const SendStep& step) {
  if (step.device)
    return step.bytes > 0 && sendsDeviceInPlace(step.src, step.bytes, step.sameStep)
               ? SendKind::kDeviceInPlace
               : SendKind::kCopy;
  return sendsInPlace(step.src, step.bytes, step.large) ? SendKind::kInPlace : SendKind::kCopy;
}

braidResult_t FifoConnection::send(const SendPiece& piece, Sent* out) {
  out->taken = 0;
  switch (piece.kind) {
    case SendKind::kCopy:
      if (!piece.copy) {
        out->sent = sendCopy(piece.src, piece.bytes, piece.seq, &out->taken);
        return braidSuccess;
      } else {
        size_t capacity = 0;
        void* buf = sendReserve(&capacity);
        out->sent = buf != nullptr;
        if (!buf) return braidSuccess;
        const size_t n = std::min(capacity, piece.bytes);
        if (n > 0) {
          const braidResult_t res = piece.copy(buf, piece.src, n);
          if (res != braidSuccess) return res;  // nothing published
        }
        sendCommit(n, piece.seq);
        out->taken = n;
        return braidSuccess;
      }
    case SendKind::kInPlace:
      out->sent = sendInPlace(piece.src, piece.bytes, piece.seq, &out->ticket);
      break;
    case SendKind::kDeviceInPlace:
      out->sent = sendDeviceInPlace(piece.src, piece.bytes, piece.seq, &out->ticket);
      break;
  }
  if (out->sent) out->taken = piece.bytes;
  return braidSuccess;
}

bool FifoConnection::sendInPlace(const void* src, size_t bytes, uint64_t seq, uint64_t* ticket) {
  size_t capacity = 0;
  if (!sendReserve(&capacity)) return false;
  Fifo::CellHeader* c = headCell(seq, bytes, src, 0);
  hostmem::Ref ref;
  if (sharedMin_ != SIZE_MAX && consumerMaps() && hostmem::find(src, bytes, &ref)) {
    c->memId = ref.id;
    c->in.mem.memBytes = ref.bytes;
    c->in.mem.memOffset = ref.offset;
    c->in.mem.memIno = ref.ino;
    c->memFd = ref.fd;
  }
  *ticket = publish();
  return true;
}

int FifoConnection::consumerOpens() const {
  if (opensChecked_ < 0) opensChecked_ = send_->consumerOpens.load(std::memory_order_acquire);
  return opensChecked_;
}

bool FifoConnection::sendsDeviceInPlace(const void* src, size_t bytes, bool sameStep) {
  const int mode = consumerOpens();
  if (mode == 0) return false;
  refValid_ = mode != Fifo::kSameProcess;
  if (!refValid_) {
    stepSrc_ = static_cast<const char*>(src);
    return true;
  }
  if (slotBytes_ < sizeof(device::IpcRef)) return false;  // a cell too small for the handle
  // A step waiting for free slots asks again on every pass: export it once. Only within the
  // step: memory freed since may be another allocation at the same address.
  if (sameStep && stepExported_ && stepSrc_ == src && stepBytes_ == bytes) return true;
  stepSrc_ = static_cast<const char*>(src);
  stepBytes_ = bytes;
  std::string why;
  stepExported_ = device::runtime().ipcExport(src, bytes, &stepRef_, &why);
  if (!stepExported_ && !exportWarned_) {
    exportWarned_ = true;
    BRAID_INFO("NET",
               "device memory at %p cannot be shared with a peer process (%s): it is "
               "copied through host memory",
               src, why.c_str());
  }
  return stepExported_;
}

bool FifoConnection::sendDeviceInPlace(const void* src, size_t bytes, uint64_t seq,
                                       uint64_t* ticket) {
  size_t capacity = 0;
  void* payload = sendReserve(&capacity);
  if (!payload) return false;
  headCell(seq, bytes, src, Fifo::kDevicePiece);
  if (refValid_) {
    device::IpcRef ref = stepRef_;
    ref.offset += static_cast<uint64_t>(static_cast<const char*>(src) - stepSrc_);
    std::memcpy(payload, &ref, sizeof(ref));
  }
  *ticket = publish();
  return true;
}

void FifoConnection::opensDeviceFrom(bool sameProcess) {
  devMode_ = sameProcess ? Fifo::kSameProcess : Fifo::kOpensHandles;
  recv_->consumerOpens.store(devMode_, std::memory_order_release);
}

void FifoConnection::closeAll() {
  for (const Opened& o : opened_) device::runtime().ipcClose(o.base);
  opened_.clear();
}

// Where this process reads the device piece c of another process: its IpcRef, opened on
// first use. nullptr (and state() says why) when it cannot be opened.
const char* FifoConnection::openedDevice(Fifo::CellHeader* c) {
  device::IpcRef ref;
  std::memcpy(&ref, c + 1, sizeof(ref));
  for (const Opened& o : opened_)
    if (std::memcmp(o.handle, ref.handle, sizeof(ref.handle)) == 0) return o.base + ref.offset;
  char* base = nullptr;
  if (device::runtime().ipcOpen(ref, &base) != braidSuccess) {
    mapFailed_ = true;
    std::snprintf(failure_, sizeof(failure_), "opening the peer's device buffer (CUDA IPC): %s",
                  lastError());
    return nullptr;
  }
  if (opened_.size() >= kMaxOpen) {  // the oldest: no piece of it is peeked now
    device::runtime().ipcClose(opened_.front().base);
    opened_.erase(opened_.begin());
  }
  Opened o{};
  std::memcpy(o.handle, ref.handle, sizeof(ref.handle));
  o.base = base;
  opened_.push_back(o);
  return base + ref.offset;
}

bool FifoConnection::retired(uint64_t ticket) {
  if (sendTailSeen_ > ticket) return true;
  sendTailSeen_ = send_->tail.load(std::memory_order_acquire);
  return sendTailSeen_ > ticket;
}

// The far end's flag: 0 while it works, else 1 + 1 + the rank it blamed (-1: none).
int FifoConnection::blamed() const {
  int32_t flag = std::max(send_->consumerGone.load(std::memory_order_acquire),
                          recv_->producerGone.load(std::memory_order_acquire));
  if (flag <= 0) flag = peerGaveUp();
  return flag > 0 ? flag - 2 : -1;
}

const char* FifoConnection::failure() const {
  if (mapFailed_) return failure_;
  if (!send_->consumerGone.load(std::memory_order_acquire) &&
      !recv_->producerGone.load(std::memory_order_acquire))
    return nullptr;
  const int cause = blamed();
  if (cause < 0)
    return "the peer gave the connection up (its communicator was aborted, or a call on it "
           "failed)";
  std::snprintf(failure_, sizeof(failure_),
                "the peer gave the connection up: its call failed on rank %d (late, stalled, "
                "dead or failed)",
                cause);
  return failure_;
}

void FifoConnection::abandon(int blamed) {
  const int32_t flag = 2 + std::max(blamed, -1);
  recv_->consumerGone.store(flag, std::memory_order_release);
  send_->producerGone.store(flag, std::memory_order_release);
  peerBell_->ring();
}

bool FifoConnection::consumerPulls() const {
  if (pullChecked_ < 0)
    pullChecked_ = send_->consumerPulls.load(std::memory_order_acquire) != 0 ? 1 : 0;
  return pullChecked_ != 0;
}

bool FifoConnection::consumerMaps() const {
  if (mapsChecked_ < 0)
    mapsChecked_ = send_->consumerMaps.load(std::memory_order_acquire) != 0 ? 1 : 0;
  return mapsChecked_ != 0;
}

bool FifoConnection::sendsInPlace(const void* src, size_t bytes, bool large) const {
  if (inPlaceMin_ != SIZE_MAX) return bytes >= inPlaceMin_;
  if (pullMin_ != SIZE_MAX && bytes >= pullMin_ && consumerPulls()) return true;
  hostmem::Ref ref;
  return large && sharedMin_ != SIZE_MAX && bytes >= sharedMin_ && consumerMaps() &&
         hostmem::find(src, bytes, &ref);
}

void FifoConnection::mapsFrom(int producerPid) {
  mapPid_ = producerPid;
  recv_->consumerMaps.store(static_cast<int32_t>(getpid()), std::memory_order_release);
}

void FifoConnection::unmapAll() {
  for (const Mapping& m : maps_) hostmem::unmapPeer(m.base, m.bytes);
  maps_.clear();
}

// The producer's free epoch, as a piece carries it: once it moves, every mapping whose
// allocation the producer no longer holds (its descriptor closed, or now another file) is
// dropped, so a freed allocation leaves this process at the producer's next piece.
void FifoConnection::noteEpoch(uint32_t epoch) {
  if (epoch == mapEpoch_) return;
  mapEpoch_ = epoch;
  size_t kept = 0;
  for (const Mapping& m : maps_) {
    if (hostmem::peerStillHolds(mapPid_, m.fd, m.ino))
      maps_[kept++] = m;
    else
      hostmem::unmapPeer(m.base, m.bytes);
  }
  maps_.resize(kept);
}

// Where this process reads the in-place piece c, which names a braidMemAllocHost allocation
// of the producer: its own mapping of it, made on first use. nullptr (and state() says
// why) when the allocation cannot be mapped.
const char* FifoConnection::mapped(const Fifo::CellHeader& c) {
  for (const Mapping& m : maps_)
    if (m.id == c.memId) return m.base + c.in.mem.memOffset;
  std::string error;
  const hostmem::Ref ref{c.memFd, c.memId, c.in.mem.memIno, c.in.mem.memOffset,
                         static_cast<size_t>(c.in.mem.memBytes)};
  const char* base = hostmem::mapPeer(mapPid_, ref, &error);
  if (!base) {
    mapFailed_ = true;
    std::snprintf(failure_, sizeof(failure_), "reading the peer's braidMemAllocHost buffer: %s",
                  error.c_str());
    return nullptr;
  }
  maps_.push_back(
      Mapping{c.memId, base, static_cast<size_t>(c.in.mem.memBytes), c.memFd, c.in.mem.memIno});
  return base + c.in.mem.memOffset;
}

void FifoConnection::pullFrom(int producerPid) {
  producerPid_ = producerPid;
  producerIsMe_ = producerPid == static_cast<int>(getpid());
  recv_->consumerPulls.store(static_cast<int32_t>(getpid()), std::memory_order_release);
}

const void* FifoConnection::recvPeek(size_t* bytes, uint64_t* seq) {
  if (mapFailed_) return nullptr;  // a piece that cannot be read: state() says why
  Fifo::CellHeader* c = recv_->cell(static_cast<int>(recvTail_ % recvSlots_), recvSlotBytes_);
  if (recvTail_ == recvHeadSeen_) {
    if (pollsCells_) {  // the cell's own turn: one line to read for a small piece
      if (std::atomic_ref<uint32_t>(c->turn).load(std::memory_order_acquire) !=
          static_cast<uint32_t>(recvTail_ + 1))
        return nullptr;
      recvHeadSeen_ = recvTail_ + 1;
    } else {
      recvHeadSeen_ = recv_->head.load(std::memory_order_acquire);
      if (recvTail_ == recvHeadSeen_) return nullptr;
    }
  }
  *bytes = c->bytes;
  *seq = c->seq;
  // An in-place piece, to a consumer that pulls: in this process's memory when the producer
  // is a thread of it, else readable through pull() only. (A cell that came over the
  // network carries the far sender's src, which means nothing here.)
  peekedRemote_ = nullptr;
  peekedDevice_ = false;
  if (!maps_.empty()) noteEpoch(c->memEpoch);
  const bool device = c->memId == Fifo::kDevicePiece && devMode_ != 0;
  if (!c->src) return c->data();
  if (!device && producerPid_ == 0 && mapPid_ == 0) return c + 1;
  // The producer's call failed or was aborted: its buffer may be gone or reused.
  if (recv_->producerGone.load(std::memory_order_acquire)) return nullptr;
  if (device) {
    const char* at =
        devMode_ == Fifo::kSameProcess ? static_cast<const char*>(c->src) : openedDevice(c);
    peekedDevice_ = at != nullptr;
    return at;
  }
  if (c->memId != 0 && mapPid_ != 0) {
    if (mapPid_ == static_cast<int>(getpid())) return c->src;
    return mapped(*c);
  }
  if (producerIsMe_) return c->src;
  peekedRemote_ = static_cast<const char*>(c->src);
  return peekedRemote_;
}

bool FifoConnection::recv(RecvPiece* out) {
  out->data = recvPeek(&out->bytes, &out->seq);
  if (!out->data) return false;
  out->where = peekedRemote_ ? PieceAt::kRemote : peekedDevice_ ? PieceAt::kDevice : PieceAt::kHere;
  return true;
}

int FifoConnection::pull(void* dst, size_t offset, size_t n) {
  char* out = static_cast<char*>(dst);
  const char* from = peekedRemote_ + offset;
  while (n > 0) {
    iovec local{out, n};
    iovec remote{const_cast<char*>(from), n};
    const ssize_t got = process_vm_readv(producerPid_, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EFAULT;
    out += got;
    from += got;
    n -= static_cast<size_t>(got);
  }
  return 0;
}

void FifoConnection::release() {
  peekedRemote_ = nullptr;
  peekedDevice_ = false;
  ++recvTail_;
  recv_->tail.store(recvTail_, std::memory_order_release);
  peerBell_->ring();
}

}  // namespace braid
