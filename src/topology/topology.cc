// The system model: names, bandwidth facts, link derivation and the canonical fingerprint.
#include "topology/topology.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace braid::topo {

const char* nodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kNone:
      return "none";
    case NodeKind::kCpu:
      return "cpu";
    case NodeKind::kPci:
      return "pci";
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kNvSwitch:
      return "nvswitch";
    case NodeKind::kNic:
      return "nic";
    case NodeKind::kNet:
      return "net";
  }
  return "?";
}

const char* linkLayerName(LinkLayer layer) {
  switch (layer) {
    case LinkLayer::kInfiniBand:
      return "InfiniBand";
    case LinkLayer::kEthernet:
      return "Ethernet";
    case LinkLayer::kUnknown:
      break;
  }
  return "unknown";
}

const char* linkTypeName(LinkType type) {
  switch (type) {
    case LinkType::kNvLink:
      return "NVLink";
    case LinkType::kXgmi:
      return "xGMI";
    case LinkType::kPcie:
      return "PCIe";
    case LinkType::kCpu:
      return "CPU";
    case LinkType::kNet:
      return "NET";
  }
  return "?";
}

const char* pathClassName(PathClass c) {
  switch (c) {
    case PathClass::kLoc:
      return "LOC";
    case PathClass::kNvl:
      return "NVL";
    case PathClass::kNvb:
      return "NVB";
    case PathClass::kPix:
      return "PIX";
    case PathClass::kPxb:
      return "PXB";
    case PathClass::kPhb:
      return "PHB";
    case PathClass::kNode:
      return "NODE";
    case PathClass::kSys:
      return "SYS";
    case PathClass::kNet:
      return "NET";
    case PathClass::kDis:
      return "DIS";
  }
  return "?";
}

double pcieBw(double gts, int width) {
  // NCCL tabulates per-lane speed in units of 100 Mb/s (8 GT/s -> 60) and rates the link at
  // width * speed / 80 GB/s; an unknown speed falls back to gen3, an unknown width to x16.
  // Gen1/2 lose 20% to 8b/10b encoding (2.5 GT/s -> 15), gen3 and later ~1.5% to 128b/130b
  // (8 GT/s -> 60), as in NCCL's kvDictPciGen.
  // Computed in double: a loader bounds what it reads (kMaxPcieWidth lanes, 1000 GT/s), but
  // no input may overflow an int here (fuzz_topo_xml found link_width="169999999").
  static_assert(kUnknownPcieGenAs == 3, "per_lane's default is gen3's 8 GT/s");
  double per_lane = 60;
  if (gts > 0) per_lane = std::floor(gts * (gts < 8 ? 6.0 : 7.5) + 0.5);
  double lanes = width > 0 ? width : kUnknownPcieWidthAs;
  return lanes * per_lane / 80.0;
}

int pcieGeneration(double gts) {
  if (gts <= 0) return 0;
  if (gts < 4) return 1;
  if (gts < 7) return 2;
  if (gts < 12) return 3;
  if (gts < 24) return 4;
  if (gts < 48) return 5;
  return 6;
}

double nvlinkBwPerLink(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

int nvlinkVersion(int sm) {
  if (sm >= 100) return 5;
  if (sm >= 90) return 4;
  if (sm >= 80) return 3;
  if (sm >= 70) return 2;
  if (sm >= 60) return 1;
  return 0;
}

double xgmiBwPerLink() { return 50.0; }

double cpuInterconnectBw(const Cpu& cpu) {
  if (cpu.arch == "ppc64" || cpu.arch == "ppc64le") return 32.0;
  if (cpu.arch == "arm64" || cpu.arch == "aarch64") return 6.0;
  if (cpu.vendor == "AuthenticAMD") return 16.0;
  if (cpu.vendor == "GenuineIntel") {
    if (cpu.model >= 0xCF) return 40.0;  // Emerald Rapids
    if (cpu.model >= 0x8F) return 22.0;  // Sapphire Rapids
    if (cpu.model >= 0x55) return 10.0;  // Skylake and later
    return 6.0;
  }
  return 6.0;
}

double netBw(double speed_gbps) { return speed_gbps / 8.0; }

bool normalizeBusId(const std::string& in, std::string* out) {
  // [domain:]bus:dev.fn, hex; domain up to 8 digits, bus 2, dev 2, fn 1.
  std::string s;
  for (char c : in) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto isHex = [](const std::string& t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c));
    });
  };
  size_t dot = s.rfind('.');
  if (dot == std::string::npos) return false;
  std::string fn = s.substr(dot + 1);
  std::string head = s.substr(0, dot);
  size_t c2 = head.rfind(':');
  if (c2 == std::string::npos) return false;
  std::string dev = head.substr(c2 + 1);
  std::string rest = head.substr(0, c2);
  std::string domain = "0000", bus;
  size_t c1 = rest.rfind(':');
  if (c1 == std::string::npos) {
    bus = rest;
  } else {
    domain = rest.substr(0, c1);
    bus = rest.substr(c1 + 1);
  }
  if (!isHex(domain) || !isHex(bus) || !isHex(dev) || !isHex(fn)) return false;
  if (domain.size() > 8 || bus.size() > 2 || dev.size() > 2 || fn.size() > 1) return false;
  if (std::stoi(dev, nullptr, 16) > 0x1f || std::stoi(fn, nullptr, 16) > 7) return false;
  if (domain.size() < 4) domain.insert(0, 4 - domain.size(), '0');
  if (bus.size() < 2) bus.insert(0, 1, '0');
  if (dev.size() < 2) dev.insert(0, 1, '0');
  *out = domain + ":" + bus + ":" + dev + "." + fn;
  return true;
}

NodeRef addCpu(System* sys, Cpu cpu) {
  cpu.seq = sys->next_seq++;
  sys->cpus.push_back(std::move(cpu));
  return {NodeKind::kCpu, static_cast<int>(sys->cpus.size()) - 1};
}
NodeRef addPci(System* sys, Pci pci) {
  pci.seq = sys->next_seq++;
  sys->pcis.push_back(std::move(pci));
  return {NodeKind::kPci, static_cast<int>(sys->pcis.size()) - 1};
}
NodeRef addGpu(System* sys, Gpu gpu) {
  gpu.seq = sys->next_seq++;
  sys->gpus.push_back(std::move(gpu));
  return {NodeKind::kGpu, static_cast<int>(sys->gpus.size()) - 1};
}
NodeRef addNvSwitch(System* sys, NvSwitch sw) {
  sw.seq = sys->next_seq++;
  sys->nvswitches.push_back(std::move(sw));
  return {NodeKind::kNvSwitch, static_cast<int>(sys->nvswitches.size()) - 1};
}
NodeRef addNic(System* sys, Nic nic) {
  nic.seq = sys->next_seq++;
  sys->nics.push_back(std::move(nic));
  return {NodeKind::kNic, static_cast<int>(sys->nics.size()) - 1};
}
NodeRef addNet(System* sys, Net net) {
  int index = static_cast<int>(sys->nets.size());
  if (net.nic >= 0 && net.nic < static_cast<int>(sys->nics.size()))
    sys->nics[net.nic].nets.push_back(index);
  sys->nets.push_back(std::move(net));
  return {NodeKind::kNet, index};
}

void addNvLink(System* sys, NodeRef a, NodeRef b, int count, LinkType type) {
  Link l;
  l.a = a;
  l.b = b;
  l.type = type;
  l.count = count;
  sys->links.push_back(l);
}

namespace {

const PciInfo* pciOf(const System& sys, NodeRef r) {
  switch (r.kind) {
    case NodeKind::kPci:
      return &sys.pcis[r.index].pci;
    case NodeKind::kGpu:
      return &sys.gpus[r.index].pci;
    case NodeKind::kNvSwitch:
      return &sys.nvswitches[r.index].pci;
    case NodeKind::kNic:
      return &sys.nics[r.index].pci;
    default:
      return nullptr;
  }
}

NodeRef parentOf(const System& sys, NodeRef r) {
  switch (r.kind) {
    case NodeKind::kPci:
      return sys.pcis[r.index].parent;
    case NodeKind::kGpu:
      return sys.gpus[r.index].parent;
    case NodeKind::kNvSwitch:
      return sys.nvswitches[r.index].parent;
    case NodeKind::kNic:
      return sys.nics[r.index].parent;
    case NodeKind::kNet:
      return {NodeKind::kNic, sys.nets[r.index].nic};
    default:
      return {};
  }
}

int gpuSm(const System& sys, NodeRef r) {
  return r.kind == NodeKind::kGpu ? sys.gpus[r.index].sm : -1;
}

}  // namespace

NodeRef cpuOf(const System& sys, NodeRef node) {
  for (int guard = 0; node.valid() && guard < 1000; ++guard) {
    if (node.kind == NodeKind::kCpu) return node;
    node = parentOf(sys, node);
  }
  return {};
}

void connectSystem(System* sys) {
  if (sys->hosts.empty()) sys->hosts.push_back(Host{"host0", ""});
  // NCCL knows an NVSwitch by its class alone; give it one when the source had none.
  for (NvSwitch& sw : sys->nvswitches)
    if (sw.pci.class_code == 0) sw.pci.class_code = 0x068000;
  std::vector<Link> kept;
  for (const Link& l : sys->links)
    if (l.type == LinkType::kNvLink || l.type == LinkType::kXgmi) kept.push_back(l);
  sys->links.swap(kept);
  for (Link& l : sys->links) {
    if (l.type == LinkType::kXgmi) {
      l.bw_gbs = l.count * xgmiBwPerLink();
      continue;
    }
    // NCCL rates an NVLink by the GPU's SM; a GPU on either end decides.
    int sm = std::max(gpuSm(*sys, l.a), gpuSm(*sys, l.b));
    if (sm < 0) sm = 80;
    l.version = nvlinkVersion(sm);
    l.bw_gbs = l.count * nvlinkBwPerLink(sm);
  }
  auto addPcieLink = [&](NodeRef child) {
    NodeRef parent = parentOf(*sys, child);
    if (!parent.valid()) return;
    const PciInfo* pci = pciOf(*sys, child);
    Link l;
    l.a = child;
    l.b = parent;
    l.type = LinkType::kPcie;
    l.version = pci ? pcieGeneration(pci->link_speed_gts) : 0;
    l.width = pci ? pci->link_width : 0;
    l.bw_gbs = pci ? pcieBw(pci->link_speed_gts, pci->link_width) : pcieBw(0, 0);
    sys->links.push_back(l);
  };
  for (int i = 0; i < static_cast<int>(sys->pcis.size()); ++i) addPcieLink({NodeKind::kPci, i});
  for (int i = 0; i < static_cast<int>(sys->gpus.size()); ++i) addPcieLink({NodeKind::kGpu, i});
  for (int i = 0; i < static_cast<int>(sys->nvswitches.size()); ++i)
    addPcieLink({NodeKind::kNvSwitch, i});
  for (int i = 0; i < static_cast<int>(sys->nics.size()); ++i) addPcieLink({NodeKind::kNic, i});
  for (int i = 0; i < static_cast<int>(sys->cpus.size()); ++i) {
    for (int j = i + 1; j < static_cast<int>(sys->cpus.size()); ++j) {
      if (sys->cpus[i].host != sys->cpus[j].host) continue;
      Link l;
      l.a = {NodeKind::kCpu, i};
      l.b = {NodeKind::kCpu, j};
      l.type = LinkType::kCpu;
      l.bw_gbs = std::min(cpuInterconnectBw(sys->cpus[i]), cpuInterconnectBw(sys->cpus[j]));
      sys->links.push_back(l);
    }
  }
  for (int i = 0; i < static_cast<int>(sys->nets.size()); ++i) {
    Link l;
    l.a = {NodeKind::kNic, sys->nets[i].nic};
    l.b = {NodeKind::kNet, i};
    l.type = LinkType::kNet;
    l.bw_gbs = netBw(sys->nets[i].speed_gbps);
    sys->links.push_back(l);
  }
}

NodeRef findByBusId(const System& sys, const std::string& busid) {
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
    if (sys.gpus[i].pci.busid == busid) return {NodeKind::kGpu, i};
  for (int i = 0; i < static_cast<int>(sys.nvswitches.size()); ++i)
    if (sys.nvswitches[i].pci.busid == busid) return {NodeKind::kNvSwitch, i};
  for (int i = 0; i < static_cast<int>(sys.nics.size()); ++i)
    if (sys.nics[i].pci.busid == busid) return {NodeKind::kNic, i};
  for (int i = 0; i < static_cast<int>(sys.pcis.size()); ++i)
    if (sys.pcis[i].pci.busid == busid) return {NodeKind::kPci, i};
  return {};
}

// ---- Fingerprint ----

namespace {

std::string attrs(const ExtraAttrs& extra) {
  std::vector<std::pair<std::string, std::string>> sorted(extra.begin(), extra.end());
  std::sort(sorted.begin(), sorted.end());
  std::string s;
  for (const auto& [k, v] : sorted) s += " " + k + "=" + v;
  return s;
}

std::string pciText(const PciInfo& p) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s class=%06x ids=%d:%d:%d:%d speed=%g width=%d",
                p.busid.c_str(), p.class_code, p.vendor, p.device, p.subsystem_vendor,
                p.subsystem_device, p.link_speed_gts, p.link_width);
  return buf;
}

}  // namespace

std::string fingerprint(const System& sys) {
  // Each node is named by its identity (bus id, numaid, net name) rather than its index, so
  // two loads that number nodes differently still compare equal.
  auto name = [&](NodeRef r) -> std::string {
    if (!r.valid()) return "-";
    std::ostringstream o;
    if (r.kind == NodeKind::kCpu) {
      const Cpu& c = sys.cpus[r.index];
      o << "cpu[h" << c.host << " numa" << c.numaid << " " << c.affinity << "]";
    } else if (r.kind == NodeKind::kNet) {
      o << "net[" << sys.nets[r.index].name << "]";
    } else {
      const PciInfo* p = pciOf(sys, r);
      o << nodeKindName(r.kind) << "[";
      if (p && !p->busid.empty())
        o << p->busid;
      else
        o << "#" << r.index;
      o << "]";
    }
    return o.str();
  };
  std::vector<std::string> lines;
  for (const Cpu& c : sys.cpus) {
    std::ostringstream o;
    o << "cpu h" << c.host << " numa" << c.numaid << " pkg" << c.package << " " << c.affinity << " "
      << c.arch << " " << c.vendor << " " << c.family << "/" << c.model << attrs(c.extra);
    lines.push_back(o.str());
  }
  for (int i = 0; i < static_cast<int>(sys.pcis.size()); ++i) {
    const Pci& p = sys.pcis[i];
    lines.push_back("pci " + pciText(p.pci) + " under " + name(p.parent) + attrs(p.extra));
  }
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i) {
    const Gpu& g = sys.gpus[i];
    std::ostringstream o;
    o << "gpu " << pciText(g.pci) << " under " << name(g.parent) << " dev" << g.dev << " sm" << g.sm
      << " rank" << g.rank << " gdr" << g.gdr << " '" << g.model << "'" << attrs(g.extra) << " |"
      << attrs(g.pci_extra);
    lines.push_back(o.str());
  }
  for (int i = 0; i < static_cast<int>(sys.nvswitches.size()); ++i) {
    const NvSwitch& s = sys.nvswitches[i];
    lines.push_back("nvswitch " + pciText(s.pci) + " under " + name(s.parent));
  }
  for (int i = 0; i < static_cast<int>(sys.nics.size()); ++i) {
    const Nic& n = sys.nics[i];
    std::ostringstream o;
    o << "nic " << pciText(n.pci) << " under " << name(n.parent) << attrs(n.pci_extra);
    lines.push_back(o.str());
  }
  for (const Net& n : sys.nets) {
    std::ostringstream o;
    o << "net " << n.name << " of " << name({NodeKind::kNic, n.nic}) << " dev" << n.dev << " port"
      << n.port << " " << n.speed_gbps << "Gb " << linkLayerName(n.link_layer) << " guid" << n.guid
      << " gdr" << n.gdr << " lat" << n.latency_us << " maxconn" << n.maxconn << attrs(n.extra);
    lines.push_back(o.str());
  }
  for (const Link& l : sys.links) {
    std::string a = name(l.a), b = name(l.b);
    if (b < a) std::swap(a, b);
    std::ostringstream o;
    o << "link " << linkTypeName(l.type) << " " << a << " " << b << " x" << l.count << " v"
      << l.version << " w" << l.width << " " << l.bw_gbs;
    lines.push_back(o.str());
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& s : lines) out += s + "\n";
  return out;
}

bool sameModel(const System& a, const System& b) { return fingerprint(a) == fingerprint(b); }

}  // namespace braid::topo
