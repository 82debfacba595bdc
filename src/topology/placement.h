// Where a communicator's ranks sit, and the ring they form: the part of the topology the
// communicator uses at init (src/core/comm.cc). Kept apart from topology.h so that core code
// needs only this small header.
#pragma once

#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::topo {

// The NUMA node this thread runs on: the node holding every CPU of its affinity mask, read
// from <fsroot>/sys/devices/system/node/node*/cpulist ("/" is this machine). -1 when the mask
// spans several nodes, the machine has none listed, or sysfs cannot be read.
int currentNumaNode(const std::string& fsroot = "/");
// The NUMA node of a CPU list ("0-3,8,10-11", sysfs's format) given each node's CPU list,
// or -1 when the CPUs span several nodes or none.
int numaNodeOfCpus(const std::vector<int>& cpus, const std::vector<std::vector<int>>& nodeCpus);
// Parses a sysfs CPU list ("0-3,8"); false when malformed.
bool parseCpuList(const std::string& text, std::vector<int>* cpus);

// The ring a communicator's ring and tree algorithms follow (CollArgs::ring): ranks grouped
// by host (hosts in order of their first rank), then by NUMA node within a host (nodes in
// order of their first rank; -1, unknown, is a node of its own), then in rank order. So a
// ring crosses each host and NUMA boundary once, as NCCL's rings enter and leave a node once,
// whatever the placement (round-robin placement over hosts would otherwise cross the
// network at every hop). hostOf and numaOf have one entry per rank; numaOf may be empty.
// Rank order when it is already grouped.
std::vector<int> commRing(const std::vector<int>& hostOf, const std::vector<int>& numaOf);

// BRAID_RING: a user's ring, ranks separated by spaces or commas (as NCCL_RINGS was), for
// example "0 2 4 6 1 3 5 7" (NCCL_RINGS is read when BRAID_RING is unset; rank 0's applies).
// Ranks >= nranks are dropped, so one list serves smaller communicators; no rank may appear
// twice, and what is left must hold each rank 0..nranks-1. Errors:
// braidInvalidArgument naming BRAID_RING and the problem.
braidResult_t parseRingSpec(const std::string& spec, int nranks, std::vector<int>* ring);

}  // namespace braid::topo
