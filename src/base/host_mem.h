// Host memory that the ranks of one machine read in place (braidMemAllocHost).
//
// Each allocation is its own memfd, mapped shared. A rank that sends a piece lying in one
// publishes, with the piece, the allocation's file descriptor number, its id and the piece's
// offset; a rank of another process on the same machine opens that descriptor through
// /proc/PID/fd (the same permission as reading the sender's /proc entries, which Yama's
// ptrace_scope 1 does not restrict), maps the allocation once and reads from its own
// mapping: one copy between processes, with no kernel copy per piece (process_vm_readv
// pins pages on every call, which is slow on virtual machines).
//
// Mappings a receiver made stay valid after the sender frees or exits (the memfd lives
// while mapped), so a late reader never faults. Every free bumps a process-wide epoch that
// every piece carries; a receiver that sees it move checks each of its mappings of that
// sender (is the descriptor still the same file?) and drops those whose allocation is gone.
// Pages are mapped as they are first read, so a receiver holds only what it has read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/braid.h"

namespace braid::hostmem {

// Where a range of shared host memory lies, as another process finds it.
struct Ref {
  int fd = -1;        // the allocation's memfd, in the allocating process
  uint64_t id = 0;    // unique per allocation in this process (never 0)
  uint64_t ino = 0;   // the memfd's inode number: which file fd must still be
  size_t offset = 0;  // of the range's start within the allocation
  size_t bytes = 0;   // of the whole allocation (whole pages)
};

// braidMemAllocHost / braidMemFreeHost (braid.h documents them).
braidResult_t alloc(void** ptr, size_t size);
braidResult_t free(void* ptr);

// Whether [p, p + n) lies inside one live allocation of this process; fills *out if so.
bool find(const void* p, size_t n, Ref* out);

// Bumped by every free.
uint32_t freeEpoch();

// This process's probe: a one-page memfd holding the process token, whose descriptor
// number travels in the init cards. -1 if it cannot be made.
int probeFd(uint64_t token);

// Whether this process can map process pid's allocations: it opens pid's probe descriptor
// and finds token in it. *why says what failed, or how it maps.
bool canMapPeer(int pid, int probeFd, uint64_t token, std::string* why);

// Maps allocation `ref` of process pid read-only (pages come in as they are read); nullptr
// with *error set when it cannot, or when pid's descriptor is not that allocation's file.
const char* mapPeer(int pid, const Ref& ref, std::string* error);
void unmapPeer(const char* base, size_t bytes);
// Whether process pid's descriptor fd is still the file with inode ino (an allocation of it
// that is still live).
bool peerStillHolds(int pid, int fd, uint64_t ino);

}  // namespace braid::hostmem
