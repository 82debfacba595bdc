#include "core/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/socket.h"

namespace braid {
namespace {

// Bytes of the first message a rank sends: proves the secret, then says who it is.
struct Hello {
  uint32_t magic;
  uint8_t secret[32];
  int32_t rank;
  int32_t nranks;
};

// Every root-to-rank message starts with a status; a non-zero code carries a message.
struct Status {
  uint32_t code;
  uint32_t msgBytes;
};

constexpr size_t kMaxBlob = 64u << 20;

uint64_t fnv1a(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

braidResult_t sendStatus(int fd, braidResult_t code, const std::string& msg, Deadline d) {
  Status s{static_cast<uint32_t>(code), static_cast<uint32_t>(msg.size())};
  BRAID_TRY(sendAll(fd, &s, sizeof(s), d));
  return sendAll(fd, msg.data(), msg.size(), d);
}

// Connects to a root that may not be listening yet: retries (10 ms, doubling to 500 ms)
// until the deadline.
braidResult_t connectRetrying(const sockaddr_in& sa, Deadline deadline, int* fd) {
  auto pause = std::chrono::milliseconds(10);
  int attempts = 0;
  while (true) {
    ++attempts;
    int err = connectQuietly(sa, deadline, fd);
    if (err == 0) {
      if (attempts > 1)
        BRAID_INFO("BOOTSTRAP", "reached the bootstrap root at %s after %d attempts",
                   addressString(sa).c_str(), attempts);
      return braidSuccess;
    }
    if (waitAborted())
      return fail(braidInvalidUsage,
                  "init aborted while connecting to the bootstrap root at %s (braidCommAbort)",
                  addressString(sa).c_str());
    const Clock::time_point now = Clock::now();
    if (now >= deadline)
      return fail(braidTimeout,
                  "no bootstrap root accepted a connection at %s within BRAID_TIMEOUT=%g s "
                  "(%d attempts, last: %s); rank 0 starts it there: is rank 0 running, on the "
                  "host BRAID_COMM_ID or MASTER_ADDR names, with the same variables?",
                  addressString(sa).c_str(), waitTimeoutSec(), attempts, strerror(err));
    // In slices, so that an abort (waitAborted) is seen within kAbortPollMs.
    const Deadline until = std::min<Deadline>(now + pause, deadline);
    while (Clock::now() < until && !waitAborted())
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(kAbortPollMs), until - Clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

// SHA-256 round constants (FIPS 180-4 section 4.2.2).
constexpr uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256Block(uint32_t h[8], const uint8_t* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t{block[4 * i]} << 24 | uint32_t{block[4 * i + 1]} << 16 |
           uint32_t{block[4 * i + 2]} << 8 | uint32_t{block[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// The root's side of one job.
class Root {
 public:
  Root(int listenFd, const UniqueIdData& id) : listenFd_(listenFd), id_(id) {}
  ~Root() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
    ::close(listenFd_);
  }

  void run() {
    Deadline joinBy = deadlineAfter(waitTimeoutSec());
    std::string err;
    braidResult_t code = braidInvalidUsage;
    if (!acceptAll(joinBy, &err, &code)) {
      for (int fd : fds_)
        if (fd >= 0) sendStatus(fd, code, err, deadlineAfter(5));
      return;
    }
    ::close(listenFd_);
    listenFd_ = -1;
    while (serveRound()) {
    }
  }

 private:
  // False, with the message and result code for the ranks that joined, when some never did
  // (braidTimeout) or one joined with different arguments (braidInvalidUsage).
  bool acceptAll(Deadline joinBy, std::string* err, braidResult_t* code) {
    int joined = 0;
    while (nranks_ < 0 || joined < nranks_) {
      int fd = -1;
      if (acceptBefore(listenFd_, joinBy, &fd) != braidSuccess) {
        *err = "bootstrap root: only " + std::to_string(joined) + " of " + std::to_string(nranks_) +
               " ranks joined within BRAID_TIMEOUT; missing:";
        int listed = 0;
        for (int r = 0; r < nranks_; ++r) {
          if (fds_[r] >= 0) continue;
          if (listed++ == 16) {
            *err += " and " + std::to_string(nranks_ - joined - 16) + " more";
            break;
          }
          *err += std::string(listed > 1 ? "," : "") + " rank " + std::to_string(r);
        }
        *err += " (not started, crashed, or given another unique id)";
        *code = braidTimeout;
        return false;
      }
      Hello h{};
      // A stranger gets 5 s to prove the secret; nothing else is read from it first.
      if (recvAll(fd, &h, sizeof(h), deadlineAfter(5)) != braidSuccess ||
          h.magic != UniqueIdData::kMagic || !secretEqual(h.secret, id_.secret)) {
        BRAID_WARN("BOOTSTRAP",
                   "refused a bootstrap connection: it did not prove the job's secret "
                   "(a stranger, or a unique id from another run)");
        ::close(fd);
        continue;
      }
      if (nranks_ < 0) {
        if (h.nranks < 1 || h.nranks > (1 << 24)) {
          sendStatus(fd, braidInvalidArgument, "nranks out of range", deadlineAfter(5));
          ::close(fd);
          continue;
        }
        nranks_ = h.nranks;
        fds_.assign(nranks_, -1);
      }
      if (h.nranks != nranks_ || h.rank < 0 || h.rank >= nranks_ || fds_[h.rank] >= 0) {
        *err =
            "bootstrap: rank " + std::to_string(h.rank) + " joined with nranks " +
            std::to_string(h.nranks) + " but the job has nranks " + std::to_string(nranks_) +
            (h.rank >= 0 && h.rank < nranks_ && fds_[h.rank] >= 0 ? " and that rank already joined"
                                                                  : "") +
            "; every rank must pass the same nranks and a distinct rank";
        sendStatus(fd, braidInvalidUsage, *err, deadlineAfter(5));
        ::close(fd);
        return false;
      }
      fds_[h.rank] = fd;
      ++joined;
    }
    return true;
  }

  // One all-gather: read a blob from each rank, send all blobs to each. Returns false when
  // the ranks have closed (init finished) or on error.
  bool serveRound() {
    std::vector<std::string> blobs(nranks_);
    Deadline d = deadlineAfter(waitTimeoutSec());
    int closed = 0;
    for (int r = 0; r < nranks_; ++r) {
      uint64_t len = 0;
      braidResult_t res = recvAll(fds_[r], &len, sizeof(len), d);
      if (res == braidSuccess && len > kMaxBlob) res = braidInvalidUsage;
      if (res == braidSuccess) {
        blobs[r].resize(len);
        res = recvAll(fds_[r], blobs[r].data(), len, d);
      }
      if (res != braidSuccess) {
        ::close(fds_[r]);
        fds_[r] = -1;
        ++closed;
      }
    }
    if (closed == nranks_) return false;
    if (closed > 0) {
      std::string msg = "bootstrap: ranks left during init:";
      for (int r = 0; r < nranks_; ++r)
        if (fds_[r] < 0) msg += " " + std::to_string(r);
      for (int fd : fds_)
        if (fd >= 0) sendStatus(fd, braidRemoteError, msg, deadlineAfter(5));
      return false;
    }
    std::string all;
    for (const std::string& b : blobs) {
      uint64_t len = b.size();
      all.append(reinterpret_cast<const char*>(&len), sizeof(len));
      all += b;
    }
    for (int r = 0; r < nranks_; ++r) {
      if (sendStatus(fds_[r], braidSuccess, "", d) != braidSuccess ||
          sendAll(fds_[r], all.data(), all.size(), d) != braidSuccess)
        return false;
    }
    return true;
  }

  int listenFd_;
  UniqueIdData id_;
  int nranks_ = -1;
  std::vector<int> fds_;
};

}  // namespace

uint64_t uniqueIdChecksum(const UniqueIdData& id) {
  return fnv1a(&id, offsetof(UniqueIdData, checksum));
}

braidResult_t createUniqueId(braidUniqueId* id) {
  UniqueIdData data{};
  data.magic = UniqueIdData::kMagic;
  BRAID_TRY(randomBytes(data.secret, sizeof(data.secret)));
  in_addr addr{};
  std::string ifname;
  BRAID_TRY(chooseListenAddress(&addr, &ifname));
  int fd = -1;
  BRAID_TRY(listenOn(addr, &fd, &data.root));
  data.checksum = fnv1a(&data, offsetof(UniqueIdData, checksum));
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &data, sizeof(data));
  BRAID_INFO("BOOTSTRAP", "bootstrap root listening on %s (%s)", addressString(data.root).c_str(),
             ifname.c_str());
  std::thread([fd, data] {
    Root root(fd, data);
    root.run();
  }).detach();
  return braidSuccess;
}

void sha256(const void* data, size_t len, uint8_t out[32]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t left = len;
  for (; left >= 64; left -= 64, p += 64) sha256Block(h, p);
  // Last block(s): the rest, 0x80, zeros, then the length in bits, big-endian.
  uint8_t tail[128] = {0};
  std::memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t tailLen = left + 9 <= 64 ? 64 : 128;
  uint64_t bits = static_cast<uint64_t>(len) * 8;
  for (int i = 0; i < 8; ++i) tail[tailLen - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  sha256Block(h, tail);
  if (tailLen == 128) sha256Block(h, tail + 64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h[i] >> (24 - 8 * j));
}

void makeUniqueId(const sockaddr_in& root, const uint8_t secret[32], braidUniqueId* id) {
  UniqueIdData data{};
  data.magic = UniqueIdData::kMagic;
  data.flags = UniqueIdData::kRetryConnect;
  data.root = root;
  std::memcpy(data.secret, secret, sizeof(data.secret));
  data.checksum = fnv1a(&data, offsetof(UniqueIdData, checksum));
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &data, sizeof(data));
}

braidResult_t createRootAt(const sockaddr_in& root, const uint8_t secret[32],
                           const std::string& origin, braidUniqueId* id) {
  const int port = ntohs(root.sin_port);
  // Is the address this host's? Binding it with an ephemeral port says so.
  int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return fail(braidSystemError, "socket() failed: %s", strerror(errno));
  sockaddr_in local = root;
  local.sin_port = 0;
  if (bind(probe, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    int e = errno;
    ::close(probe);
    if (e == EADDRNOTAVAIL) {
      char ip[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &root.sin_addr, ip, sizeof(ip));
      return fail(braidInvalidArgument,
                  "%s: rank 0 starts the bootstrap root there, but %s is not an address of this "
                  "host; run rank 0 on that host or point the variable at rank 0's host",
                  origin.c_str(), ip);
    }
    return fail(braidSystemError, "%s: cannot bind %s: %s", origin.c_str(),
                addressString(local).c_str(), strerror(e));
  }
  ::close(probe);
  // Listen on every interface, as torch's TCPStore does: the name may resolve to another
  // of this host's addresses here (127.0.1.1) than on the other hosts.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(braidSystemError, "socket() failed: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // rebind past TIME_WAIT
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = root.sin_port;
  if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 || listen(fd, 1024) != 0) {
    int e = errno;
    ::close(fd);
    return fail(braidSystemError, "%s: rank 0 cannot start the bootstrap root on port %d: %s%s",
                origin.c_str(), port, strerror(e),
                e == EADDRINUSE ? " (another process listens there: a previous run still "
                                  "alive, or another service; choose a free port)"
                                : "");
  }
  UniqueIdData data;
  makeUniqueId(root, secret, id);
  std::memcpy(&data, id->internal, sizeof(data));
  BRAID_INFO("BOOTSTRAP", "bootstrap root listening on port %d for %s", port, origin.c_str());
  std::thread([fd, data] {
    Root r(fd, data);
    r.run();
  }).detach();
  return braidSuccess;
}

braidResult_t decodeUniqueId(const braidUniqueId& id, UniqueIdData* out) {
  std::memcpy(out, id.internal, sizeof(*out));
  if (out->magic != UniqueIdData::kMagic)
    return fail(
        braidInvalidArgument,
        "commId is not a Braid unique id (bad magic); pass the bytes braidGetUniqueId wrote");
  if (out->checksum != fnv1a(out, offsetof(UniqueIdData, checksum)))
    return fail(braidInvalidArgument, "commId is corrupted (checksum mismatch)");
  return braidSuccess;
}

braidResult_t Bootstrap::join(const braidUniqueId& id, int rank, int nranks,
                              std::unique_ptr<Bootstrap>* out) {
  UniqueIdData data;
  BRAID_TRY(decodeUniqueId(id, &data));
  Deadline d = deadlineAfter(waitTimeoutSec());
  int fd = -1;
  if (data.flags & UniqueIdData::kRetryConnect)
    BRAID_TRY(connectRetrying(data.root, d, &fd));
  else
    BRAID_TRY(connectTo(data.root, d, &fd));
  std::unique_ptr<Bootstrap> b(new Bootstrap(fd, rank, nranks));
  Hello h{};
  h.magic = UniqueIdData::kMagic;
  std::memcpy(h.secret, data.secret, sizeof(h.secret));
  h.rank = rank;
  h.nranks = nranks;
  BRAID_TRY(sendAll(fd, &h, sizeof(h), d));
  *out = std::move(b);
  return braidSuccess;
}

Bootstrap::~Bootstrap() { close(); }

void Bootstrap::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

braidResult_t Bootstrap::allGather(const std::string& mine, std::vector<std::string>* all) {
  if (fd_ < 0) return fail(braidInternalError, "bootstrap used after close");
  Deadline d = deadlineAfter(waitTimeoutSec());
  uint64_t len = mine.size();
  braidResult_t res = sendAll(fd_, &len, sizeof(len), d);
  if (res == braidSuccess) res = sendAll(fd_, mine.data(), mine.size(), d);
  Status s{};
  if (res == braidSuccess) res = recvAll(fd_, &s, sizeof(s), d);
  // The root gives up at the same timeout, then says which ranks never joined: a little
  // longer for its verdict.
  if (res == braidTimeout) {
    d = deadlineAfter(3);
    res = recvAll(fd_, &s, sizeof(s), d);
  }
  if (res != braidSuccess && waitAborted()) return res;  // its message says so
  if (res == braidTimeout)
    return fail(braidTimeout, "bootstrap: other ranks did not join within BRAID_TIMEOUT=%g s",
                waitTimeoutSec());
  if (res != braidSuccess)
    return fail(braidRemoteError,
                "bootstrap root closed the connection: it refused this rank's secret (a unique id "
                "from another run?) or its process exited");
  if (s.code != braidSuccess) {
    std::string msg(s.msgBytes < 4096 ? s.msgBytes : 4096, '\0');
    recvAll(fd_, msg.data(), msg.size(), d);
    return fail(static_cast<braidResult_t>(s.code), "%s", msg.c_str());
  }
  all->assign(nranks_, std::string());
  for (int r = 0; r < nranks_; ++r) {
    uint64_t n = 0;
    BRAID_TRY(recvAll(fd_, &n, sizeof(n), d));
    if (n > kMaxBlob) return fail(braidInternalError, "bootstrap: oversized blob from root");
    (*all)[r].resize(n);
    BRAID_TRY(recvAll(fd_, (*all)[r].data(), n, d));
  }
  return braidSuccess;
}

braidResult_t Bootstrap::barrier() {
  std::vector<std::string> ignored;
  return allGather(std::string(), &ignored);
}

}  // namespace braid
