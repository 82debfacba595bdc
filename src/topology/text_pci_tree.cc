// `lspci -t` / `lspci -tv` (and -tvnn) into the model. The tree draws each root bus as
// "[DDDD:BB]" ("[BB]" in older lspci), each device as "DD.F", a bridge's secondary bus range as
// "-[BB]" or "-[BB-CC]" after it, and joins them by "-", "+-" (a child with siblings below), "\-"
// (the last child) and "|" (a branch that goes on). A child's branch sign stands two columns left
// of it, so a device that starts a line belongs to the device whose children branch from that
// column; devices further along a line are children of the one before. -v puts the device's name
// after two spaces; only devices printed last on their line have one.

#include "topology/text_util.h"

namespace braid::topo {
using namespace text;  // NOLINT: the shared helpers of the text loaders

namespace {

struct TreeDev {
  int line = 0;
  int parent = -1;  // index into the list, -1 for a root bus
  bool root = false;
  std::string domain = "0000";
  int bus = -1;        // a root's bus; a device's bus, from its parent
  int secondary = -1;  // a bridge's first secondary bus, -1 when not a bridge
  std::string devfn;   // "01.0"
  std::string name;    // -v text
  int vendor = -1, device = -1;
};

bool treeIsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// "DD.F" at s[i]
bool devfnAt(const std::string& s, size_t i) {
  return i + 4 <= s.size() && treeIsHex(s[i]) && treeIsHex(s[i + 1]) && s[i + 2] == '.' &&
         s[i + 3] >= '0' && s[i + 3] <= '7' && (i + 4 == s.size() || !treeIsHex(s[i + 4]));
}

// "[10de:2330]" in -nn text
void idsFromName(TreeDev* d) {
  for (size_t p = d->name.find('['); p != std::string::npos; p = d->name.find('[', p + 1)) {
    long a = 0, b = 0;
    if (p + 10 < d->name.size() && d->name[p + 5] == ':' && d->name[p + 10] == ']' &&
        toLong(d->name.substr(p + 1, 4), 16, &a) && toLong(d->name.substr(p + 6, 4), 16, &b)) {
      d->vendor = static_cast<int>(a);
      d->device = static_cast<int>(b);
    }
  }
}

enum class TreeRole { kNone, kGpu, kNvSwitch, kNic };

bool treeHas(const std::string& s, const char* w) { return s.find(w) != std::string::npos; }

// Role by what -v names a device (lspci -t prints no class): NVIDIA parts other than bridges,
// audio and USB are GPUs, NVSwitches by name or device id (1af1 A100, 22a3 H100 generation);
// Mellanox parts and devices named Ethernet, Infiniband, Network or Fabric Adapter are NICs.
TreeRole treeRole(const TreeDev& d) {
  const std::string& n = d.name;
  bool nvidia = d.vendor == 0x10de || treeHas(n, "NVIDIA");
  if (nvidia) {
    if (treeHas(n, "NVSwitch") || d.device == 0x1af1 || d.device == 0x22a3 ||
        treeHas(n, "Device 1af1") || treeHas(n, "Device 22a3"))
      return TreeRole::kNvSwitch;
    if (treeHas(n, "Audio") || treeHas(n, "USB") || treeHas(n, "Serial") || treeHas(n, "Bridge") ||
        treeHas(n, "bridge"))
      return TreeRole::kNone;
    return TreeRole::kGpu;
  }
  if (d.vendor == 0x15b3 || treeHas(n, "Mellanox") || treeHas(n, "Ethernet") ||
      treeHas(n, "Infiniband") || treeHas(n, "InfiniBand") || treeHas(n, "Network") ||
      treeHas(n, "Fabric Adapter"))
    return TreeRole::kNic;
  return TreeRole::kNone;
}

char treeAt(const std::string& s, long i) {
  return i >= 0 && i < static_cast<long>(s.size()) ? s[static_cast<size_t>(i)] : ' ';
}

braidResult_t treeError(const std::string& name, int lineNo, const std::string& line,
                        const char* what) {
  return fail(braidInvalidArgument,
              "%s:%d: '%s': %s; expected an lspci -t tree: root buses [DDDD:BB], devices DD.F, "
              "bridges' buses [BB] or [BB-CC], joined by -, +-, \\- and |",
              name.c_str(), lineNo, trim(line).substr(0, 120).c_str(), what);
}

}  // namespace

bool text::isLspciTreeLine(const std::string& line) {
  std::string l = trim(line);
  size_t i = l.find_first_not_of("-+\\| ");
  if (i == std::string::npos || i == 0 || l[i] != '[') return false;
  size_t close = l.find(']', i);
  std::string in = close == std::string::npos ? "" : l.substr(i + 1, close - i - 1);
  long v = 0;
  if (in.size() == 2) return toLong(in, 16, &v) && close + 1 < l.size() && l[close + 1] == '-';
  return in.size() == 7 && in[4] == ':' && toLong(in.substr(0, 4), 16, &v) &&
         toLong(in.substr(5), 16, &v);
}

braidResult_t loadLspciTree(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadLspciTree: out is null");
  std::vector<TreeDev> devs;
  std::map<long, int> owner;  // branch column -> the device whose children branch there
  std::vector<std::string> ls = splitLines(text);
  std::map<std::pair<std::string, int>, int> rootLine;  // root bus -> the line it starts
  bool ended = false;
  int lineNo = 0, trailing = 0;
  for (const std::string& raw : ls) {
    ++lineNo;
    if (trim(raw).empty()) {
      ended = ended || !devs.empty();
      continue;
    }
    size_t lead = raw.find_first_not_of(" |+\\-");
    // Tree lines start with branch signs and a '-' just before their first bus or device.
    bool treeLine = lead != std::string::npos && lead > 0 && raw[lead - 1] == '-';
    if (devs.empty() && !treeLine) return treeError(name, lineNo, raw, "no tree starts here");
    if (ended || !treeLine) {  // text after the tree (a prompt's output, a note)
      ended = true;
      ++trailing;
      continue;
    }
    int prev = -1;  // the device before on this line
    size_t i = 0;
    while (i < raw.size()) {
      char c = raw[i];
      if (c == ' ' || c == '|' || c == '+' || c == '\\' || c == '-') {
        ++i;
        continue;
      }
      long col = static_cast<long>(i);
      if (c == '[') {
        size_t close = raw.find(']', i);
        if (close == std::string::npos) return treeError(name, lineNo, raw, "a '[' without ']'");
        std::string in = raw.substr(i + 1, close - i - 1);
        long a = 0, b = 0;
        // A root bus: [DDDD:BB], or [BB] where older lspci leaves domain 0 out.
        bool rootBus = (in.size() == 7 && in[4] == ':') || (prev < 0 && in.size() == 2);
        if (rootBus) {
          std::string dom = in.size() == 7 ? in.substr(0, 4) : "0000";
          if (prev >= 0 || !toLong(dom, 16, &a) || !toLong(in.substr(in.size() - 2), 16, &b))
            return treeError(name, lineNo, raw, "a root bus after a device");
          auto [at, fresh] = rootLine.insert({{dom, static_cast<int>(b)}, lineNo});
          if (!fresh) {
            std::string what = "root bus [" + in + "] listed twice (first at line " +
                               std::to_string(at->second) + ")";
            return treeError(name, lineNo, raw, what.c_str());
          }
          TreeDev r;
          r.line = lineNo;
          r.root = true;
          r.domain = dom;
          r.bus = static_cast<int>(b);
          devs.push_back(r);
          prev = static_cast<int>(devs.size()) - 1;
        } else {  // a bridge's bus range
          size_t dash = in.find('-');
          if (prev < 0 || devs[prev].root || !toLong(in.substr(0, dash), 16, &a) || a > 255)
            return treeError(name, lineNo, raw, "a bus range that follows no device");
          devs[prev].secondary = static_cast<int>(a);
        }
        i = close + 1;
        continue;
      }
      if (!devfnAt(raw, i)) return treeError(name, lineNo, raw, "unexpected text in the tree");
      TreeDev d;
      d.line = lineNo;
      d.devfn = raw.substr(i, 4);
      if (prev >= 0) {
        d.parent = prev;
        owner[col - 2] = prev;
      } else {
        char sign = treeAt(raw, col - 2);
        auto it = owner.find(col - 2);
        if ((sign != '+' && sign != '\\' && sign != '-') || it == owner.end())
          return treeError(name, lineNo, raw, "a device under no bus or bridge above it");
        d.parent = it->second;
      }
      const TreeDev& p = devs[d.parent];
      d.domain = p.domain;
      d.bus = p.root ? p.bus : p.secondary;
      i += 4;
      if (i + 1 < raw.size() && raw[i] == ' ' && raw[i + 1] == ' ') {
        d.name = trim(raw.substr(i));
        idsFromName(&d);
        i = raw.size();
      }
      devs.push_back(d);
      prev = static_cast<int>(devs.size()) - 1;
    }
    // A root that starts a line branches its children from two columns past its ']'.
    if (prev >= 0 && devs[prev].root) {
      size_t close = raw.find(']', raw.rfind('['));
      owner[static_cast<long>(close) + 2] = prev;
    }
  }
  if (devs.empty()) return fail(braidInvalidArgument, "%s: no lspci -t tree", name.c_str());
  int roleDevs = 0;
  for (const TreeDev& d : devs)
    roleDevs += !d.root && d.secondary < 0 && treeRole(d) != TreeRole::kNone;
  if (roleDevs > kMaxTextDevices)
    return fail(braidInvalidArgument,
                "%s: the tree has %d GPUs, NVSwitches and NICs, more than the %d a text topology "
                "may have",
                name.c_str(), roleDevs, kMaxTextDevices);
  System sys;
  sys.source = name;
  std::map<std::string, int> cpuByKey;
  NodeRef cpu = ensureCpu(&sys, &cpuByKey, "", -1);
  std::set<std::pair<std::string, int>> roots;
  for (const TreeDev& d : devs)
    if (d.root) roots.insert({d.domain, d.bus});
  bool hostBridges = roots.size() > 1;
  // Depth of a bridge below its root port: 0 the root port, odd a switch's upstream port.
  auto bridgeDepth = [&](int i) {
    int depth = -1;
    for (int p = i; p >= 0 && !devs[p].root; p = devs[p].parent) ++depth;
    return depth;
  };
  std::map<int, NodeRef> made;
  int nextBus = 1;
  std::function<NodeRef(int)> nodeFor = [&](int i) -> NodeRef {
    if (i < 0) return cpu;
    auto it = made.find(i);
    if (it != made.end()) return it->second;
    const TreeDev& d = devs[i];
    bool keep = d.root ? hostBridges : (d.secondary >= 0 && bridgeDepth(i) % 2 == 1);
    if (!keep) return made[i] = nodeFor(d.parent);
    Pci p;
    if (d.root) {
      p.pci.busid = virtualBusId(nextBus++);
      p.pci.class_code = 0x060000;
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s:%02x:%s", d.domain.c_str(), d.bus & 0xff,
                    d.devfn.c_str());
      p.pci.busid = buf;
      p.pci.class_code = 0x060400;
    }
    p.parent = nodeFor(d.parent);
    return made[i] = addPci(&sys, p);
  };
  int unnamed = 0;
  for (int i = 0; i < static_cast<int>(devs.size()); ++i) {
    const TreeDev& d = devs[i];
    if (d.root || d.secondary >= 0) continue;
    if (d.name.empty()) ++unnamed;
    TreeRole role = treeRole(d);
    if (role == TreeRole::kNone) continue;
    PciInfo info;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s:%02x:%s", d.domain.c_str(), d.bus & 0xff, d.devfn.c_str());
    normalizeBusId(buf, &info.busid);
    info.vendor = d.vendor >= 0                 ? d.vendor
                  : role != TreeRole::kNic      ? 0x10de
                  : treeHas(d.name, "Mellanox") ? 0x15b3
                                                : -1;
    info.device = d.device;
    NodeRef parent = nodeFor(d.parent);
    if (role == TreeRole::kGpu) {
      Gpu g;
      g.pci = info;
      g.pci.class_code = 0x030200;
      g.parent = parent;
      g.dev = static_cast<int>(sys.gpus.size());
      g.model = d.name;
      g.sm = smFromModel(d.name);
      addGpu(&sys, g);
    } else if (role == TreeRole::kNvSwitch) {
      NvSwitch s;
      s.pci = info;
      s.pci.class_code = 0x068000;
      s.parent = parent;
      addNvSwitch(&sys, s);
    } else {
      Nic n;
      n.pci = info;
      n.pci.class_code = 0x020000;
      n.parent = parent;
      addNic(&sys, n);
    }
  }
  connectSystem(&sys);
  sys.notes.push_back("lspci -t gives no NUMA placement: one NUMA node assumed");
  if (hostBridges)
    sys.notes.push_back(std::to_string(roots.size()) +
                        " root buses read as PCIe host bridges of that node (NODE between them)");
  if (!sys.nvswitches.empty())
    sys.notes.push_back(std::to_string(sys.nvswitches.size()) +
                        " NVSwitch PCI device(s): NVLinks are not listed by lspci");
  if (unnamed)
    sys.notes.push_back(std::to_string(unnamed) +
                        " device(s) without a name (lspci -t without -v): roles unknown, ignored");
  if (trailing) sys.notes.push_back(std::to_string(trailing) + " line(s) after the tree skipped");
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo
