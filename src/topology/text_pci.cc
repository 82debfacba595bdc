// PCI views into the model: `lspci -nn` / `-vvv` and lstopo's console output.

#include "topology/text_util.h"

namespace braid::topo {
using namespace text;  // NOLINT: the shared helpers of the text loaders

namespace {

// ---------------------------------------------------------------------------------------------
// lspci

struct PciRec {
  int line = 0;
  std::string busid;  // normalised
  std::string domain;
  int bus = -1;
  uint32_t cls = 0;  // 16-bit class
  bool has_class = false;
  std::string class_name, desc;
  int vendor = -1, device = -1;
  int numa = -1;
  double speed = 0;
  int width = 0;
  int secondary = -1, subordinate = -1;
  std::string port;  // "Upstream", "Downstream", "Root", ""
};

uint32_t classFromName(const std::string& n, bool* ok) {
  static const std::map<std::string, uint32_t> t = {
      {"3D controller", 0x0302},
      {"VGA compatible controller", 0x0300},
      {"Display controller", 0x0380},
      {"Ethernet controller", 0x0200},
      {"Infiniband controller", 0x0207},
      {"Network controller", 0x0280},
      {"Bridge", 0x0680},
      {"PCI bridge", 0x0604},
      {"Host bridge", 0x0600},
      {"ISA bridge", 0x0601},
      {"Non-Volatile memory controller", 0x0108},
      {"System peripheral", 0x0880},
      {"Processing accelerators", 0x1200},
  };
  auto it = t.find(n);
  *ok = it != t.end();
  return *ok ? it->second : 0;
}

int vendorFromName(const std::string& d) {
  if (startsWith(d, "NVIDIA")) return 0x10de;
  if (startsWith(d, "Mellanox")) return 0x15b3;
  if (startsWith(d, "Advanced Micro Devices")) return 0x1002;
  if (startsWith(d, "Intel")) return 0x8086;
  if (startsWith(d, "Broadcom")) return 0x14e4;
  if (startsWith(d, "Amazon")) return 0x1d0f;
  return -1;
}

bool parseLspciHeader(const std::string& l, PciRec* r) {
  size_t sp = l.find(' ');
  if (sp == std::string::npos || l.empty() || std::isspace((unsigned char)l[0])) return false;
  std::string id = l.substr(0, sp);
  std::string norm;
  if (id.find('.') == std::string::npos || !normalizeBusId(id, &norm)) return false;
  r->busid = norm;
  size_t c1 = norm.rfind(':');
  size_t c0 = norm.rfind(':', c1 - 1);
  r->domain = norm.substr(0, c0);
  long b = 0;
  if (!toLong(norm.substr(c0 + 1, c1 - c0 - 1), 16, &b)) return false;
  r->bus = static_cast<int>(b);
  std::string rest = l.substr(sp + 1);
  size_t colon = rest.find(": ");
  if (colon == std::string::npos) return false;
  std::string cp = trim(rest.substr(0, colon));
  r->desc = trim(rest.substr(colon + 2));
  long v = 0;
  if (cp.size() >= 6 && cp.back() == ']') {
    size_t ob = cp.rfind('[');
    if (ob != std::string::npos && toLong(cp.substr(ob + 1, cp.size() - ob - 2), 16, &v)) {
      r->cls = static_cast<uint32_t>(v);
      r->has_class = true;
      cp = trim(cp.substr(0, ob));
    }
  }
  r->class_name = cp;
  if (!r->has_class) r->cls = classFromName(cp, &r->has_class);
  // "[10de:20b2]" in -nn output.
  for (size_t pos = r->desc.find('['); pos != std::string::npos; pos = r->desc.find('[', pos + 1)) {
    size_t cb = r->desc.find(']', pos);
    if (cb == std::string::npos) break;
    std::string in = r->desc.substr(pos + 1, cb - pos - 1);
    long a = 0, d = 0;
    if (in.size() == 9 && in[4] == ':' && toLong(in.substr(0, 4), 16, &a) &&
        toLong(in.substr(5), 16, &d)) {
      r->vendor = static_cast<int>(a);
      r->device = static_cast<int>(d);
    }
  }
  if (r->vendor < 0) {
    r->vendor = vendorFromName(r->desc);
    size_t dp = r->desc.find(" Device ");
    if (dp != std::string::npos) {
      auto w = words(r->desc.substr(dp + 8));
      if (!w.empty() && w[0].size() == 4 && toLong(w[0], 16, &v)) r->device = static_cast<int>(v);
    }
  }
  return true;
}

void parseLspciDetail(const std::string& raw, PciRec* r) {
  std::string l = trim(raw);
  if (startsWith(l, "NUMA node:")) {
    long v = 0;
    if (toLong(l.substr(10), 10, &v)) r->numa = static_cast<int>(v);
  } else if (startsWith(l, "LnkSta:")) {
    size_t s = l.find("Speed ");
    double v = 0, lanes = 0;
    if (s != std::string::npos && leadingDouble(l.substr(s + 6), &v) && plausiblePcieSpeed(v))
      r->speed = v;
    size_t w = l.find("Width x");
    if (w != std::string::npos && leadingDouble(l.substr(w + 7), &lanes) &&
        plausiblePcieWidth(lanes))
      r->width = static_cast<int>(lanes);
  } else if (startsWith(l, "Bus: primary=")) {
    size_t s = l.find("secondary="), e = l.find("subordinate=");
    long v = 0;
    if (s != std::string::npos && toLong(l.substr(s + 10, 2), 16, &v))
      r->secondary = static_cast<int>(v);
    if (e != std::string::npos && toLong(l.substr(e + 12, 2), 16, &v))
      r->subordinate = static_cast<int>(v);
  } else if (l.find("] Express (") != std::string::npos) {
    if (l.find("Upstream Port") != std::string::npos) r->port = "Upstream";
    if (l.find("Downstream Port") != std::string::npos) r->port = "Downstream";
    if (l.find("Root Port") != std::string::npos) r->port = "Root";
  }
}

// ---------------------------------------------------------------------------------------------
// lstopo console output

struct LsObj {
  int depth = 0;
  int parent = -1;
  std::string type;
  int cpu = -1;  // NUMA node index known at this object
  std::string busid;
  uint32_t cls = 0;
  int vendor = -1, device = -1;
  std::vector<std::string> gpu_osdevs, net_osdevs;
};

std::string attrValue(const std::string& l, const char* key) {
  size_t p = l.find(key);
  if (p == std::string::npos) return "";
  p += std::strlen(key);
  size_t e = p;
  while (e < l.size() && l[e] != ' ' && l[e] != ')') ++e;
  return l.substr(p, e - p);
}

}  // namespace

bool text::isLspciLine(const std::string& line) {
  PciRec rec;
  return parseLspciHeader(line, &rec);
}

braidResult_t loadLspci(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadLspci: out is null");
  std::vector<PciRec> recs;
  int lineNo = 0;
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    if (raw.empty()) continue;
    if (!std::isspace(static_cast<unsigned char>(raw[0]))) {
      PciRec r;
      r.line = lineNo;
      if (parseLspciHeader(raw, &r))
        recs.push_back(r);
      else if (recs.empty())
        return fail(braidInvalidArgument,
                    "%s:%d: '%s': expected an lspci device line (BB:DD.F class: name)",
                    name.c_str(), lineNo, raw.substr(0, 80).c_str());
    } else if (!recs.empty()) {
      parseLspciDetail(raw, &recs.back());
    }
  }
  if (recs.empty()) return fail(braidInvalidArgument, "%s: no lspci device line", name.c_str());
  System sys;
  sys.source = name;
  enum Role { kNone, kGpu, kSwitch, kNicRole };
  auto roleOf = [](const PciRec& r) {
    bool gpuVendor = r.vendor == 0x10de || r.vendor == 0x1002;
    if (r.cls == 0x0302 && gpuVendor) return kGpu;
    if ((r.cls == 0x0300 || r.cls == 0x0380) && gpuVendor) return kGpu;
    if (r.cls == 0x0680 && r.vendor == 0x10de) return kSwitch;
    if (r.cls == 0x0200 || r.cls == 0x0207) return kNicRole;
    return kNone;
  };
  // Bridges by (domain, secondary bus).
  std::map<std::pair<std::string, int>, int> bridgeOfBus;
  bool anyNuma = false;
  for (int i = 0; i < static_cast<int>(recs.size()); ++i) {
    if (recs[i].numa >= 0) anyNuma = true;
    if (recs[i].cls == 0x0604 && recs[i].secondary >= 0)
      bridgeOfBus[{recs[i].domain, recs[i].secondary}] = i;
  }
  auto upBridge = [&](int i) {
    auto it = bridgeOfBus.find({recs[i].domain, recs[i].bus});
    return (it == bridgeOfBus.end() || it->second == i) ? -1 : it->second;
  };
  // A bridge stands for a PCI switch when it is a switch's upstream port (or of unknown port
  // type but below another bridge); root and downstream ports are passed through.
  auto kept = [&](int i) {
    if (recs[i].port == "Upstream") return true;
    if (recs[i].port.empty()) return upBridge(i) >= 0;
    return false;
  };
  std::map<std::string, int> cpuByKey;
  auto cpuFor = [&](int numa) { return ensureCpu(&sys, &cpuByKey, std::to_string(numa), numa); };
  std::map<int, NodeRef> pciNode;
  std::function<NodeRef(int, int)> parentFor = [&](int i, int numa) -> NodeRef {
    int steps = 0;
    for (int b = upBridge(i); b >= 0 && steps < 64; b = upBridge(b), ++steps) {
      if (!kept(b)) continue;
      auto it = pciNode.find(b);
      if (it != pciNode.end()) return it->second;
      Pci p;
      p.pci.busid = recs[b].busid;
      p.pci.class_code = 0x060400;
      p.pci.vendor = recs[b].vendor;
      p.pci.device = recs[b].device;
      if (recs[b].speed > 0) {
        p.pci.link_speed_gts = recs[b].speed;
        p.pci.has_link_speed = true;
      }
      if (recs[b].width > 0) {
        p.pci.link_width = recs[b].width;
        p.pci.has_link_width = true;
      }
      p.parent = parentFor(b, recs[b].numa >= 0 ? recs[b].numa : numa);
      NodeRef r = addPci(&sys, p);
      pciNode[b] = r;
      return r;
    }
    return cpuFor(numa);
  };
  int roleDevs = 0;
  for (const PciRec& r : recs) roleDevs += roleOf(r) != kNone;
  if (roleDevs > kMaxTextDevices)
    return fail(braidInvalidArgument,
                "%s: lspci lists %d GPUs, NVSwitches and NICs, more than the %d a text topology "
                "may have",
                name.c_str(), roleDevs, kMaxTextDevices);
  int ignored = 0, vga = 0;
  for (int i = 0; i < static_cast<int>(recs.size()); ++i) {
    const PciRec& r = recs[i];
    Role role = roleOf(r);
    if (role == kNone) {
      ++ignored;
      if (r.cls == 0x0300 || r.cls == 0x0302) ++vga;
      continue;
    }
    PciInfo info;
    info.busid = r.busid;
    info.class_code = r.cls << 8;
    info.vendor = r.vendor;
    info.device = r.device;
    if (r.speed > 0) info.link_speed_gts = r.speed, info.has_link_speed = true;
    if (r.width > 0) info.link_width = r.width, info.has_link_width = true;
    NodeRef parent = parentFor(i, r.numa);
    if (role == kGpu) {
      Gpu g;
      g.pci = info;
      g.parent = parent;
      g.dev = static_cast<int>(sys.gpus.size());
      g.model = r.desc;
      g.sm = smFromModel(r.desc);
      addGpu(&sys, g);
    } else if (role == kSwitch) {
      NvSwitch s;
      s.pci = info;
      s.parent = parent;
      addNvSwitch(&sys, s);
    } else {
      Nic n;
      n.pci = info;
      n.parent = parent;
      addNic(&sys, n);
    }
  }
  if (sys.cpus.empty()) cpuFor(-1);
  connectSystem(&sys);
  if (!anyNuma) sys.notes.push_back("lspci gives no NUMA node lines: one NUMA node assumed");
  if (bridgeOfBus.empty())
    sys.notes.push_back("lspci gives no bridge bus ranges: devices placed directly under the CPU");
  if (!sys.nvswitches.empty())
    sys.notes.push_back(std::to_string(sys.nvswitches.size()) +
                        " NVSwitch PCI device(s): NVLinks are not listed by lspci");
  if (vga)
    sys.notes.push_back(std::to_string(vga) +
                        " display device(s) of a non-GPU vendor (BMC VGA) not counted as GPUs");
  sys.notes.push_back(std::to_string(ignored) + " other PCI device(s) ignored");
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadLstopoText(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadLstopoText: out is null");
  System sys;
  sys.source = name;
  std::vector<LsObj> objs;
  std::vector<int> stack;
  int packages = 0, cores = 0, pus = 0, lineNo = 0;
  std::map<std::string, int> cpuByKey;
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    if (trim(raw).empty()) continue;
    size_t ind = raw.find_first_not_of(' ');
    std::string l = raw.substr(ind);
    // The summary after the tree ("depth 0: ...", latency matrices) ends it.
    if (startsWith(l, "depth ") || startsWith(l, "Special depth") ||
        startsWith(l, "Relative latency") || startsWith(l, "Topology not from"))
      break;
    LsObj o;
    o.depth = static_cast<int>(ind);
    size_t e = 0;
    while (e < l.size() && l[e] != ' ' && l[e] != '(') ++e;
    o.type = l.substr(0, e);
    while (!stack.empty() && objs[stack.back()].depth >= o.depth) stack.pop_back();
    o.parent = stack.empty() ? -1 : stack.back();
    if (o.parent >= 0) o.cpu = objs[o.parent].cpu;
    if (o.type == "Package") {
      ++packages;
    } else if (o.type == "Core") {
      ++cores;
    } else if (o.type == "PU") {
      ++pus;
    } else if (o.type == "NUMANode") {
      long p = -1;
      std::string pv = attrValue(l, "P#");
      if (!toLong(pv, 10, &p)) p = static_cast<long>(sys.cpus.size());
      NodeRef c = ensureCpu(&sys, &cpuByKey, std::to_string(p), static_cast<int>(p));
      sys.cpus[c.index].package = packages - 1;
      if (o.parent >= 0 && objs[o.parent].cpu < 0) {
        // Give the enclosing object (and its later children) this NUMA node.
        objs[o.parent].cpu = c.index;
      }
      o.cpu = c.index;
    } else if (o.type == "PCI" || o.type == "PCIBridge") {
      std::string b = attrValue(l, "busid=");
      if (b.empty()) {
        auto w = words(l);
        if (w.size() >= 2) b = w[1];
      }
      std::string norm;
      if (normalizeBusId(b, &norm)) o.busid = norm;
      std::string id = attrValue(l, "id="), cls = attrValue(l, "class=");
      long v = 0, d = 0;
      if (id.size() == 9 && toLong(id.substr(0, 4), 16, &v) && toLong(id.substr(5), 16, &d))
        o.vendor = static_cast<int>(v), o.device = static_cast<int>(d);
      if (cls.size() >= 4 && toLong(cls.substr(0, 4), 16, &v)) o.cls = static_cast<uint32_t>(v);
      if (o.type == "PCIBridge") o.cls = 0x0604;
    } else {
      // OS devices name themselves in quotes at the end: GPU "cuda0", Network "ib0".
      size_t q = l.rfind('"'), q0 = q == std::string::npos ? q : l.rfind('"', q - 1);
      std::string dev = (q0 != std::string::npos && q0 < q) ? l.substr(q0 + 1, q - q0 - 1) : "";
      int pci = o.parent;
      if (pci >= 0 && objs[pci].type == "PCI" && !dev.empty()) {
        if (startsWith(o.type, "GPU") || startsWith(o.type, "CoProc"))
          objs[pci].gpu_osdevs.push_back(dev);
        else if (startsWith(o.type, "OpenFabrics") || startsWith(o.type, "Network") ||
                 startsWith(o.type, "Net"))
          objs[pci].net_osdevs.push_back(dev);
      }
    }
    objs.push_back(o);
    stack.push_back(static_cast<int>(objs.size()) - 1);
  }
  if (objs.empty() || (objs[0].type != "Machine" && packages == 0 && sys.cpus.empty()))
    return fail(braidInvalidArgument, "%s: not lstopo output (no Machine line)", name.c_str());
  if (sys.cpus.empty()) ensureCpu(&sys, &cpuByKey, "-1", -1);
  // PCI objects: roles, then the bridges that hold a kept device.
  int n = static_cast<int>(objs.size());
  std::vector<int> role(n, 0);  // 1 gpu, 2 nvswitch, 3 nic
  std::vector<char> keep(n, 0);
  int vga = 0;
  for (int i = 0; i < n; ++i) {
    const LsObj& o = objs[i];
    if (o.type != "PCI") continue;
    bool gpuVendor = o.vendor == 0x10de || o.vendor == 0x1002;
    if (!o.gpu_osdevs.empty() || (o.cls == 0x0302 && gpuVendor))
      role[i] = 1;
    else if (o.cls == 0x0680 && o.vendor == 0x10de)
      role[i] = 2;
    else if (!o.net_osdevs.empty() || o.cls == 0x0207 || o.cls == 0x0200)
      role[i] = 3;
    else if (o.cls == 0x0300 || o.cls == 0x0302)
      ++vga;
    if (role[i])
      for (int p = o.parent; p >= 0; p = objs[p].parent)
        if (objs[p].type == "PCIBridge") keep[p] = 1;
  }
  std::map<int, NodeRef> node;
  auto parentOf = [&](int i) -> NodeRef {
    for (int p = objs[i].parent; p >= 0; p = objs[p].parent)
      if (keep[p]) return node[p];
    int c = objs[i].cpu >= 0 ? objs[i].cpu : 0;
    return {NodeKind::kCpu, c};
  };
  for (int i = 0; i < n; ++i) {
    const LsObj& o = objs[i];
    PciInfo info;
    info.busid = o.busid;
    info.class_code = o.cls << 8;
    info.vendor = o.vendor;
    info.device = o.device;
    if (keep[i]) {
      Pci p;
      p.pci = info;
      p.parent = parentOf(i);
      node[i] = addPci(&sys, p);
    } else if (role[i] == 1) {
      Gpu g;
      g.pci = info;
      g.parent = parentOf(i);
      g.dev = static_cast<int>(sys.gpus.size());
      addGpu(&sys, g);
    } else if (role[i] == 2) {
      NvSwitch s;
      s.pci = info;
      s.parent = parentOf(i);
      addNvSwitch(&sys, s);
    } else if (role[i] == 3) {
      Nic nic;
      nic.pci = info;
      nic.parent = parentOf(i);
      int k = addNic(&sys, nic).index;
      for (const auto& nd : o.net_osdevs) {
        Net net;
        net.nic = k;
        net.name = nd;
        net.dev = static_cast<int>(sys.nets.size());
        addNet(&sys, net);
      }
    }
  }
  sys.packages = packages;
  sys.cores = cores;
  sys.pus = pus;
  connectSystem(&sys);
  if (vga)
    sys.notes.push_back(std::to_string(vga) +
                        " PCI display device(s) without a GPU OS device: not counted as GPUs");
  sys.notes.push_back("read from lstopo console output: no link speeds or NVLinks");
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo
