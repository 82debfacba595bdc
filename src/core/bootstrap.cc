#include "core/bootstrap.h"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "core/config.h"
#include "core/error.h"
#include "core/socket.h"

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

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: no early exit on the first differing byte
  for (int i = 0; i < 32; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

braidResult_t sendStatus(int fd, braidResult_t code, const std::string& msg, Deadline d) {
  Status s{static_cast<uint32_t>(code), static_cast<uint32_t>(msg.size())};
  BRAID_TRY(sendAll(fd, &s, sizeof(s), d));
  return sendAll(fd, msg.data(), msg.size(), d);
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
    Deadline joinBy = deadlineAfter(config().timeoutSec);
    std::string err;
    if (!acceptAll(joinBy, &err)) {
      for (int fd : fds_)
        if (fd >= 0) sendStatus(fd, braidInvalidUsage, err, deadlineAfter(5));
      return;
    }
    ::close(listenFd_);
    listenFd_ = -1;
    while (serveRound()) {
    }
  }

 private:
  bool acceptAll(Deadline joinBy, std::string* err) {
    int joined = 0;
    while (nranks_ < 0 || joined < nranks_) {
      int fd = -1;
      if (acceptBefore(listenFd_, joinBy, &fd) != braidSuccess) {
        *err = "bootstrap root: only " + std::to_string(joined) + " of " + std::to_string(nranks_) +
               " ranks joined within BRAID_TIMEOUT; missing ranks:";
        for (int r = 0; r < nranks_; ++r)
          if (fds_[r] < 0) *err += " " + std::to_string(r);
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
    Deadline d = deadlineAfter(config().timeoutSec);
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
  Deadline d = deadlineAfter(config().timeoutSec);
  int fd = -1;
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
  Deadline d = deadlineAfter(config().timeoutSec);
  uint64_t len = mine.size();
  braidResult_t res = sendAll(fd_, &len, sizeof(len), d);
  if (res == braidSuccess) res = sendAll(fd_, mine.data(), mine.size(), d);
  Status s{};
  if (res == braidSuccess) res = recvAll(fd_, &s, sizeof(s), d);
  if (res == braidTimeout)
    return fail(braidTimeout, "bootstrap: other ranks did not join within BRAID_TIMEOUT=%g s",
                config().timeoutSec);
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
