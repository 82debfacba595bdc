#include "transport/net_proxy.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "base/config.h"
#include "base/error.h"
#include "base/socket.h"

namespace braid {

// A FifoConnection that also reports the proxy's verdict on the peer.
class NetProxy::Conn : public FifoConnection {
 public:
  Conn(const char* name, Fifo* send, Fifo* recv, int slots, size_t slotBytes, Doorbell* bell)
      : FifoConnection(name, send, slots, slotBytes, recv, slots, slotBytes, bell) {}
  // The proxy's verdict, or, for a peer on this machine, what it published when its call
  // failed (then it will not send or take what this call still needs, even while its
  // connection stays open). The text lives until the next call (the rank's thread only).
  ConnectionState state() const override { return {netFailure(), blamed()}; }
  const char* netFailure() const {
    const bool closed = failed.load(std::memory_order_acquire);
    const int32_t gave = peerGaveUp();
    if (gave <= 0) return closed ? why.c_str() : nullptr;
    const std::string cause = gave >= 2 ? "its call failed on rank " + std::to_string(gave - 2)
                                        : "its communicator was aborted or a call on it failed";
    told =
        closed ? why + "; it had given up: " + cause : "the peer gave the connection up: " + cause;
    return told.c_str();
  }
  std::string why;           // written once by the proxy before `failed` is set
  mutable std::string told;  // netFailure()'s text with the peer's blame (the rank's thread)
  std::atomic<bool> failed{false};
};

struct NetProxy::Peer {
  Peer(int rank, int slots, size_t slotBytes)
      : rank(rank),
        send(slots, slotBytes),
        recv(slots, slotBytes),
        sendReq(slots),
        recvReq(slots) {}
  int rank;
  LocalFifo send;  // the rank writes, the proxy sends
  LocalFifo recv;  // the proxy receives, the rank reads
  std::vector<void*> sendReq, recvReq;
  uint64_t sendPosted = 0, sendDone = 0;
  uint64_t recvPosted = 0, recvDone = 0;
  Conn* conn = nullptr;
  bool failed = false;
  // For the destructor's drain: pieces sent, and whether the peer is past reaching.
  std::atomic<uint64_t> sent{0};
  std::atomic<bool> gone{false};
};

NetProxy::NetProxy(std::unique_ptr<NetBackend> backend, int rank, Doorbell* rankBell, int slots,
                   size_t slotBytes)
    : backend_(std::move(backend)),
      rank_(rank),
      rankBell_(rankBell),
      slots_(slots),
      slotBytes_(slotBytes) {
  bell_.eventFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

NetProxy::~NetProxy() {
  // What the rank sent counts as delivered once committed (as with shared memory), so
  // wait, bounded by BRAID_TIMEOUT, until the network has taken every piece.
  if (thread_.joinable() && !abandoned_) {
    Deadline deadline = deadlineAfter(config().timeoutSec);
    for (auto& p : peers_) {
      while (!p->gone.load(std::memory_order_acquire) &&
             p->sent.load(std::memory_order_acquire) !=
                 p->send.fifo()->head.load(std::memory_order_acquire)) {
        if (Clock::now() > deadline) {
          BRAID_WARN(
              "NET",
              "destroying the communicator: rank %d took nothing for %.0f s (BRAID_TIMEOUT); "
              "%llu pieces sent to it are dropped",
              p->rank, config().timeoutSec,
              static_cast<unsigned long long>(p->send.fifo()->head.load(std::memory_order_acquire) -
                                              p->sent.load(std::memory_order_acquire)));
          break;
        }
        bell_.ring();
        usleep(200);
      }
    }
  }
  stop_.store(true);
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(bell_.eventFd, &one, sizeof(one));
    thread_.join();
  }
  backend_.reset();  // closes sockets / endpoints while the FIFOs still exist
  if (bell_.eventFd >= 0) close(bell_.eventFd);
  if (epollFd_ >= 0) close(epollFd_);
}

std::unique_ptr<Connection> NetProxy::addPeer(int peer) {
  auto p = std::make_unique<Peer>(peer, slots_, slotBytes_);
  auto c = std::make_unique<Conn>(backend_->name(), p->send.fifo(), p->recv.fifo(), slots_,
                                  slotBytes_, &bell_);
  p->conn = c.get();
  if (backend_->gatherSends()) c->offerInPlaceSends(kNetInPlaceBytes);
  peers_.push_back(std::move(p));
  return c;
}

braidResult_t NetProxy::start() {
  if (bell_.eventFd < 0) return fail(braidSystemError, "eventfd failed: %s", strerror(errno));
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epollFd_ < 0) return fail(braidSystemError, "epoll_create1 failed: %s", strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = bell_.eventFd;
  epoll_ctl(epollFd_, EPOLL_CTL_ADD, bell_.eventFd, &ev);
  if (int fd = backend_->waitFd(); fd >= 0) {
    ev.data.fd = fd;
    epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev);
  }
  thread_ = std::thread([this] { loop(); });
  return braidSuccess;
}

void NetProxy::failAll(const std::string& why) {
  for (auto& p : peers_) {
    if (p->failed) continue;
    p->failed = true;
    p->gone.store(true, std::memory_order_release);
    p->conn->why = why;
    p->conn->failed.store(true, std::memory_order_release);
  }
  rankBell_->ring();
}

// One sweep over every peer; true when anything moved.
bool NetProxy::pass() {
  bool moved = false;
  if (backend_->progress(&moved) != braidSuccess) {
    failAll(lastError());
    return false;
  }
  bool ringRank = false;
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.failed) continue;
    auto broke = [&] {
      p.failed = true;
      p.gone.store(true, std::memory_order_release);
      p.conn->why = lastError();
      p.conn->failed.store(true, std::memory_order_release);
      ringRank = true;
    };
    const uint64_t slots = static_cast<uint64_t>(slots_);
    // Sends: post what the rank published, retire what the network took, in order.
    Fifo* sf = p.send.fifo();
    const uint64_t head = sf->head.load(std::memory_order_acquire);
    while (p.sendPosted < head) {
      Fifo::CellHeader* c = sf->cell(static_cast<int>(p.sendPosted % slots), slotBytes_);
      void** req = &p.sendReq[p.sendPosted % slots];
      // An in-place piece goes as its header and the user's bytes; a copied one as its
      // header and the slot's bytes after it, or the header alone when the piece rides in it.
      braidResult_t res =
          c->src ? backend_->isendGather(p.rank, c, kFifoLine, c->src, c->bytes, p.sendPosted, req)
                 : backend_->isend(p.rank, c, kFifoLine + (c->inlined() ? 0 : c->bytes),
                                   p.sendPosted, req);
      if (res != braidSuccess) {
        broke();
        break;
      }
      ++p.sendPosted;
      moved = true;
    }
    bool freed = false;
    while (p.sendDone < p.sendPosted) {
      bool done = false;
      if (backend_->test(p.sendReq[p.sendDone % slots], &done, nullptr) != braidSuccess) {
        broke();
        break;
      }
      if (!done) break;
      ++p.sendDone;
      freed = true;
    }
    if (freed) {
      sf->tail.store(p.sendDone, std::memory_order_release);
      p.sent.store(p.sendDone, std::memory_order_release);
      ringRank = moved = true;
    }
    if (p.failed) continue;
    // Receives: keep one posted per free cell, publish completions in piece order.
    Fifo* rf = p.recv.fifo();
    const uint64_t tail = rf->tail.load(std::memory_order_acquire);
    while (p.recvPosted < tail + slots) {
      Fifo::CellHeader* c = rf->cell(static_cast<int>(p.recvPosted % slots), slotBytes_);
      if (backend_->irecv(p.rank, c, kFifoLine + slotBytes_, p.recvPosted,
                          &p.recvReq[p.recvPosted % slots]) != braidSuccess) {
        broke();
        break;
      }
      ++p.recvPosted;
      moved = true;
    }
    bool arrived = false;
    while (!p.failed && p.recvDone < p.recvPosted) {
      bool done = false;
      if (backend_->test(p.recvReq[p.recvDone % slots], &done, nullptr) != braidSuccess) {
        broke();
        break;
      }
      if (!done) break;
      ++p.recvDone;
      arrived = true;
    }
    if (arrived) {
      rf->head.store(p.recvDone, std::memory_order_release);
      ringRank = moved = true;
    }
  }
  if (ringRank) rankBell_->ring();
  return moved;
}

void NetProxy::loop() {
  LogRankScope rankScope(rank_);
  unsigned idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (pass()) {
      idle = 0;
      continue;
    }
    if (++idle < 8) continue;
    // Sleep protocol of Doorbell: announce, re-check, then wait.
    bell_.sleeping.store(1, std::memory_order_seq_cst);
    if (pass()) {
      bell_.sleeping.store(0, std::memory_order_relaxed);
      idle = 0;
      continue;
    }
    // Everything that arrived is published: a peer that closed cleanly sends no more.
    bool closed = false;
    for (auto& p : peers_) {
      if (p->failed) continue;
      if (const char* why = backend_->peerClosed(p->rank)) {
        p->failed = closed = true;
        p->gone.store(true, std::memory_order_release);
        p->conn->why = why;
        p->conn->failed.store(true, std::memory_order_release);
      }
    }
    if (closed) rankBell_->ring();
    if (!backend_->arm()) {
      bell_.sleeping.store(0, std::memory_order_relaxed);
      idle = 0;
      continue;
    }
    epoll_event evs[4];
    epoll_wait(epollFd_, evs, 4, backend_->waitFd() >= 0 ? 1000 : 1);
    uint64_t count;
    (void)!read(bell_.eventFd, &count, sizeof(count));
    bell_.sleeping.store(0, std::memory_order_relaxed);
    idle = 0;
  }
}

}  // namespace braid
