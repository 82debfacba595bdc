#include "base/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/config.h"
#include "base/error.h"

namespace braid {
namespace {

// One poll's bound: the time left, at most 1 s, or kAbortPollMs where an abort flag is watched.
int msUntil(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  if (left < 0) return 0;
  const int cap = waitAbortFlag() ? kAbortPollMs : 1000;
  return left > cap ? cap : static_cast<int>(left);
}

braidResult_t abortedWait() {
  return fail(braidInvalidUsage,
              "init aborted: braidCommAbort or braidCommDestroy ran while the communicator's "
              "non-blocking init waited");
}

}  // namespace

bool ifnameMatches(const std::string& spec, const char* name) {
  if (spec.empty()) return true;
  bool exclude = spec[0] == '^';
  std::string list = exclude ? spec.substr(1) : spec;
  bool exact = !list.empty() && list[0] == '=';
  if (exact) list = list.substr(1);
  bool hit = false;
  size_t pos = 0;
  while (true) {
    size_t comma = list.find(',', pos);
    std::string item =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty() && (exact ? item == name : strncmp(name, item.c_str(), item.size()) == 0))
      hit = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

Deadline deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<long long>(seconds * 1e6));
}

braidResult_t checkSocketIfname() {
  const std::string& spec = config().socketIfname;
  if (spec.empty()) return braidSuccess;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return fail(braidSystemError, "getifaddrs failed: %s", strerror(errno));
  bool matched = false;
  std::string up;
  for (const ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP)) continue;
    matched = matched || ifnameMatches(spec, it->ifa_name);
    up += (up.empty() ? "" : ", ") + std::string(it->ifa_name);
  }
  freeifaddrs(list);
  if (matched) return braidSuccess;
  return fail(braidInvalidArgument,
              "%s=\"%s\": no interface matches (interfaces here: %s); set it to one of them "
              "(`ip -4 addr` lists them), or unset it",
              settingVar("BRAID_SOCKET_IFNAME").c_str(), spec.c_str(),
              up.empty() ? "none with an IPv4 address up" : up.c_str());
}

braidResult_t chooseListenAddress(in_addr* addr, std::string* ifname) {
  const std::string& spec = config().socketIfname;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return fail(braidSystemError, "getifaddrs failed: %s", strerror(errno));
  const ifaddrs* chosen = nullptr;
  for (int pass = 0; pass < 2 && !chosen; ++pass) {
    for (const ifaddrs* it = list; it; it = it->ifa_next) {
      if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
      if (!(it->ifa_flags & IFF_UP)) continue;
      bool loop = it->ifa_flags & IFF_LOOPBACK;
      // Unset: neither loopback nor a container bridge (docker*, as NCCL) unless nothing
      // else is up.
      if (spec.empty() && pass == 0 && (loop || ifnameMatches("docker", it->ifa_name))) continue;
      if (!spec.empty() && !ifnameMatches(spec, it->ifa_name)) continue;
      chosen = it;
      break;
    }
    if (!spec.empty()) break;
  }
  if (!chosen) {
    freeifaddrs(list);
    return checkSocketIfname();
  }
  *addr = reinterpret_cast<const sockaddr_in*>(chosen->ifa_addr)->sin_addr;
  *ifname = chosen->ifa_name;
  freeifaddrs(list);
  return braidSuccess;
}

std::string addressString(const sockaddr_in& sa) {
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
}

bool parseAddress(const std::string& text, sockaddr_in* sa) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *sa = sockaddr_in{};
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(std::atoi(text.c_str() + colon + 1)));
  return inet_pton(AF_INET, text.substr(0, colon).c_str(), &sa->sin_addr) == 1;
}

braidResult_t listenOn(const in_addr& addr, int* fd, sockaddr_in* bound) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(braidSystemError, "socket() failed: %s", strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(s, 1024) != 0) {
    int e = errno;
    close(s);
    return fail(braidSystemError, "cannot listen on %s: %s", addressString(sa).c_str(),
                strerror(e));
  }
  socklen_t len = sizeof(*bound);
  getsockname(s, reinterpret_cast<sockaddr*>(bound), &len);
  *fd = s;
  return braidSuccess;
}

braidResult_t acceptBefore(int listenFd, Deadline deadline, int* fd) {
  while (true) {
    pollfd p{listenFd, POLLIN, 0};
    int r = poll(&p, 1, msUntil(deadline));
    if (r > 0) {
      int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (s >= 0) {
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        *fd = s;
        return braidSuccess;
      }
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
        return fail(braidSystemError, "accept failed: %s", strerror(errno));
    } else if (r < 0 && errno != EINTR) {
      return fail(braidSystemError, "poll on listening socket failed: %s", strerror(errno));
    }
    if (Clock::now() >= deadline) return braidTimeout;
  }
}

braidResult_t connectTo(const sockaddr_in& sa, Deadline deadline, int* fd) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(braidSystemError, "socket() failed: %s", strerror(errno));
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int flags = fcntl(s, F_GETFL);
  fcntl(s, F_SETFL, flags | O_NONBLOCK);
  int r = connect(s, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
  if (r != 0 && errno == EINPROGRESS) {
    pollfd p{s, POLLOUT, 0};
    while (true) {
      r = poll(&p, 1, msUntil(deadline));
      if (r > 0) break;
      if (r < 0 && errno != EINTR) break;
      if (waitAborted()) {
        close(s);
        return abortedWait();
      }
      if (Clock::now() >= deadline) {
        close(s);
        return fail(braidTimeout, "connecting to %s timed out", addressString(sa).c_str());
      }
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
    errno = err;
    r = err == 0 ? 0 : -1;
  }
  if (r != 0) {
    int e = errno;
    close(s);
    return fail(braidRemoteError,
                "cannot connect to %s: %s (is the process that called braidGetUniqueId still "
                "running, and is this id from the current run?)",
                addressString(sa).c_str(), strerror(e));
  }
  fcntl(s, F_SETFL, flags);
  *fd = s;
  return braidSuccess;
}

braidResult_t sendAll(int fd, const void* buf, size_t len, Deadline deadline) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return fail(braidRemoteError, "send failed: %s", strerror(errno));
    pollfd pf{fd, POLLOUT, 0};
    poll(&pf, 1, msUntil(deadline));
    if (waitAborted()) return abortedWait();
    if (Clock::now() >= deadline) return fail(braidTimeout, "send timed out");
  }
  return braidSuccess;
}

braidResult_t recvAll(int fd, void* buf, size_t len, Deadline deadline) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return braidRemoteError;  // orderly close; caller names the peer
    if (errno != EAGAIN && errno != EINTR)
      return fail(braidRemoteError, "recv failed: %s", strerror(errno));
    pollfd pf{fd, POLLIN, 0};
    poll(&pf, 1, msUntil(deadline));
    if (waitAborted()) return abortedWait();
    if (Clock::now() >= deadline) return braidTimeout;
  }
  return braidSuccess;
}

braidResult_t randomBytes(void* buf, size_t len) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(braidSystemError, "getrandom failed: %s", strerror(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return braidSuccess;
}

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < 32; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

int connectQuietly(const sockaddr_in& sa, Deadline deadline, int* fd) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return errno;
  int err = 0;
  if (connect(s, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    err = errno;
    while (err == EINPROGRESS || err == EINTR) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        err = ETIMEDOUT;
        break;
      }
      if (waitAborted()) {
        err = ECANCELED;
        break;
      }
      pollfd p{s, POLLOUT, 0};
      int r = poll(&p, 1, msUntil(deadline));
      if (r < 0 && errno != EINTR) {
        err = errno;
        break;
      }
      if (r > 0) {
        socklen_t len = sizeof(err);
        getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
  }
  // A connection to a local port nobody listens on yet can pick that very port as its own
  // ephemeral one and connect to itself (TCP simultaneous open): it then holds the port the
  // root is about to bind. Refused like the attempt it replaces, so a retry comes later.
  sockaddr_in local{}, peer{};
  socklen_t ll = sizeof(local), pl = sizeof(peer);
  if (err == 0 && getsockname(s, reinterpret_cast<sockaddr*>(&local), &ll) == 0 &&
      getpeername(s, reinterpret_cast<sockaddr*>(&peer), &pl) == 0 &&
      local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr)
    err = ECONNREFUSED;
  if (err != 0) {
    ::close(s);
    return err;
  }
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *fd = s;
  return 0;
}

}  // namespace braid
