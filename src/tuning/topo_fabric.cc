#include "tuning/topo_fabric.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/error.h"

namespace braid::tuning {

namespace {
std::string fmt(const char* f, double a, double b = 0) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), f, a, b);
  return buf;
}
// PCI device ids of SXM GPUs that always sit on NVSwitches, with their NVLink count and SM
// (A100 SXM4 12 links, H100/H200 SXM5 18, B200 18): 0 when sys's first GPU is none of them.
struct SxmBoard {
  int device, links, sm;
};
constexpr SxmBoard kSxmBoards[] = {{0x20b0, 12, 80}, {0x20b2, 12, 80}, {0x20b3, 12, 80},
                                   {0x20bd, 12, 80}, {0x2330, 18, 90}, {0x2335, 18, 90},
                                   {0x2901, 18, 100}};
int sxmNvSwitchLinks(const topo::System& sys) {
  for (const SxmBoard& b : kSxmBoards)
    if (!sys.gpus.empty() && sys.gpus[0].pci.device == b.device) return b.links;
  return 0;
}
// A GPU's memory bandwidth by generation, TB/s (A100 80GB 2.0, H100 SXM 3.35, B200/B300 8;
// older boards 0.9): a fused reduction reads two inputs and writes one, so it produces a
// third of that; a copy reads one and writes one, half.
double hbmTbs(int sm) {
  if (sm >= 100) return 8.0;
  if (sm >= 90) return 3.35;
  if (sm >= 80) return 2.0;
  return 0.9;
}
int sxmSm(const topo::System& sys) {
  for (const SxmBoard& b : kSxmBoards)
    if (!sys.gpus.empty() && sys.gpus[0].pci.device == b.device) return b.sm;
  return 80;
}

}  // namespace

braidResult_t fabricFromTopology(const topo::System& sys, int hosts, const TopoFabricOptions& opts,
                                 Fabric* out, std::string* why) {
  const int ranksPerHost = opts.ranksPerHost;
  const double unknownNicGbps = opts.unknownNicGbps;
  if (hosts < 1) return fail(braidInvalidArgument, "hosts must be at least 1 (got %d)", hosts);
  const int gpus = static_cast<int>(sys.gpus.size());
  if (opts.mnnvl && gpus < 2)
    return fail(braidInvalidArgument, "%s: --mnnvl joins hosts by NVLink, but this file has %s",
                sys.source.c_str(), gpus == 0 ? "no GPU" : "one GPU");
  const int fileSm = sys.gpus.empty()            ? -1
                     : sys.gpus[0].sm > 0        ? sys.gpus[0].sm
                     : sxmNvSwitchLinks(sys) > 0 ? sxmSm(sys)
                                                 : -1;
  if (opts.mnnvl && fileSm < 90)
    return fail(braidInvalidArgument,
                "%s: --mnnvl: NVLink across hosts needs NVLink switch systems (GPUs of compute "
                "capability 9.0 or later); this file's are %s",
                sys.source.c_str(),
                fileSm < 0
                    ? "of unknown capability"
                    : (std::to_string(fileSm / 10) + "." + std::to_string(fileSm % 10)).c_str());
  // Domains must be whole: K in 1..hosts dividing hosts (K above hosts is refused, not cut).
  const int domainHosts = opts.mnnvl ? (opts.domainHosts > 0 ? opts.domainHosts : hosts) : 1;
  if (domainHosts > hosts || hosts % domainHosts != 0)
    return fail(braidInvalidArgument,
                "--mnnvl-domain %d: the %d hosts do not fill whole NVLink domains of %d hosts "
                "(K must be 1..%d and divide %d)",
                opts.domainHosts, hosts, domainHosts, hosts, hosts);
  if (opts.mnnvl && ranksPerHost > gpus)
    return fail(braidInvalidArgument,
                "%s: --mnnvl with --ranks-per-host %d: the file has %d GPUs per host",
                sys.source.c_str(), ranksPerHost, gpus);
  int perHost = ranksPerHost;
  if (perHost <= 0) perHost = gpus > 0 ? gpus : std::max(1, sys.cores);
  Fabric f;
  why->clear();
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < perHost; ++l) f.hostOf.push_back(h / domainHosts);
  // Within a host.
  if (gpus > 1) {
    const topo::Paths paths = topo::computePaths(sys);
    const auto rings = topo::buildRings(sys, paths);
    double bw = 0;
    bool nvlink = false;
    if (!rings.empty() && rings[0].size() > 1) {
      const std::vector<int>& r = rings[0];
      bw = 1e30;
      for (size_t i = 0; i < r.size(); ++i) {
        const topo::Path& p = paths.gpu_gpu[r[i]][r[(i + 1) % r.size()]];
        bw = std::min(bw, p.bw_gbs);
        nvlink = nvlink || p.cls == topo::PathClass::kNvl || p.cls == topo::PathClass::kNvb;
      }
    }
    if (bw <= 0 || bw > 1e29) bw = 12;  // PCIe gen3 x16, NCCL's default
    // Cloud files often leave NVLink out ("NCCL detects it"): SXM boards of these models sit
    // on NVSwitches with all their links, which NCCL finds at run time. Said in *why.
    if (!nvlink) {
      const int sxm = opts.nvswitchLinks > 0 ? opts.nvswitchLinks : sxmNvSwitchLinks(sys);
      if (sxm > 0) {
        const double nv =
            sxm * topo::nvlinkBwPerLink(sys.gpus[0].sm > 0 ? sys.gpus[0].sm : sxmSm(sys));
        *why += fmt(opts.nvswitchLinks > 0
                        ? "the file lists no NVLink; --nvswitch: %.0f links per GPU, %.1f GB/s\n"
                        : "the file lists no NVLink, but its GPUs are SXM boards on NVSwitches: "
                          "assumed %.0f links per GPU, %.1f GB/s\n",
                    sxm, nv);
        bw = nv;
        nvlink = true;
      }
    }
    f.intra = {nvlink ? 1.0 : 2.0, bw};
    const int sm = sys.gpus[0].sm > 0 ? sys.gpus[0].sm : sxmSm(sys);
    f.reduce_gbs = hbmTbs(sm) * 1000 / 3;
    f.copy_gbs = hbmTbs(sm) * 1000 / 2;
    // A GPU kernel's step is a flag poll and a fence, not a system call: a few hundred ns.
    f.step_overhead_us = 0.2;
    f.engine_moves_data = false;
    // NCCL moves 512 KiB steps (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8) on each of several
    // channels at once; the model's one pipeline per rank moves 8 channels' worth a step.
    f.chunk_bytes = 4 << 20;
    f.fifo_slots = 8;  // NCCL_STEPS
    *why += fmt("within a host: %.1f GB/s (the model ring's narrowest hop), %.1f us\n", bw,
                f.intra.latency_us);
    *why += fmt("GPU memory %.2f TB/s: reduction %.0f GB/s\n", hbmTbs(sm), f.reduce_gbs);
    if (opts.mnnvl && hosts > 1) {
      if (!nvlink)
        return fail(braidInvalidArgument,
                    "%s: --mnnvl joins hosts by NVLink, but this file's GPUs are not all on NVLink",
                    sys.source.c_str());
      // NVLink domains (GB200/GB300 NVL72): NCCL treats a domain as one node, and so does the
      // model: every GPU of a domain reaches every other at its NVLink bandwidth, and the
      // domains are the hosts that NICs join.
      *why += fmt("--mnnvl: NVLink domains of %.0f hosts, %.0f GPUs each\n", domainHosts,
                  static_cast<double>(domainHosts * perHost));
    }
    // NVLink SHARP: NVSwitches of NVLink4 and later (compute capability 9.0+) reduce and
    // multicast. The share of the NVLink's bandwidth multimem traffic reaches is one figure
    // for every generation, 0.72: DGX H100's published NVLS all-reduce (about 480 GB/s busbw,
    // NVIDIA, NCCL 2.17+) puts it at 0.83 of the model's 8-GPU bound (14/9 x 370.8 GB/s), the
    // OCI B300 and GB300 NVL72 nccl-tests logs (NCCL 2.28) at 0.74 to 0.79; 2-node B300 with
    // NVLSTree (766 GB/s) bounds it from above at 0.73 (docs/nvls-mnnvl-pat.md).
    if (nvlink && sm >= 90 && opts.nvls) {
      f.nvls = true;
      f.nvls_efficiency = 0.72;
      f.nvls_channels = opts.nvlsChannels > 0 ? opts.nvlsChannels : 16;
      f.nvls_chunk_bytes = 128 << 10;  // NCCL_NVLS_CHUNKSIZE's default
      *why += fmt("NVLink SHARP (NVLS): %.0f channels of 128 KiB, multimem at %.0f%% of NVLink\n",
                  f.nvls_channels, f.nvls_efficiency * 100);
    }
  } else {
    f.intra = {2.0, 5.0};
    f.reduce_gbs = 5;
    f.copy_gbs = 8;
    f.step_overhead_us = 1.0;
    // A communicator with network peers pipelines 512 KiB pieces, one host 128 KiB.
    f.chunk_bytes = hosts > 1 ? 512 * 1024 : 128 * 1024;
    f.fifo_slots = static_cast<int>((2u << 20) / f.chunk_bytes);  // BRAID_BUFFSIZE's default
    *why += "within a host: shared memory, 5 GB/s, 2 us (no GPUs in the model)\n";
  }
  // Between hosts.
  int ports = 0;
  double total = 0;
  bool ib = false;
  int unknownSpeed = 0;
  for (const topo::Net& n : sys.nets) {
    if (n.speed_gbps <= 0) {
      ++unknownSpeed;
      continue;
    }
    ++ports;
    total += topo::netBw(n.speed_gbps);
    ib = ib || n.link_layer == topo::LinkLayer::kInfiniBand;
  }
  // NICs listed without a port (cloud files that give only PCI classes): one port each, of
  // unknownNicGbps, said in *why.
  int bare = 0;
  for (const topo::Nic& nic : sys.nics) {
    if (!nic.nets.empty()) continue;
    ++bare;
    ib = ib || (nic.pci.class_code >> 8) == 0x0207;
  }
  bare += unknownSpeed;
  // AWS EFA ports (Amazon's PCI vendor 0x1d0f, or rdmap* devices) carry NCCL's traffic through
  // the libfabric plugin at a lower share of their line rate than InfiniBand or RoCE: 0.85, from
  // AWS's published 2 x p4de nccl-tests (78.3 GB/s all-reduce busbw at 2 GiB over 4 x 100 Gb/s
  // per host, whose 2-node tree bound is 93.75 GB/s: 0.84; perf/sim_vs_nccl.py).
  bool efa = false;
  for (const topo::Net& n : sys.nets) efa = efa || n.name.rfind("rdmap", 0) == 0;
  for (const topo::Nic& nic : sys.nics) efa = efa || nic.pci.vendor == 0x1d0f;
  const double goodput = efa ? 0.85 : 1.0;
  total *= goodput;
  if (bare > 0 && unknownNicGbps > 0) {
    ports += bare;
    total += bare * topo::netBw(unknownNicGbps) * goodput;
    char line[160];
    std::snprintf(line, sizeof(line),
                  "%d NIC port(s) without a speed in the file: assumed %.0f Gb/s each\n", bare,
                  unknownNicGbps);
    *why += line;
  }
  if (hosts > 1 && f.nhosts() > 1 && ports == 0)
    return fail(braidInvalidArgument,
                "%s: no network port with a speed, so hosts cannot be joined (give a topology "
                "with <net speed=...> or NICs)",
                sys.source.c_str());
  ports *= domainHosts;  // an NVLink domain's hosts pool their NICs, as NCCL's node does
  total *= domainHosts;
  if (ports > 0 && (hosts == 1 || f.nhosts() > 1)) {  // (one MNNVL domain does not use them)
    const int perHostRanks = static_cast<int>(f.hostOf.size()) / f.nhosts();
    const int pools = std::min(ports, std::max(perHostRanks, 1));
    f.nicsPerHost = pools;
    f.inter = {ib ? 5.0 : 20.0, total / pools};
    char line[400];
    std::snprintf(line, sizeof(line), "between hosts: %d port(s) of %.2f GB/s, %.0f us (%s)%s\n",
                  ports, total / ports, f.inter.latency_us,
                  efa  ? "AWS EFA at 0.85 of line rate"
                  : ib ? "InfiniBand"
                       : "Ethernet",
                  pools < ports ? "; pooled per rank" : "");
    *why += line;
  }
  *out = f;
  return braidSuccess;
}

}  // namespace braid::tuning
