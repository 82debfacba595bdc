// Stage 2 of the hwloc XML loader (hwloc_xml.cc reads the XML, stage 1): the flat list of
// objects into the system model (Parser::build).
//
// What is taken, and how:
//   - packages (Package, v1 also Socket), cores (Core) and PUs (PU) are counted.
//   - A NUMA node with CPUs becomes a Cpu; one without CPUs (empty cpuset: GPU memory on
//     POWER9, CXL) only counts in System::memory_numa_nodes. A v1 file without NUMA nodes
//     is one NUMA node (said in notes).
//   - A GPU is a PCI device with at least one compute OS device: CUDA (cudaN), NVML (nvmlN),
//     RSMI (rsmiN), OpenCL (openclNdM), Level Zero (zeN). DRM devices (card, renderD) alone
//     do not make a GPU, so BMC VGA chips are not GPUs; a 3D controller without such an OS
//     device is not one either (said in notes). Several OS devices of one PCI device are one
//     GPU (cuda0 + nvml0 + opencl0d0); several of one backend (MI300A CPX partitions) are
//     still one GPU, their count said in notes. The model comes from GPUModel, else the PCI
//     device name.
//   - An NVSwitch is a PCI device of subtype NVSwitch or NVIDIA class 0x0680.
//   - A NIC is a PCI function with network OS devices: each OpenFabrics device (mlx5_0,
//     rdmap...) is a Net (ports from Port<N>State, GUID from NodeGUID, link layer from
//     Port<N>LinkLayer, else IB when the PCI class is 0x0207 or an IPoIB netdev sits beside
//     it); a function with netdevs only (eth0, hsi0) gets one Net per netdev, Ethernet.
//   - Bridges are kept (as Pci nodes) only when a GPU, NVSwitch or NIC sits below them; host
//     bridges are not nodes, their children hang from the Cpu of their locality.
//   - hwloc's pci_link_speed is GB/s of the whole link; it is split into a generation and a
//     width preferring x16, then x8, x4, x2, x1 (gen3 x16 and gen4 x8 look the same; said in
//     notes).
//   - Distances: NUMALatency (v2) / v1 latency matrices over NUMA nodes fill
//     System::numa_latency; NVLinkBandwidth (MB/s, GPU <-> GPU or NVSwitch) become NVLinks,
//     count = bandwidth / 25000 MB/s (hwloc's per-link NVLink 2+ rate; 20000 for NVLink 1);
//     XGMIBandwidth becomes xGMI links, count = bandwidth / xgmiBwPerLink().
#include <tinyxml2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "topology/hwloc_parser.h"
#include "topology/topology.h"

namespace braid::topo::hwloc {
namespace {

// ---- Stage 2: objects -> System ----

// hwloc cpuset -> NCCL affinity: 32-bit words without 0x, empty words written as zeros.
std::string ncclAffinity(const std::string& cpuset) {
  std::string out;
  size_t pos = 0;
  while (pos <= cpuset.size()) {
    size_t comma = cpuset.find(',', pos);
    if (comma == std::string::npos) comma = cpuset.size();
    std::string w = cpuset.substr(pos, comma - pos);
    if (w.rfind("0x", 0) == 0) w = w.substr(2);
    if (w.empty()) w = "0";
    if (w.size() < 8) w = std::string(8 - w.size(), '0') + w;
    if (!out.empty()) out += ',';
    out += w;
    pos = comma + 1;
  }
  return out;
}

bool isComputeGpuOsdev(const XObj& o) {
  if (o.kind != Kind::kOsDev || !(o.osdev & (kOsGpu | kOsCoproc))) return false;
  static const char* kPrefixes[] = {"cuda", "nvml", "rsmi", "opencl", "ze", "levelzero"};
  for (const char* p : kPrefixes)
    if (o.name.rfind(p, 0) == 0) return true;
  const char* be = o.info("Backend");
  std::string b = !o.subtype.empty() ? o.subtype : (be ? be : "");
  return b == "CUDA" || b == "NVML" || b == "RSMI" || b == "OpenCL" || b == "LevelZero";
}

std::string backendOf(const XObj& o) {
  if (!o.subtype.empty()) return o.subtype;
  if (const char* be = o.info("Backend")) return be;
  size_t i = 0;
  while (i < o.name.size() && isalpha(static_cast<unsigned char>(o.name[i]))) i++;
  return o.name.substr(0, i);
}

// GB/s of a whole link -> (GT/s per lane, lanes), widest width first. False if none match.
bool splitLinkSpeed(double gbs, double* gts, int* width) {
  struct Gen {
    double gts, enc;
  };
  static const Gen kGens[] = {{2.5, 0.8},        {5, 0.8},          {8, 128.0 / 130},
                              {16, 128.0 / 130}, {32, 128.0 / 130}, {64, 242.0 / 256}};
  static const int kWidths[] = {16, 8, 4, 2, 1, 32};
  for (int w : kWidths)
    for (const Gen& g : kGens) {
      double v = w * g.gts * g.enc / 8;
      if (std::fabs(v - gbs) <= 0.002 * gbs + 1e-6) {
        *gts = g.gts;
        *width = w;
        return true;
      }
    }
  // hwloc 1.x and PCIe 6 report 1 b/b encoding differently; try without encoding loss.
  for (int w : kWidths)
    for (const Gen& g : kGens) {
      double v = w * g.gts / 8;
      if (std::fabs(v - gbs) <= 0.002 * gbs + 1e-6) {
        *gts = g.gts;
        *width = w;
        return true;
      }
    }
  return false;
}

std::string gtsText(double gts) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f GT/s PCIe", gts);
  return buf;
}

// hwloc GUID "ec0d:9a03:0049:a212" -> "0xec0d9a030049a212".
std::string ncclGuid(const char* g) {
  std::string out = "0x";
  for (const char* p = g; *p; p++)
    if (*p != ':') out += static_cast<char>(tolower(static_cast<unsigned char>(*p)));
  return out;
}

int ncclFamily(const std::string& vendor, long fam) {
  if (fam < 0) return -1;
  if (vendor == "AuthenticAMD" && fam >= 15) return static_cast<int>(15 + ((fam - 15) << 4));
  return static_cast<int>(fam);
}

}  // namespace

braidResult_t Parser::build(System* out) {
  System sys;
  sys.source = file_;
  const int n = static_cast<int>(objs_.size());
  int packages = 0, cores = 0, pus = 0;
  std::string arch, hostName;
  for (const XObj& o : objs_) {
    if (o.kind == Kind::kPackage) packages++;
    if (o.kind == Kind::kCore) cores++;
    if (o.kind == Kind::kPu) pus++;
    if (o.kind == Kind::kMachine) {
      if (const char* a = o.info("Architecture")) arch = a;
      if (const char* h = o.info("HostName")) hostName = h;
    }
  }
  sys.packages = packages;
  sys.pus = pus;
  sys.cores = cores;
  if (cores == 0 && pus > 0) {
    sys.cores = -1;
    note("no Core objects in the file: core count unknown (" + std::to_string(pus) + " PUs)");
  }
  Host host;
  host.name = hostName.empty() ? "host0" : hostName;
  sys.hosts.push_back(host);
  if (arch.rfind("ppc64", 0) == 0)
    arch = "ppc64";
  else if (arch == "aarch64")
    arch = "arm64";

  // NUMA nodes -> Cpus.
  std::map<int, int> cpuOfObj;  // NUMA object -> cpus index
  auto packageOf = [&](int i) -> int {
    for (int p = objs_[i].parent; p >= 0; p = objs_[p].parent)
      if (objs_[p].kind == Kind::kPackage) return p;
    std::vector<int> below;  // v1: packages under the NUMA node
    collect(objs_, i, Kind::kPackage, &below);
    return below.size() == 1 ? below[0] : -1;
  };
  for (int i = 0; i < n; i++) {
    const XObj& o = objs_[i];
    if (o.kind != Kind::kNuma) continue;
    if (o.hasCpuset && o.cpusetEmpty) {
      sys.memory_numa_nodes++;
      continue;
    }
    Cpu c;
    c.numaid = static_cast<int>(o.osIndex);
    c.affinity = o.hasCpuset ? ncclAffinity(o.cpuset) : "";
    c.arch = arch;
    int pk = packageOf(i);
    const XObj* infoObj = pk >= 0 ? &objs_[pk] : nullptr;
    if (pk >= 0) c.package = static_cast<int>(objs_[pk].osIndex);
    auto findInfo = [&](const char* key) -> const char* {
      if (infoObj)
        if (const char* v = infoObj->info(key)) return v;
      for (const XObj& m : objs_)
        if (const char* v = m.info(key)) return v;
      return nullptr;
    };
    if (const char* v = findInfo("CPUVendor")) c.vendor = v;
    if (c.arch.empty() && (c.vendor == "GenuineIntel" || c.vendor == "AuthenticAMD"))
      c.arch = "x86_64";  // x86 CPUID vendors; v3 exports drop Architecture
    long fam = -1, model = -1;
    if (const char* v = findInfo("CPUFamilyNumber")) parseLong(v, 10, &fam);
    if (const char* v = findInfo("CPUModelNumber")) parseLong(v, 10, &model);
    if (c.arch == "x86_64") {
      c.family = ncclFamily(c.vendor, fam);
      c.model = static_cast<int>(model);
    }
    cpuOfObj[i] = static_cast<int>(addCpu(&sys, c).index);
  }
  if (sys.memory_numa_nodes > 0)
    note(std::to_string(sys.memory_numa_nodes) +
         " NUMA node(s) without CPUs (GPU or CXL memory) are not counted as CPUs/NUMA nodes");
  if (sys.cpus.empty()) {
    Cpu c;
    c.numaid = 0;
    c.arch = arch;
    for (int i = 0; i < n; i++)
      if (objs_[i].kind == Kind::kMachine) {
        c.affinity = objs_[i].hasCpuset ? ncclAffinity(objs_[i].cpuset) : "";
        cpuOfObj[i] = 0;
        break;
      }
    addCpu(&sys, c);
    note("no NUMA node with CPUs in the file: the machine is taken as one NUMA node");
  }

  // Cpus below each object (post-order, children have larger indices).
  std::vector<std::vector<int>> cpusBelow(n);
  for (int i = n - 1; i >= 0; i--) {
    auto it = cpuOfObj.find(i);
    if (it != cpuOfObj.end()) cpusBelow[i].push_back(it->second);
    for (int c : objs_[i].children)
      cpusBelow[i].insert(cpusBelow[i].end(), cpusBelow[c].begin(), cpusBelow[c].end());
  }
  int ambiguousLocality = 0;
  auto localCpu = [&](int io) -> int {
    int p = objs_[io].parent;
    while (p >= 0 && objs_[p].isIo()) p = objs_[p].parent;
    for (; p >= 0; p = objs_[p].parent) {
      if (!cpusBelow[p].empty()) {
        if (cpusBelow[p].size() > 1) ambiguousLocality++;
        return cpusBelow[p][0];
      }
    }
    return 0;
  };

  // Classify PCI devices.
  enum class Role { kNone, kGpu, kNvSwitch, kNic };
  std::vector<Role> role(n, Role::kNone);
  int gpuClassNoOsdev = 0;
  for (int i = 0; i < n; i++) {
    const XObj& o = objs_[i];
    if (o.kind != Kind::kPciDev) continue;
    bool gpu = false, net = false;
    for (int c : o.children) {
      const XObj& od = objs_[c];
      if (isComputeGpuOsdev(od)) gpu = true;
      if (od.kind == Kind::kOsDev && (od.osdev & (kOsNetwork | kOsOpenFabrics))) net = true;
    }
    if (o.subtype == "NVSwitch" || (o.pci.vendor == 0x10de && (o.pci.class_code >> 8) == 0x0680))
      role[i] = Role::kNvSwitch;
    else if (gpu || gpuBusIds_.count(o.busid))
      role[i] = Role::kGpu;
    else if (net)
      role[i] = Role::kNic;
    else if ((o.pci.class_code >> 8) == 0x0302)
      gpuClassNoOsdev++;
  }
  if (gpuClassNoOsdev)
    note(std::to_string(gpuClassNoOsdev) +
         " PCI 3D controller(s) without a CUDA/NVML/RSMI/OpenCL OS device: not counted as GPUs");

  // Keep bridges with a kept device below.
  std::vector<char> keep(n, 0);
  for (int i = n - 1; i >= 0; i--) {
    if (role[i] != Role::kNone) keep[i] = 1;
    if (objs_[i].kind == Kind::kBridge && !objs_[i].hostBridge)
      for (int c : objs_[i].children)
        if (keep[c]) keep[i] = 1;
    // Host bridges and non-I/O objects pass keep upward through their own children only.
    if (objs_[i].kind == Kind::kBridge && objs_[i].hostBridge) keep[i] = 0;
  }
  int unknownSpeed = 0, splitSpeed = 0;
  auto fillLink = [&](const XObj& o, PciInfo* p) {
    *p = o.pci;
    if (o.linkGBs <= 0) {
      unknownSpeed++;
      return;
    }
    double gts;
    int w;
    if (splitLinkSpeed(o.linkGBs, &gts, &w)) {
      p->link_speed_gts = gts;
      p->link_width = w;
      p->link_speed_text = gtsText(gts);
      p->has_link_speed = p->has_link_width = true;
      splitSpeed++;
    } else {
      unknownSpeed++;
    }
  };

  std::vector<NodeRef> ref(n);
  std::map<int, int> gpuOfObj;  // PCIDev or GPU OSDev -> gpus index
  std::map<int, int> swOfObj;
  std::vector<std::string> partitionNotes;
  // Bus id -> line of the kept object with it.
  std::map<std::string, int> keptBusLine;
  for (int i = 0; i < n; i++) {  // document order: parents before children
    const XObj& o = objs_[i];
    if (!keep[i]) continue;
    // Two kept objects with one bus id would be two model nodes no dump can tell apart (hwloc's
    // own test files repeat bus ids, but on devices the model drops).
    if (!o.busid.empty()) {
      auto [it, fresh] = keptBusLine.emplace(o.busid, o.line);
      if (!fresh)
        return err(o.line, "busid %s appears twice (first at line %d)", o.busid.c_str(),
                   it->second);
    }
    NodeRef parent;
    for (int p = o.parent; p >= 0; p = objs_[p].parent) {
      if (objs_[p].kind == Kind::kBridge && keep[p]) {
        parent = ref[p];
        break;
      }
      if (!objs_[p].isIo()) break;
    }
    if (!parent.valid()) parent = NodeRef{NodeKind::kCpu, localCpu(i)};
    if (o.kind == Kind::kBridge) {
      Pci p;
      fillLink(o, &p.pci);
      if (p.pci.class_code == 0) p.pci.class_code = 0x060400;
      p.parent = parent;
      ref[i] = addPci(&sys, p);
    } else if (role[i] == Role::kGpu) {
      Gpu g;
      fillLink(o, &g.pci);
      g.parent = parent;
      std::map<std::string, int> perBackend;
      std::string model;
      int devLine = 0;
      for (int c : o.children) {
        const XObj& od = objs_[c];
        if (!isComputeGpuOsdev(od)) continue;
        perBackend[backendOf(od)]++;
        if (const char* m = od.info("GPUModel"); m && *m && model.empty()) model = m;
        long idx;
        if ((od.name.rfind("cuda", 0) == 0 || od.name.rfind("rsmi", 0) == 0) && g.dev < 0 &&
            parseLong(od.name.c_str() + 4, 10, &idx) && idx >= 0 && idx < (1 << 20)) {
          g.dev = static_cast<int>(idx);
          devLine = od.line;
        }
      }
      // Two GPUs with one CUDA (or ROCm SMI) index: no machine reports that, and NCCL's
      // files cannot hold it (found by fuzz_hwloc_xml: a dump that did not load back).
      for (const Gpu& other : sys.gpus)
        if (g.dev >= 0 && other.dev == g.dev)
          return err(devLine, "a second GPU OS device with index %d (GPU %s)", g.dev,
                     o.busid.c_str());
      if (model.empty())
        if (const char* m = o.info("PCIDevice")) model = m;
      if (model.empty()) model = o.name;  // v1 PCI name
      g.model = model;
      int parts = 0;
      for (auto& [b, k] : perBackend) parts = std::max(parts, k);
      if (parts > 1)
        partitionNotes.push_back(o.busid + " has " + std::to_string(parts) +
                                 " GPU OS devices of one backend (partitions): one GPU");
      ref[i] = addGpu(&sys, g);
      gpuOfObj[i] = ref[i].index;
      for (int c : o.children)
        if (isComputeGpuOsdev(objs_[c])) gpuOfObj[c] = ref[i].index;
    } else if (role[i] == Role::kNvSwitch) {
      NvSwitch s;
      fillLink(o, &s.pci);
      // NCCL knows an NVSwitch by its class (0x0680xx): a subtype="NVSwitch" device of another
      // class is given NCCL's, or a dump would read back as a plain PCI device.
      if (s.pci.class_code != 0 && (s.pci.class_code >> 8) != 0x0680) {
        char cls[16];
        snprintf(cls, sizeof cls, "0x%06x", s.pci.class_code);
        note("NVSwitch " + o.busid + " has PCI class " + cls + ": taken as 0x068000");
        s.pci.class_code = 0x068000;
      }
      s.parent = parent;
      ref[i] = addNvSwitch(&sys, s);
      swOfObj[i] = ref[i].index;
    } else if (role[i] == Role::kNic) {
      Nic nic;
      fillLink(o, &nic.pci);
      nic.parent = parent;
      ref[i] = addNic(&sys, nic);
      int nicIdx = ref[i].index;
      bool hasOfed = false, ipoib = false;
      for (int c : o.children) {
        const XObj& od = objs_[c];
        if (od.kind != Kind::kOsDev) continue;
        if (od.osdev & kOsOpenFabrics) hasOfed = true;
        if ((od.osdev & kOsNetwork) && od.info("Address") && strlen(od.info("Address")) == 59)
          ipoib = true;  // 20-byte hardware address: IPoIB
      }
      bool ibClass = (o.pci.class_code >> 8) == 0x0207;
      for (int c : o.children) {
        const XObj& od = objs_[c];
        if (od.kind != Kind::kOsDev) continue;
        if (hasOfed && (od.osdev & kOsOpenFabrics)) {
          std::vector<int> ports;
          for (auto& [k, v] : od.infos) {
            int pn;
            char rest[32];
            if (sscanf(k.c_str(), "Port%d%31s", &pn, rest) == 2 && strcmp(rest, "State") == 0)
              ports.push_back(pn);
          }
          if (ports.empty()) ports.push_back(-1);  // no Port<N>State: port unknown
          for (int pn : ports) {
            Net net;
            net.nic = nicIdx;
            net.name = od.name;
            net.port = pn;
            if (const char* gd = od.info("NodeGUID")) net.guid = ncclGuid(gd);
            std::string llKey = "Port" + std::to_string(pn) + "LinkLayer";
            const char* ll = od.info(llKey.c_str());
            if (ll)
              net.link_layer = !strcasecmp(ll, "InfiniBand") ? LinkLayer::kInfiniBand
                               : !strcasecmp(ll, "Ethernet") ? LinkLayer::kEthernet
                                                             : LinkLayer::kUnknown;
            else if (ibClass || ipoib)
              net.link_layer = LinkLayer::kInfiniBand;
            addNet(&sys, net);
          }
        } else if (!hasOfed && (od.osdev & kOsNetwork)) {
          Net net;
          net.nic = nicIdx;
          net.name = od.name;
          const char* a = od.info("Address");
          bool ib = a && strlen(a) == 59;
          net.link_layer = ib                   ? LinkLayer::kInfiniBand
                           : od.subtype.empty() ? LinkLayer::kEthernet
                                                : LinkLayer::kUnknown;  // Slingshot etc.
          addNet(&sys, net);
        }
      }
    }
  }
  for (auto& s : partitionNotes) note(s);
  if (ambiguousLocality)
    note(std::to_string(ambiguousLocality) +
         " PCI device(s) attached above several NUMA nodes: listed under the first");
  if (unknownSpeed)
    note(std::to_string(unknownSpeed) + " PCI link speed(s) missing or 0 in the file: unknown");
  if (splitSpeed)
    note(
        "PCI link speeds are hwloc's GB/s per link, split into generation and width "
        "preferring x16 (gen3 x16 and gen4 x8 look alike)");
  if (!sys.nets.empty()) note("NIC port speeds are not in hwloc XML: unknown");
  if (sys.gpus.empty()) note("no GPU in the file");

  // Distances.
  for (const XDist& d : dists_) {
    const size_t m = d.objs.size();
    if (d.name == "NUMALatency") {
      size_t nc = sys.cpus.size();
      sys.numa_latency.assign(nc, std::vector<uint32_t>(nc, 0));
      std::vector<int> cpuIdx(m, -1);
      for (size_t k = 0; k < m; k++) {
        auto it = cpuOfObj.find(d.objs[k]);
        if (it != cpuOfObj.end()) cpuIdx[k] = it->second;
      }
      for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < m; b++)
          if (cpuIdx[a] >= 0 && cpuIdx[b] >= 0)
            sys.numa_latency[cpuIdx[a]][cpuIdx[b]] =
                static_cast<uint32_t>(std::lround(d.values[a * m + b]));
    } else if (d.name == "NVLinkBandwidth" || d.name == "XGMIBandwidth") {
      bool nv = d.name == "NVLinkBandwidth";
      auto refOf = [&](int obj) -> NodeRef {
        if (auto it = gpuOfObj.find(obj); it != gpuOfObj.end()) return {NodeKind::kGpu, it->second};
        if (auto it = swOfObj.find(obj); it != swOfObj.end())
          return {NodeKind::kNvSwitch, it->second};
        if (objs_[obj].kind == Kind::kPackage || objs_[obj].kind == Kind::kNuma) {
          // NVLink to a CPU (POWER9): the package's first NUMA node with CPUs.
          if (!cpusBelow[obj].empty()) return {NodeKind::kCpu, cpusBelow[obj][0]};
          for (int p = objs_[obj].parent; p >= 0; p = objs_[p].parent)
            if (!cpusBelow[p].empty()) return {NodeKind::kCpu, cpusBelow[p][0]};
        }
        return {};
      };
      std::map<std::pair<NodeRef, NodeRef>, double> best;
      int odd = 0, skipped = 0;
      for (size_t a = 0; a < m; a++)
        for (size_t b = a + 1; b < m; b++) {
          double bw = std::max(d.values[a * m + b], d.values[b * m + a]);
          if (bw <= 0) continue;
          NodeRef ra = refOf(d.objs[a]), rb = refOf(d.objs[b]);
          if (ra == rb && ra.valid()) continue;  // partitions of one GPU
          if (!ra.valid() || !rb.valid() ||
              (ra.kind != NodeKind::kGpu && rb.kind != NodeKind::kGpu)) {
            skipped++;
            continue;
          }
          auto key = std::minmax(ra, rb);
          double& cur = best[{key.first, key.second}];
          cur = std::max(cur, bw);
        }
      for (auto& [pr, bw] : best) {
        double links;
        if (nv) {
          double per = std::fmod(bw, 25000) == 0   ? 25000
                       : std::fmod(bw, 20000) == 0 ? 20000
                                                   : 25000;
          if (std::fmod(bw, per) != 0) odd++;
          links = bw / per;
        } else {
          links = bw / 1000 / xgmiBwPerLink();
        }
        // The NCCL XML loader (and a dump) takes 1..64 links per pair.
        if (!(links < 64.5))
          return err(d.line, "%s value %g MB/s is %.0f links, more than 64", d.name.c_str(), bw,
                     links);
        int count = std::max(1, static_cast<int>(std::lround(links)));
        addNvLink(&sys, pr.first, pr.second, count, nv ? LinkType::kNvLink : LinkType::kXgmi);
      }
      if (skipped)
        note(std::to_string(skipped) + " " + d.name +
             " entries between objects that are not a GPU and a GPU, NVSwitch or CPU: skipped");
      if (odd)
        note(std::to_string(odd) +
             " NVLinkBandwidth value(s) not a multiple of 25000 MB/s: link count rounded");
      note(std::string(nv ? "NVLink" : "xGMI") + " links from hwloc's " + d.name + " matrix" +
           (nv ? " (25000 MB/s per link)" : ""));
    }
  }

  connectSystem(&sys);
  sys.notes.insert(sys.notes.end(), notes_.begin(), notes_.end());
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo::hwloc
