// Blocking TCP helpers with deadlines, for the bootstrap (and later the tcp transport).
// IPv4; every wait is bounded by a deadline so nothing hangs forever.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/braid.h"

namespace braid {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
Deadline deadlineAfter(double seconds);

// The address to listen on: BRAID_SOCKET_IFNAME's interface (NCCL syntax: "eth,ib" prefixes,
// "^lo" excludes, "=eth0" exact), else the first up IPv4 interface that is neither loopback
// nor docker*, else any. *ifname receives the interface's name.
braidResult_t chooseListenAddress(in_addr* addr, std::string* ifname);
// braidSuccess when an up IPv4 interface here passes BRAID_SOCKET_IFNAME (or it is unset): every
// listening socket (bootstrap root, control plane, stall board, tcp transport) needs one. Else
// braidInvalidArgument naming the variable as set, its value and the interfaces that are up.
braidResult_t checkSocketIfname();
// Whether interface `name` passes an NCCL_SOCKET_IFNAME-style spec: a comma list of
// prefixes ("eth,ib"), exact names after "=" ("=eth0"), all negated by a leading "^"
// ("^docker,lo"); an empty spec passes every name.
bool ifnameMatches(const std::string& spec, const char* name);

std::string addressString(const sockaddr_in& sa);
// addressString's "a.b.c.d:port" back into *sa; false if it is not one.
bool parseAddress(const std::string& text, sockaddr_in* sa);

// Listens on addr with an ephemeral port; *bound gets the actual address and port.
braidResult_t listenOn(const in_addr& addr, int* fd, sockaddr_in* bound);
braidResult_t acceptBefore(int listenFd, Deadline deadline, int* fd);
braidResult_t connectTo(const sockaddr_in& sa, Deadline deadline, int* fd);
// Connects without recording an error (for retries, and for diagnosis that must not replace
// the caller's last error): 0 and a blocking, TCP_NODELAY socket in *fd, else the errno of
// the attempt (ETIMEDOUT past the deadline).
int connectQuietly(const sockaddr_in& sa, Deadline deadline, int* fd);
// Full-length transfers; braidRemoteError on EOF or reset, braidTimeout past deadline.
braidResult_t sendAll(int fd, const void* buf, size_t len, Deadline deadline);
braidResult_t recvAll(int fd, void* buf, size_t len, Deadline deadline);

// Random bytes from the kernel (getrandom).
braidResult_t randomBytes(void* buf, size_t len);
// Whether two 32-byte job secrets are equal, in constant time (no early exit on the first
// differing byte, which would tell a stranger how much of a guess was right).
bool secretEqual(const uint8_t* a, const uint8_t* b);

}  // namespace braid
