#include "core/control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/error.h"

namespace braid {
namespace {

constexpr int32_t kMaxControlRanks = 1 << 20;
// A connection gets this long to send its header; nothing else is read from it first.
// Connections wait for theirs side by side (poll), so a silent one holds up no other.
constexpr double kHeaderSec = 2.0;
// Once a connection is readable, its header must be whole within this long: a stranger that
// sends part of one holds the thread up this long at most.
constexpr double kHeaderReadSec = 0.2;

}  // namespace

braidResult_t ControlPlane::create(const uint8_t secret[32], int rank,
                                   std::function<void(int from, const std::string&)> onRevoke,
                                   std::unique_ptr<ControlPlane>* out) {
  std::unique_ptr<ControlPlane> p(new ControlPlane());
  in_addr addr{};
  std::string ifname;
  BRAID_TRY(chooseListenAddress(&addr, &ifname));
  sockaddr_in bound{};
  BRAID_TRY(listenOn(addr, &p->listenFd_, &bound));
  if (pipe2(p->wakeFds_, O_CLOEXEC) != 0)
    return fail(braidSystemError, "control plane: pipe: %s", strerror(errno));
  std::memcpy(p->secret_, secret, sizeof p->secret_);
  p->rank_ = rank;
  p->address_ = addressString(bound);
  p->onRevoke_ = std::move(onRevoke);
  ControlPlane* self = p.get();
  p->thread_ = std::thread([self] { self->serve(); });
  *out = std::move(p);
  return braidSuccess;
}

void ControlPlane::stop() {
  stopping_.store(true);
  if (wakeFds_[1] >= 0) {
    const char c = 1;
    (void)!write(wakeFds_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  if (revoker_.joinable()) revoker_.join();
}

ControlPlane::~ControlPlane() {
  stop();
  for (AgreeRequest& r : mailbox_) ::close(r.fd);
  for (int fd : {listenFd_, wakeFds_[0], wakeFds_[1]})
    if (fd >= 0) ::close(fd);
}

void ControlPlane::setPeers(const std::vector<std::string>& addresses) {
  std::lock_guard<std::mutex> lock(mu_);
  peers_ = addresses;
}

bool ControlPlane::peerAddress(int rank, sockaddr_in* sa) const {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(mu_));
    if (rank < 0 || rank >= static_cast<int>(peers_.size())) return false;
    text = peers_[static_cast<size_t>(rank)];
  }
  return !text.empty() && parseAddress(text, sa);
}

void ControlPlane::serve() {
  // Accepted connections that have not sent their header yet, and since when.
  std::vector<std::pair<int, Clock::time_point>> waiting;
  while (!stopping_.load()) {
    std::vector<pollfd> fds = {{listenFd_, POLLIN, 0}, {wakeFds_[0], POLLIN, 0}};
    int timeoutMs = -1;
    const auto now = Clock::now();
    for (const auto& [fd, since] : waiting) {
      fds.push_back({fd, POLLIN, 0});
      const auto left =
          since + std::chrono::milliseconds(static_cast<int>(kHeaderSec * 1000)) - now;
      const int ms = static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
      timeoutMs = timeoutMs < 0 ? ms : std::min(timeoutMs, ms);
    }
    if (poll(fds.data(), fds.size(), timeoutMs) < 0) {
      if (errno == EINTR) continue;
      BRAID_WARN("CONTROL", "control plane: poll: %s; revocations no longer arrive",
                 strerror(errno));
      break;
    }
    if (fds[1].revents) break;
    std::vector<std::pair<int, Clock::time_point>> still;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (fds[i + 2].revents)
        handle(waiting[i].first);  // closes it or hands it on
      else if (Clock::now() - waiting[i].second > std::chrono::duration<double>(kHeaderSec))
        ::close(waiting[i].first);  // a probe, or a silent stranger
      else
        still.push_back(waiting[i]);
    }
    waiting.swap(still);
    if (fds[0].revents & POLLIN) {
      const int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) waiting.emplace_back(fd, Clock::now());
    }
  }
  for (const auto& w : waiting) ::close(w.first);
}

void ControlPlane::handle(int fd) {
  ControlHeader h{};
  // Quietly: a probe (connect and close) sends nothing, and is no error.
  if (recvAll(fd, &h, sizeof h, deadlineAfter(kHeaderReadSec)) != braidSuccess) {
    ::close(fd);
    return;
  }
  if (h.magic != ControlHeader::kMagic || !secretEqual(h.secret, secret_) || h.count < 0 ||
      h.count > kMaxControlRanks) {
    BRAID_WARN("CONTROL",
               "refused a control connection: it did not prove the job's secret (a stranger, "
               "or a communicator of another run)");
    ::close(fd);
    return;
  }
  std::vector<int32_t> ranks(static_cast<size_t>(h.count));
  if (h.count > 0 && recvAll(fd, ranks.data(), ranks.size() * sizeof(int32_t),
                             deadlineAfter(kHeaderSec)) != braidSuccess) {
    ::close(fd);
    return;
  }
  if (h.type == static_cast<uint32_t>(ControlType::kRevoke)) {
    ::close(fd);
    // The rank that revoked first travels in the body (a forwarder sends it on).
    // Then the reason's length in bytes and its bytes, packed into the words after it.
    const int origin = ranks.empty() ? h.from : ranks[0];
    std::string reason;
    if (ranks.size() >= 2 && ranks[1] > 0 &&
        static_cast<size_t>(ranks[1]) <= (ranks.size() - 2) * sizeof(int32_t))
      reason.assign(reinterpret_cast<const char*>(ranks.data() + 2), static_cast<size_t>(ranks[1]));
    if (onRevoke_ && origin >= 0 && origin < nranks()) onRevoke_(origin, reason);
    return;
  }
  if (h.type == static_cast<uint32_t>(ControlType::kPut)) {
    if (onPut_ && h.from >= 0 && h.from < nranks()) onPut_(fd, h.from, ranks);
    ::close(fd);
    return;
  }
  if (h.type == static_cast<uint32_t>(ControlType::kWhere)) {
    const CallWhere where = onWhere_ ? onWhere_(h.epoch) : CallWhere{};
    const std::string saved = lastError();  // this thread's; quietly, as a probe
    if (sendAll(fd, &where, sizeof where, deadlineAfter(kHeaderReadSec)) != braidSuccess)
      failVerbatim(braidSuccess, saved);
    ::close(fd);
    return;
  }
  if (h.type != static_cast<uint32_t>(ControlType::kAgree)) {
    ::close(fd);
    return;
  }
  AgreeRequest r;
  r.fd = fd;
  r.from = h.from;
  r.epoch = h.epoch;
  r.excluded.assign(ranks.begin(), ranks.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    // This rank waits on another coordinator in that agreement: it says which, at once.
    if (r.epoch == roleEpoch_ && roleCoordinator_ >= 0 && roleCoordinator_ != rank_) {
      redirect(r.fd, roleCoordinator_);
      return;
    }
    mailbox_.push_back(std::move(r));
  }
  cv_.notify_all();
}

void ControlPlane::redirect(int fd, int coordinator) {
  const std::string saved = lastError();
  AgreeVerdict v{};
  v.verdict = AgreeVerdict::kRedirect;
  v.count = 1;
  const int32_t c = coordinator;
  const Deadline d = deadlineAfter(1.0);
  if (sendAll(fd, &v, sizeof v, d) == braidSuccess) sendAll(fd, &c, sizeof c, d);
  failVerbatim(braidSuccess, saved);
  ::close(fd);
}

void ControlPlane::setAgreeRole(uint64_t epoch, int coordinator) {
  std::lock_guard<std::mutex> lock(mu_);
  roleEpoch_ = epoch;
  roleCoordinator_ = coordinator;
  if (coordinator < 0 || coordinator == rank_) return;
  // Requests of this agreement that came before the role was known.
  for (auto it = mailbox_.begin(); it != mailbox_.end();) {
    if (it->epoch != epoch) {
      ++it;
      continue;
    }
    redirect(it->fd, coordinator);
    it = mailbox_.erase(it);
  }
}

int ControlPlane::connectHeader(int rank, ControlType type, uint64_t epoch,
                                const std::vector<int>& ranks, Deadline deadline, int* fd) {
  sockaddr_in sa{};
  if (!peerAddress(rank, &sa)) return EHOSTUNREACH;
  int s = -1;
  const int err = connectQuietly(sa, deadline, &s);
  if (err != 0) return err;
  ControlHeader h{};
  h.magic = ControlHeader::kMagic;
  std::memcpy(h.secret, secret_, sizeof h.secret);
  h.type = static_cast<uint32_t>(type);
  h.epoch = epoch;
  h.from = rank_;
  h.count = static_cast<int32_t>(ranks.size());
  std::vector<int32_t> body(ranks.begin(), ranks.end());
  std::string saved = lastError();  // the sends below must not replace the caller's error
  const bool sent = sendAll(s, &h, sizeof h, deadline) == braidSuccess &&
                    (body.empty() || sendAll(s, body.data(), body.size() * sizeof(int32_t),
                                             deadline) == braidSuccess);
  if (!sent) {
    failVerbatim(braidSuccess, saved);
    ::close(s);
    return ECONNRESET;
  }
  *fd = s;
  return 0;
}

void ControlPlane::broadcastRevoke(int origin, const std::string& why) {
  if (revokeSent_.exchange(true)) return;
  const std::string reason = why.substr(0, kMaxReasonBytes);
  std::vector<int> body(2 + (reason.size() + sizeof(int32_t) - 1) / sizeof(int32_t), 0);
  body[0] = origin;
  body[1] = static_cast<int>(reason.size());
  std::memcpy(body.data() + 2, reason.data(), reason.size());
  // Not cut short by the destructor, which waits for it: a rank that revokes and destroys at
  // once must still tell its peers.
  revoker_ = std::thread([this, origin, body] {
    int n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = static_cast<int>(peers_.size());
    }
    for (int r = 0; r < n; ++r) {
      if (r == rank_ || r == origin) continue;
      int fd = -1;
      if (connectHeader(r, ControlType::kRevoke, 0, body, deadlineAfter(1.0), &fd) == 0)
        ::close(fd);
    }
  });
}

braidResult_t ControlPlane::sendPut(int rank, const std::vector<int>& meta, const void* data,
                                    size_t bytes, Deadline deadline) {
  int fd = -1;
  const int err = connectHeader(rank, ControlType::kPut, 0, meta, deadline, &fd);
  if (err != 0)
    return fail(braidRemoteError, "put to rank %d: its control plane cannot be reached: %s", rank,
                strerror(err));
  braidResult_t r = bytes ? sendAll(fd, data, bytes, deadline) : braidSuccess;
  uint8_t answer = 0;
  if (r == braidSuccess) r = recvAll(fd, &answer, 1, deadline);
  ::close(fd);
  BRAID_TRY(r);
  if (answer != 1)
    return fail(braidInvalidArgument,
                "put to rank %d: refused there (window %d unknown or deregistered, or the range "
                "[%zu, +%zu) beyond it)",
                rank, meta.empty() ? -1 : meta[0],
                meta.size() >= 4 ? (static_cast<size_t>(static_cast<uint32_t>(meta[3])) << 32) |
                                       static_cast<uint32_t>(meta[2])
                                 : 0,
                bytes);
  return braidSuccess;
}

braidResult_t ControlPlane::sendAgree(int rank, uint64_t epoch, const std::vector<int>& excluded,
                                      Deadline deadline, int* fd) {
  const int err = connectHeader(rank, ControlType::kAgree, epoch, excluded, deadline, fd);
  if (err != 0)
    return fail(braidRemoteError, "control plane: rank %d cannot be reached: %s", rank,
                strerror(err));
  return braidSuccess;
}

bool ControlPlane::takeAgree(uint64_t epoch, Deadline until, AgreeRequest* out) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    while (!mailbox_.empty() && mailbox_.front().epoch < epoch) {
      ::close(mailbox_.front().fd);
      mailbox_.pop_front();
    }
    for (auto it = mailbox_.begin(); it != mailbox_.end(); ++it) {
      if (it->epoch != epoch) continue;
      *out = std::move(*it);
      mailbox_.erase(it);
      return true;
    }
    if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
      for (auto it = mailbox_.begin(); it != mailbox_.end(); ++it) {
        if (it->epoch != epoch) continue;
        *out = std::move(*it);
        mailbox_.erase(it);
        return true;
      }
      return false;
    }
  }
}

braidResult_t ControlPlane::askWhere(int rank, uint64_t number, Deadline deadline, CallWhere* out) {
  int fd = -1;
  // Quietly (no message, no log line): the asker decides what no answer means.
  if (connectHeader(rank, ControlType::kWhere, number, {}, deadline, &fd) != 0)
    return braidRemoteError;
  const braidResult_t r = recvAll(fd, out, sizeof *out, deadline);
  ::close(fd);
  return r;
}

Liveness ControlPlane::probe(int rank, double sec) {
  sockaddr_in sa{};
  if (!peerAddress(rank, &sa)) return Liveness::kUnknown;
  int s = -1;
  const int err = connectQuietly(sa, deadlineAfter(sec), &s);
  if (err == 0) {
    ::close(s);
    return Liveness::kAlive;
  }
  return err == ECONNREFUSED ? Liveness::kGone : Liveness::kUnknown;
}

}  // namespace braid
