#include "core/stall.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "algorithms/schedule.h"
#include "base/error.h"
#include "base/socket.h"
#include "core/comm.h"

namespace braid {

// The seqlock of "Can Seqlocks Get Along With Programming Language Memory Models?" (Boehm,
// MSPC 2012): the version goes odd, a release fence, the fields, the version even (release);
// a reader takes the fields between two equal even versions.
void CallPosition::publishRefusal(uint64_t seq, uint32_t kind, const char* why) {
  const uint64_t v = refusalVersion.load(std::memory_order_relaxed);
  refusalVersion.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  char text[sizeof(refusal)] = {};
  std::strncpy(text, why ? why : "", sizeof(text) - 1);
  for (size_t w = 0; w < kRefusalWords; ++w) {
    uint64_t word;
    std::memcpy(&word, text + 8 * w, 8);
    refusal[w].store(word, std::memory_order_relaxed);
  }
  refused.store(seq, std::memory_order_relaxed);
  refusedKind.store(kind, std::memory_order_relaxed);
  refusalVersion.store(v + 2, std::memory_order_release);
}

std::string CallPosition::latestRefusal(uint64_t* number, uint32_t* kind) const {
  *number = 0;
  const uint64_t v = refusalVersion.load(std::memory_order_acquire);
  if (v % 2 != 0) return "";
  char text[sizeof(refusal)];
  for (size_t w = 0; w < kRefusalWords; ++w) {
    const uint64_t word = refusal[w].load(std::memory_order_relaxed);
    std::memcpy(text + 8 * w, &word, 8);
  }
  const uint64_t seq = refused.load(std::memory_order_relaxed);
  *kind = refusedKind.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (seq == 0 || refusalVersion.load(std::memory_order_relaxed) != v ||
      started.load(std::memory_order_relaxed) >= seq)
    return "";
  text[sizeof(text) - 1] = '\0';
  *number = seq;
  return text;
}

namespace {

constexpr uint32_t kWireMagic = 0x4c415453;  // "STAL"

// A report on the wire: fixed size, host byte order (the job runs one architecture).
struct Wire {
  uint8_t secret[32];
  uint32_t magic;
  int32_t rank;
  uint64_t seq;
  uint64_t bytes;
  uint32_t kind;
  int32_t waitingOn;
};

// How long a stalled rank may spend reaching rank 0, and rank 0 reading one report.
constexpr int kConnectMs = 500;
// Rank 0 takes reports from inside its wait loop: one look at the pending connections lasts at
// most kTakeMs, each connection's 64 bytes (sent right after connecting) at most kReadMs of it,
// so that a connection that sends nothing (a port scanner) cannot hold rank 0's call.
constexpr int kTakeMs = 20;
constexpr int kReadMs = 5;

// Reads exactly len bytes before `until`; false on close, error or time out.
bool readQuickly(int fd, void* buf, size_t len, std::chrono::steady_clock::time_point until) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pf{fd, POLLIN, 0};
    poll(&pf, 1, static_cast<int>(left));
  }
  return true;
}

// "rank 3" or "ranks 0,2,5" (at most 32 listed).
std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 32; ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > 32) s += ",... (" + std::to_string(ranks.size()) + ")";
  return s;
}

}  // namespace

const char* stallKindLabel(uint32_t kind) {
  if (kind == 0) return "send/recv group";
  if (kind > static_cast<uint32_t>(kNumCollectives)) return "call";
  return collectiveLabel(static_cast<Collective>(kind - 1));
}

braidResult_t StallBoard::createRoot(const uint8_t secret[32], int nranks,
                                     std::unique_ptr<StallBoard>* out) {
  in_addr addr{};
  std::string ifname;
  BRAID_TRY(chooseListenAddress(&addr, &ifname));
  int fd = -1;
  sockaddr_in bound{};
  BRAID_TRY(listenOn(addr, &fd, &bound));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::unique_ptr<StallBoard> b(new StallBoard());
  b->root_ = true;
  b->fd_ = fd;
  b->address_ = addressString(bound);
  std::memcpy(b->secret_, secret, sizeof(b->secret_));
  b->reports_.resize(static_cast<size_t>(nranks));
  *out = std::move(b);
  return braidSuccess;
}

std::unique_ptr<StallBoard> StallBoard::forPeer(const std::string& rootAddress,
                                                const uint8_t secret[32]) {
  std::unique_ptr<StallBoard> b(new StallBoard());
  b->address_ = rootAddress;
  std::memcpy(b->secret_, secret, sizeof(b->secret_));
  return b;
}

StallBoard::~StallBoard() {
  if (fd_ >= 0) close(fd_);
}

void StallBoard::stalled(const StallReport& mine, double windowSec) {
  if (root_) {
    for (StallReport& r : reports_) r = StallReport{};
    mine_ = mine;
    reports_[static_cast<size_t>(mine.rank)] = mine;
    gathering_ = true;
    printed_ = false;
    until_ = std::chrono::steady_clock::now() +
             std::chrono::microseconds(static_cast<long long>(windowSec * 1e6));
    takeReports();
    return;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  sockaddr_in sa{};
  if (!parseAddress(address_, &sa)) return;
  // Within kConnectMs, without replacing this thread's last error.
  int s = -1;
  if (connectQuietly(sa, deadlineAfter(kConnectMs / 1000.0), &s) != 0) {
    BRAID_WARN("STALL",
               "cannot reach rank 0 at %s to report this stall; its summary will say "
               "\"no report\" for this rank",
               address_.c_str());
    return;
  }
  Wire w{};
  std::memcpy(w.secret, secret_, sizeof(w.secret));
  w.magic = kWireMagic;
  w.rank = mine.rank;
  w.seq = mine.seq;
  w.bytes = mine.bytes;
  w.kind = mine.kind;
  w.waitingOn = mine.waitingOn;
  // 64 bytes into a fresh connection's empty send buffer: never blocks.
  if (send(s, &w, sizeof(w), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(w))) {
    close(s);
    return;
  }
  fd_ = s;  // open until the call ends: rank 0 reads an open report as current
}

void StallBoard::takeReports() {
  using std::chrono::milliseconds;
  const auto now = std::chrono::steady_clock::now();
  const auto until = now + milliseconds(kTakeMs);
  // Closed (stale) connections and strangers are dropped; the next poll takes what is left.
  for (size_t k = 0; k < 2 * reports_.size() + 16; ++k) {
    if (std::chrono::steady_clock::now() >= until) return;
    const int s = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) return;  // none pending (or a transient error: try at the next poll)
    Wire w{};
    const bool ok =
        readQuickly(s, &w, sizeof(w),
                    std::min(until, std::chrono::steady_clock::now() + milliseconds(kReadMs))) &&
        w.magic == kWireMagic && secretEqual(w.secret, secret_) && w.rank >= 0 &&
        static_cast<size_t>(w.rank) < reports_.size();
    // The reporter closes its connection when its call ends: a closed one is stale.
    char probe = 0;
    const ssize_t more = recv(s, &probe, 1, MSG_DONTWAIT | MSG_PEEK);
    const bool open = more < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    close(s);
    if (!ok || !open) continue;
    StallReport& r = reports_[static_cast<size_t>(w.rank)];
    r.rank = w.rank;
    r.seq = w.seq;
    r.bytes = w.bytes;
    r.kind = w.kind;
    r.waitingOn = w.waitingOn;
  }
}

void StallBoard::poll() {
  if (!root_ || !gathering_ || printed_) return;
  takeReports();
  if (std::chrono::steady_clock::now() < until_) return;
  printed_ = true;
  try {
    BRAID_WARN("STALL", "%s", summary().c_str());
  } catch (...) {  // out of memory: the call goes on waiting without its summary
  }
}

void StallBoard::callEnded() {
  if (root_) {
    gathering_ = false;
    return;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::string StallBoard::summary() const {
  // Each rank's position, ordered: in call s (2s+1) < finished s, not in a call (2s+2) <
  // in call s+1. Ranks neither reporting nor mapped are listed apart.
  struct Group {
    std::vector<int> ranks;
    std::vector<int> waits;  // per rank: the peer it waits on, -1 unknown, -2 no report
    uint64_t bytes = 0;
  };
  std::map<std::tuple<uint64_t, uint32_t>, Group> groups;
  std::vector<int> unknown;
  const int n = static_cast<int>(reports_.size());
  for (int r = 0; r < n; ++r) {
    const StallReport& rep = reports_[static_cast<size_t>(r)];
    if (rep.rank >= 0) {
      Group& g = groups[{2 * rep.seq + 1, rep.kind}];
      g.ranks.push_back(r);
      g.waits.push_back(rep.waitingOn);
      g.bytes = std::max(g.bytes, rep.bytes);  // 0 from a rank in BRAID_CHECK's exchange
      continue;
    }
    const CallPosition* p = positionOf(r);
    if (!p) {
      unknown.push_back(r);
      continue;
    }
    const uint64_t done = p->done.load(std::memory_order_relaxed);
    const uint64_t started = p->started.load(std::memory_order_relaxed);
    if (started > done) {
      Group& g = groups[{2 * started + 1, p->what.load(std::memory_order_relaxed)}];
      g.ranks.push_back(r);
      g.waits.push_back(-2);
    } else {
      Group& g = groups[{2 * done + 2, ~0u}];
      g.ranks.push_back(r);
      g.waits.push_back(-2);
    }
  }
  char head[160];
  std::snprintf(head, sizeof(head), "STALL summary of %s #%llu on %d ranks (rank 0's view): ",
                stallKindLabel(mine_.kind), static_cast<unsigned long long>(mine_.seq), n);
  std::string out = head;
  constexpr const char* kNoReport =
      " sent no report (not in a call, or in it for less than BRAID_STALL_WARN)";
  // Where every rank heard from is at one place, the silent ones are the ones behind.
  const bool silentBehind = groups.size() <= 1 && !unknown.empty();
  if (silentBehind) out += "behind: " + rankList(unknown) + kNoReport;
  bool first = !silentBehind;
  for (const auto& entry : groups) {
    const uint64_t pos = std::get<0>(entry.first);
    const uint32_t kind = std::get<1>(entry.first);
    const Group& g = entry.second;
    out += first ? (groups.size() > 1 ? "behind: " : "none behind: ") : "; then ";
    out += rankList(g.ranks);
    char where[160];
    if (pos % 2 == 0) {
      std::snprintf(where, sizeof(where), " not in a call (last completed #%llu)",
                    static_cast<unsigned long long>(pos / 2 - 1));
      out += where;
      // Ranks that refused their next call say why (CallPosition::refusalOf), the first few.
      int told = 0;
      for (int r : g.ranks) {
        const CallPosition* p = positionOf(r);
        uint32_t refusedKind = 0;
        const std::string why = p ? p->refusalOf(pos / 2, &refusedKind) : "";
        if (why.empty() || ++told > 4) continue;
        out += " (rank " + std::to_string(r) + " refused its " + stallKindLabel(refusedKind) +
               " #" + std::to_string(pos / 2) + ": " + why + ")";
      }
    } else {
      std::snprintf(where, sizeof(where), " at %s #%llu", stallKindLabel(kind),
                    static_cast<unsigned long long>(pos / 2));
      out += where;
      if (g.bytes > 0) out += " (" + std::to_string(g.bytes) + " bytes)";
      const bool same =
          std::all_of(g.waits.begin(), g.waits.end(), [&](int w) { return w == g.waits[0]; });
      if (same && g.waits[0] >= 0) {
        out += " waiting on " + std::to_string(g.waits[0]);
      } else if (same && g.waits[0] == -2) {
        out += " (not stalled long enough to report)";
      } else {
        out += " (";
        for (size_t i = 0; i < g.ranks.size() && i < 32; ++i) {
          const int w = g.waits[i];
          if (i) out += ", ";
          out += std::to_string(g.ranks[i]);
          out += w >= 0    ? " waits on " + std::to_string(w)
                 : w == -1 ? " waits on none"
                           : " no report yet";
        }
        out += ")";
      }
    }
    first = false;
  }
  if (!unknown.empty() && !silentBehind) out += "; " + rankList(unknown) + kNoReport;
  return out;
}

}  // namespace braid
