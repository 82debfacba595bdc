// A Fabric from a topology model: one host's System (a topology file) replicated over hosts
// joined by the host's NICs. For braid-sim, which predicts machines nobody here can run.
#pragma once

#include <string>

#include "braid/braid.h"
#include "topology/topology.h"
#include "tuning/fabric.h"

namespace braid::tuning {

// ranksPerHost <= 0 means one rank per GPU (per core when the system has no GPU).
// Within a host: the bottleneck bandwidth of the model's ring (buildRings) over consecutive
// GPUs, times the rings NCCL would run over it (NVLink paths carry several); latency 1 us
// on NVLink, 2 us on PCIe (NCCL's hardware latencies are of that order), shared-memory
// figures for CPU-only systems. Between hosts: the host's network ports (Nets with a speed)
// at speed/8 GB/s each, 5 us latency on InfiniBand, 20 us on Ethernet. GPU systems reduce at
// HBM speed (1 TB/s). Errors: braidInvalidArgument for hosts < 1, or a system with no NIC
// when hosts > 1 (named in the message); *why gets one line per figure and where it came from.
// NICs the file lists without a port (cloud files giving only PCI classes) count as one port
// of unknownNicGbps each (0: not counted).
braidResult_t fabricFromTopology(const topo::System& sys, int hosts, int ranksPerHost,
                                 double unknownNicGbps, Fabric* out, std::string* why);

}  // namespace braid::tuning
