// The tcp network backend: non-blocking sockets, edge-triggered epoll, pieces striped over
// several sockets per peer.
//
// Each direction of each pair has its own BRAID_NSOCKS_PERPEER sockets (the sender
// connects, the receiver accepts, as NCCL's socket net does): piece k travels on socket
// k % nsocks, so a large message keeps several streams busy while each socket stays in
// order. On the wire a piece is an 8-byte little-endian length, then the bytes. Every
// connection first sends a hello {secret, rank, socket index}; the acceptor refuses and
// logs one that does not prove the job's secret. Nagle is off on every socket.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "transport/net.h"

namespace braid {
namespace {

struct Hello {
  uint8_t secret[32];
  uint32_t rank;
  uint32_t socket;
  uint32_t nsocks;
  uint32_t magic;
};
constexpr uint32_t kHelloMagic = 0x50435442;  // "BTCP"

struct Socket;

struct Request {
  Socket* sock = nullptr;
  uint64_t piece = 0;
  int peer = 0;
  bool isSend = false;
  char* data = nullptr;
  size_t capacity = 0;         // receive: room at data; send: bytes to send
  const char* head = nullptr;  // gather send: headBytes at head come before data
  size_t headBytes = 0;
  uint64_t header = 0;  // the piece's length on the wire
  size_t headerDone = 0;
  size_t bytesDone = 0;
  bool done = false;
};

struct Socket {
  int fd = -1;
  int peer = 0;
  bool isSend = false;
  std::deque<Request*> queue;  // posted, not yet finished, in piece order
  uint64_t nextPiece = 0;      // receive sockets: the piece the stream carries next
  std::string error;           // set once the socket failed
  bool closed = false;         // the peer closed it cleanly between pieces
};

bool parseHandle(const std::string& handle, sockaddr_in* sa) {
  size_t colon = handle.rfind(':');
  if (colon == std::string::npos) return false;
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  int port = std::atoi(handle.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, handle.substr(0, colon).c_str(), &sa->sin_addr) == 1;
}

void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

class TcpBackend : public NetBackend {
 public:
  TcpBackend(int rank, int nranks, const uint8_t secret[32], int nsocks)
      : rank_(rank), nranks_(nranks), nsocks_(nsocks) {
    std::memcpy(secret_, secret, sizeof(secret_));
  }

  ~TcpBackend() override {
    for (Socket& s : sockets_)
      if (s.fd >= 0) ::close(s.fd);
    if (listenFd_ >= 0) ::close(listenFd_);
    if (epollFd_ >= 0) ::close(epollFd_);
  }

  braidResult_t start() {
    in_addr addr;
    std::string ifname;
    BRAID_TRY(chooseListenAddress(&addr, &ifname));
    sockaddr_in bound;
    BRAID_TRY(listenOn(addr, &listenFd_, &bound));
    handle_ = addressString(bound);
    BRAID_INFO("NET", "tcp: listening on %s (interface %s), %d sockets per peer and direction",
               handle_.c_str(), ifname.c_str(), nsocks_);
    epollFd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epollFd_ < 0) return fail(braidSystemError, "epoll_create1 failed: %s", strerror(errno));
    return braidSuccess;
  }

  const char* name() const override { return "tcp"; }
  std::string handle() const override { return handle_; }

  braidResult_t connect(const std::vector<std::string>& handles, const std::vector<char>& remote,
                        Deadline deadline) override {
    sendSock_.assign(nranks_, -1);
    recvSock_.assign(nranks_, -1);
    int expected = 0;
    for (int p = 0; p < nranks_; ++p) expected += remote[p] && p != rank_;
    // Every rank connects to every peer, so accept on a second thread meanwhile: no rank
    // may wait for its own connects before accepting (listen backlogs are finite).
    std::vector<std::vector<int>> byPeer(nranks_);
    braidResult_t acceptRes = braidSuccess;
    std::string acceptError;
    const int logRankHere = logRank();
    const std::atomic<bool>* abortFlag = waitAbortFlag();  // a non-blocking init's
    std::thread acceptor([&] {
      LogRankScope scope(logRankHere);
      WaitAbortScope abortable(abortFlag);
      acceptRes = acceptAll(remote, expected * nsocks_, deadline, &byPeer);
      if (acceptRes != braidSuccess) acceptError = lastError();
    });
    braidResult_t res = connectAll(handles, remote, deadline);
    if (res != braidSuccess) acceptStop_.store(true);
    acceptor.join();
    acceptStop_.store(false);
    auto closeAccepted = [&] {
      for (auto& fds : byPeer)
        for (int fd : fds)
          if (fd >= 0) ::close(fd);
    };
    if (res != braidSuccess) {
      closeAccepted();
      return res;
    }
    if (acceptRes != braidSuccess) {
      closeAccepted();
      return failVerbatim(acceptRes, acceptError);
    }
    for (int p = 0; p < nranks_; ++p) {
      if (byPeer[p].empty()) continue;
      recvSock_[p] = static_cast<int>(sockets_.size());
      for (int fd : byPeer[p]) {
        addSocket(fd, p, false);
        sockets_.back().nextPiece = sockets_.size() - 1 - static_cast<size_t>(recvSock_[p]);
      }
    }
    ::close(listenFd_);
    listenFd_ = -1;
    for (Socket& s : sockets_) {
      epoll_event ev{};
      ev.events = (s.isSend ? EPOLLOUT : EPOLLIN | EPOLLRDHUP) | EPOLLET;
      ev.data.ptr = &s;
      if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, s.fd, &ev) != 0)
        return fail(braidSystemError, "epoll_ctl failed: %s", strerror(errno));
    }
    return braidSuccess;
  }

  braidResult_t isend(int peer, const void* data, size_t bytes, uint64_t piece,
                      void** req) override {
    return post(peer, true, const_cast<void*>(data), bytes, piece, req);
  }
  bool gatherSends() const override { return true; }
  braidResult_t isendGather(int peer, const void* head, size_t headBytes, const void* data,
                            size_t bytes, uint64_t piece, void** req) override {
    BRAID_TRY(post(peer, true, const_cast<void*>(data), bytes, piece, req));
    auto* r = static_cast<Request*>(*req);
    r->head = static_cast<const char*>(head);
    r->headBytes = headBytes;
    r->header = headBytes + bytes;
    return braidSuccess;
  }
  braidResult_t irecv(int peer, void* data, size_t capacity, uint64_t piece, void** req) override {
    return post(peer, false, data, capacity, piece, req);
  }

  braidResult_t test(void* req, bool* done, size_t* bytes) override {
    auto* r = static_cast<Request*>(req);
    if (!r->done) {
      if (!r->sock->error.empty() && !r->sock->closed)
        return fail(braidRemoteError, "tcp: connection %s rank %d broke: %s",
                    r->isSend ? "to" : "from", r->peer, r->sock->error.c_str());
      *done = false;
      return braidSuccess;
    }
    *done = true;
    if (bytes) *bytes = r->isSend ? r->capacity : r->header;
    free_.push_back(r);
    return braidSuccess;
  }

  braidResult_t progress(bool* progressed) override {
    for (Socket& s : sockets_) {
      if (s.queue.empty() || !s.error.empty()) continue;
      if (s.isSend)
        drainSends(&s, progressed);
      else
        fillRecvs(&s, progressed);
    }
    return braidSuccess;
  }

  int waitFd() override { return epollFd_; }

  const char* peerClosed(int peer) const override {
    // Closed once every stream from the peer has ended: the others may still carry pieces.
    // A stream with no receive posted at a piece boundary is probed without reading.
    if (peer < 0 || peer >= nranks_ || recvSock_[peer] < 0) return nullptr;
    for (int k = 0; k < nsocks_; ++k) {
      Socket& s = sockets_[recvSock_[peer] + k];
      const bool atBoundary = s.queue.empty() || s.queue.front()->headerDone == 0;
      if (!s.closed && s.error.empty() && atBoundary) {
        char c;
        if (recv(s.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
          s.closed = true;
          s.error = "rank " + std::to_string(peer) +
                    " closed its connection (its process exited or destroyed the communicator)";
        }
      }
      if (!s.closed) return nullptr;
    }
    return sockets_[recvSock_[peer]].error.c_str();
  }

  // Edge-triggered: an event left on the epoll's ready list since the last progress()
  // means something may have moved; consume them and say "do not sleep".
  bool arm() override {
    epoll_event evs[64];
    int n = epoll_wait(epollFd_, evs, 64, 0);
    return n <= 0;
  }

 private:
  // nsocks_ connections to every remote peer, each opened with a hello.
  braidResult_t connectAll(const std::vector<std::string>& handles, const std::vector<char>& remote,
                           Deadline deadline) {
    for (int p = 0; p < nranks_; ++p) {
      if (!remote[p] || p == rank_) continue;
      sockaddr_in sa;
      if (!parseHandle(handles[p], &sa))
        return fail(braidInternalError, "tcp: rank %d sent a malformed address \"%s\"", p,
                    handles[p].c_str());
      sendSock_[p] = static_cast<int>(sockets_.size());
      for (int k = 0; k < nsocks_; ++k) {
        int fd = -1;
        braidResult_t res = connectTo(sa, deadline, &fd);
        if (res != braidSuccess)
          return fail(res, "tcp: cannot connect to rank %d at %s: %s", p, handles[p].c_str(),
                      lastError());
        Hello h{};
        std::memcpy(h.secret, secret_, sizeof(secret_));
        h.rank = static_cast<uint32_t>(rank_);
        h.socket = static_cast<uint32_t>(k);
        h.nsocks = static_cast<uint32_t>(nsocks_);
        h.magic = kHelloMagic;
        res = sendAll(fd, &h, sizeof(h), deadline);
        if (res != braidSuccess) {
          ::close(fd);
          return fail(res, "tcp: hello to rank %d at %s failed: %s", p, handles[p].c_str(),
                      lastError());
        }
        addSocket(fd, p, true);
      }
    }
    return braidSuccess;
  }

  // Accepts `expected` connections, reading their hellos as they come (a stranger that sends
  // nothing holds up no one; it is dropped after 10 s), into byPeer[rank][socket].
  braidResult_t acceptAll(const std::vector<char>& remote, int expected, Deadline deadline,
                          std::vector<std::vector<int>>* byPeer) {
    struct Pending {
      int fd;
      std::string from;
      Hello hello;
      size_t got;
      Clock::time_point since;
    };
    std::vector<Pending> pending;
    auto drop = [&](size_t i) {
      ::close(pending[i].fd);
      pending.erase(pending.begin() + static_cast<long>(i));
    };
    auto cleanup = [&] {
      while (!pending.empty()) drop(pending.size() - 1);
    };
    fcntl(listenFd_, F_SETFL, fcntl(listenFd_, F_GETFL) | O_NONBLOCK);
    std::vector<int> got(nranks_, 0);
    int accepted = 0;
    while (accepted < expected) {
      if (acceptStop_.load()) {
        cleanup();
        return braidSuccess;  // the connecting side failed and says why
      }
      if (waitAborted()) {
        cleanup();
        return fail(braidInvalidUsage, "tcp: init aborted while accepting connections");
      }
      if (Clock::now() > deadline) {
        cleanup();
        std::string missing;
        for (int p = 0; p < nranks_; ++p)
          if (remote[p] && p != rank_ && got[p] < nsocks_)
            missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        return fail(braidTimeout,
                    "tcp: ranks %s did not connect to this rank (%s) before the deadline "
                    "(BRAID_TIMEOUT)",
                    missing.c_str(), handle_.c_str());
      }
      std::vector<pollfd> fds{{listenFd_, POLLIN, 0}};
      for (const Pending& q : pending) fds.push_back({q.fd, POLLIN, 0});
      poll(fds.data(), fds.size(), 100);
      if (fds[0].revents & POLLIN) {
        for (;;) {
          sockaddr_in from{};
          socklen_t len = sizeof(from);
          int fd = accept4(listenFd_, reinterpret_cast<sockaddr*>(&from), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          pending.push_back({fd, addressString(from), Hello{}, 0, Clock::now()});
        }
      }
      for (size_t i = pending.size(); i-- > 0;) {
        Pending& q = pending[i];
        ssize_t n = recv(q.fd, reinterpret_cast<char*>(&q.hello) + q.got, sizeof(Hello) - q.got,
                         MSG_DONTWAIT);
        if (n > 0) q.got += static_cast<size_t>(n);
        const bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        const bool stale = Clock::now() - q.since > std::chrono::seconds(10);
        if (q.got < sizeof(Hello)) {
          if (closed || stale) {
            BRAID_WARN("NET", "tcp: dropped a connection from %s that sent no hello%s",
                       q.from.c_str(), stale ? " in 10 s" : "");
            drop(i);
          }
          continue;
        }
        if (q.hello.magic != kHelloMagic || !secretMatches(q.hello.secret)) {
          BRAID_WARN("NET", "tcp: refused a connection from %s that did not prove the job's secret",
                     q.from.c_str());
          drop(i);
          continue;
        }
        const Hello h = q.hello;
        int p = static_cast<int>(h.rank);
        if (p < 0 || p >= nranks_ || !remote[p] || p == rank_ ||
            h.nsocks != static_cast<uint32_t>(nsocks_) || h.socket >= h.nsocks ||
            ((*byPeer)[p].size() == static_cast<size_t>(nsocks_) && (*byPeer)[p][h.socket] >= 0)) {
          cleanup();
          return fail(braidInvalidUsage,
                      "tcp: unexpected connection from rank %u (socket %u of %u; this rank "
                      "expects %d per peer: is BRAID_NSOCKS_PERPEER the same on every rank?)",
                      h.rank, h.socket, h.nsocks, nsocks_);
        }
        if ((*byPeer)[p].empty()) (*byPeer)[p].assign(nsocks_, -1);
        (*byPeer)[p][h.socket] = q.fd;
        pending.erase(pending.begin() + static_cast<long>(i));
        ++got[p];
        ++accepted;
      }
    }
    cleanup();
    return braidSuccess;
  }

  bool secretMatches(const uint8_t* s) const {
    uint8_t diff = 0;
    for (size_t i = 0; i < sizeof(secret_); ++i) diff |= s[i] ^ secret_[i];
    return diff == 0;
  }

  void addSocket(int fd, int peer, bool isSend) {
    tuneSocket(fd);
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    Socket s;
    s.fd = fd;
    s.peer = peer;
    s.isSend = isSend;
    sockets_.push_back(std::move(s));
  }

  Socket& socketFor(int peer, bool isSend, uint64_t piece) {
    int first = isSend ? sendSock_[peer] : recvSock_[peer];
    return sockets_[first + static_cast<int>(piece % static_cast<uint64_t>(nsocks_))];
  }

  braidResult_t post(int peer, bool isSend, void* data, size_t bytes, uint64_t piece, void** out) {
    if (peer < 0 || peer >= nranks_ || (isSend ? sendSock_ : recvSock_)[peer] < 0)
      return fail(braidInternalError, "tcp: no connection %s rank %d", isSend ? "to" : "from",
                  peer);
    Request* r;
    if (free_.empty()) {
      all_.push_back(std::make_unique<Request>());
      r = all_.back().get();
    } else {
      r = free_.back();
      free_.pop_back();
      *r = Request();
    }
    r->peer = peer;
    r->isSend = isSend;
    r->data = static_cast<char*>(data);
    r->capacity = bytes;
    r->header = isSend ? bytes : 0;
    r->piece = piece;
    r->sock = &socketFor(peer, isSend, piece);
    // Sends go out in posting order; receives may be posted in any order and are kept in
    // piece order, which is the order their socket delivers them.
    std::deque<Request*>& q = r->sock->queue;
    auto at = q.end();
    if (!isSend)
      while (at != q.begin() && (*(at - 1))->piece > piece) --at;
    q.insert(at, r);
    *out = r;
    return braidSuccess;
  }

  void broke(Socket* s, const char* what, int err) {
    s->error = std::string(what) + (err ? std::string(": ") + strerror(err) : std::string());
    BRAID_WARN("NET", "tcp: connection %s rank %d: %s", s->isSend ? "to" : "from", s->peer,
               s->error.c_str());
  }

  void drainSends(Socket* s, bool* progressed) {
    while (!s->queue.empty()) {
      Request* r = s->queue.front();
      // On the wire: length, then the gathered head (if any), then the data.
      iovec iov[3];
      int n = 0;
      size_t at = r->bytesDone;  // bytes of head + data already sent
      if (r->headerDone < sizeof(r->header)) {
        iov[n].iov_base = reinterpret_cast<char*>(&r->header) + r->headerDone;
        iov[n++].iov_len = sizeof(r->header) - r->headerDone;
      }
      if (at < r->headBytes) {
        iov[n].iov_base = const_cast<char*>(r->head) + at;
        iov[n++].iov_len = r->headBytes - at;
      }
      const size_t total = r->headBytes + r->capacity;
      if (at < total && r->capacity > 0) {
        size_t d = at > r->headBytes ? at - r->headBytes : 0;
        iov[n].iov_base = r->data + d;
        iov[n++].iov_len = r->capacity - d;
      }
      if (n > 0) {
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(n);
        ssize_t w = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
          broke(s, "send failed", errno);
          return;
        }
        *progressed = true;
        size_t left = static_cast<size_t>(w);
        size_t h = std::min(left, sizeof(r->header) - r->headerDone);
        r->headerDone += h;
        r->bytesDone += left - h;
        if (r->headerDone < sizeof(r->header) || r->bytesDone < total) return;
      }
      r->done = true;
      s->queue.pop_front();
    }
  }

  void fillRecvs(Socket* s, bool* progressed) {
    while (!s->queue.empty()) {
      Request* r = s->queue.front();
      if (r->piece != s->nextPiece) return;  // the stream's next piece has no receive yet
      if (r->headerDone < sizeof(r->header)) {
        ssize_t got = recv(s->fd, reinterpret_cast<char*>(&r->header) + r->headerDone,
                           sizeof(r->header) - r->headerDone, MSG_DONTWAIT);
        if (got == 0 && r->headerDone == 0) {
          // Between pieces: the peer is done with this communicator (or gone). Quiet here;
          // a rank still waiting on it hears of it through peerClosed().
          s->closed = true;
          s->error = "rank " + std::to_string(s->peer) +
                     " closed its connection (its process exited or destroyed the communicator)";
          return;
        }
        if (!readOk(s, got)) return;
        *progressed = true;
        r->headerDone += static_cast<size_t>(got);
        if (r->headerDone < sizeof(r->header)) return;
        if (r->header > r->capacity) {
          broke(s,
                ("a piece of " + std::to_string(r->header) + " bytes arrived for a buffer of " +
                 std::to_string(r->capacity) + " (different BRAID_CHUNKSIZE?)")
                    .c_str(),
                0);
          return;
        }
      }
      while (r->bytesDone < r->header) {
        ssize_t got = recv(s->fd, r->data + r->bytesDone, r->header - r->bytesDone, MSG_DONTWAIT);
        if (!readOk(s, got)) return;
        *progressed = true;
        r->bytesDone += static_cast<size_t>(got);
      }
      s->nextPiece += static_cast<uint64_t>(nsocks_);
      r->done = true;
      s->queue.pop_front();
    }
  }

  // False when nothing more can be read now; marks the socket broken on EOF or error.
  bool readOk(Socket* s, ssize_t got) {
    if (got > 0) return true;
    if (got == 0) {
      broke(s, "the peer closed the connection in the middle of a piece", 0);
      return false;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    broke(s, "receive failed", errno);
    return false;
  }

  int rank_;
  int nranks_;
  int nsocks_ = 1;
  uint8_t secret_[32];
  int listenFd_ = -1;
  int epollFd_ = -1;
  std::atomic<bool> acceptStop_{false};  // connect() failed: the acceptor gives up
  std::string handle_;
  mutable std::vector<Socket> sockets_;        // peerClosed() may probe and mark them
  std::vector<int> sendSock_, recvSock_;       // index of each peer's first socket, or -1
  std::vector<std::unique_ptr<Request>> all_;  // every request ever made; free_ lends them
  std::vector<Request*> free_;
};

}  // namespace

braidResult_t createTcpBackend(int rank, int nranks, const uint8_t secret[32],
                               std::unique_ptr<NetBackend>* out, int nsocks) {
  auto b = std::make_unique<TcpBackend>(rank, nranks, secret,
                                        nsocks > 0 ? nsocks : config().nsocksPerPeer);
  BRAID_TRY(b->start());
  *out = std::move(b);
  return braidSuccess;
}

}  // namespace braid
