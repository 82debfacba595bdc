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
// their memory's speed (HBM, by generation). Errors: braidInvalidArgument for hosts < 1, or a
// system with no NIC when hosts > 1 (named in the message); *why gets one line per figure and where
// it came from.
struct TopoFabricOptions {
  int ranksPerHost = 0;         // <= 0: one per GPU (per core without GPUs)
  double unknownNicGbps = 100;  // NIC ports the file gives without a speed (0: not counted)
  int nvswitchLinks = 0;        // > 0: GPUs sit on NVSwitches with this many links each, for
                                // files that leave NVLink out (braid-sim --nvswitch)
  bool mnnvl = false;           // the hosts share NVLink domains (GB200/GB300 NVL72 racks): every
                       // GPU of a domain on NVLink, domains joined by NICs (braid-sim --mnnvl)
  int domainHosts = 0;   // with mnnvl: hosts per NVLink domain (an NVL72 rack: 18 trays of 4
                         // GPUs); 0: all the hosts. Must divide hosts.
  bool nvls = true;      // NVLink SHARP where the GPUs have it (NCCL_NVLS_ENABLE)
  int nvlsChannels = 0;  // NVLS channels (NCCL_NVLS_NCHANNELS); 0: 16
};
// More NIC ports than ranks on a host (p5: 32 EFA ports, 8 GPUs) are pooled: each rank's flow
// gets ports / ranks of them, as NCCL's channels spread a GPU's traffic over its NICs.
braidResult_t fabricFromTopology(const topo::System& sys, int hosts, const TopoFabricOptions& opts,
                                 Fabric* out, std::string* why);

}  // namespace braid::tuning
