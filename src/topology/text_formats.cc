// Text outputs of system tools read into the system model: `nvidia-smi topo -m` and
// `topo -p2p r`, `nvidia-smi nvlink --status`, `ibstat`, `ibstatus`, `lspci -nn` / `-vvv`,
// lstopo's console output, and a /sys/class/infiniband snapshot directory. Each gives part of
// a machine; what a format cannot say (bus ids, link peers, NUMA placement) is left unknown or
// guessed with a line in System::notes. Errors name the file, the line and the problem.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "topology/topology.h"

namespace braid::topo {
namespace {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      if (!cur.empty() && cur.back() == '\r') cur.pop_back();
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) {
    if (cur.back() == '\r') cur.pop_back();
    out.push_back(cur);
  }
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Whole string as an integer in base; false on anything else.
bool toLong(const std::string& s, int base, long* out) {
  std::string t = trim(s);
  if (t.empty()) return false;
  const char* p = t.c_str();
  if (base == 16 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
  if (*p == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(p, &end, base);
  if (errno != 0 || end == p || *end != '\0') return false;
  *out = v;
  return true;
}

// Leading number of s ("200 Gb/sec (4X HDR)" -> 200); false when none.
bool leadingDouble(const std::string& s, double* out) {
  std::string t = trim(s);
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.')) return false;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str()) return false;
  *out = v;
  return true;
}

void noteOnce(System* sys, const std::string& line) {
  if (std::find(sys->notes.begin(), sys->notes.end(), line) == sys->notes.end())
    sys->notes.push_back(line);
}

// "0-51,104-155" -> NCCL's cpumask text (32-bit hex words, most significant first).
std::string cpuListToMask(const std::string& list) {
  std::vector<uint32_t> w;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    long a = 0, b = 0;
    size_t dash = part.find('-');
    if (dash == std::string::npos) {
      if (!toLong(part, 10, &a)) return "";
      b = a;
    } else if (!toLong(part.substr(0, dash), 10, &a) || !toLong(part.substr(dash + 1), 10, &b)) {
      return "";
    }
    if (a < 0 || b < a || b >= 8192) return "";
    for (long c = a; c <= b; ++c) {
      size_t i = static_cast<size_t>(c / 32);
      if (w.size() <= i) w.resize(i + 1, 0);
      w[i] |= 1u << (c % 32);
    }
  }
  if (w.empty()) return "";
  std::string out;
  for (size_t i = w.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", w[i]);
    if (!out.empty()) out += ",";
    out += buf;
  }
  return out;
}

// SM (compute capability x10) from a product name, -1 when unknown.
int smFromModel(const std::string& m) {
  struct {
    const char* key;
    int sm;
  } const table[] = {{"GB200", 100}, {"B200", 100}, {"B100", 100}, {"GH200", 90}, {"H200", 90},
                     {"H100", 90},   {"H800", 90},  {"H20", 90},   {"L40", 89},   {"L4", 89},
                     {"A100", 80},   {"A800", 80},  {"A30", 80},   {"A10", 86},   {"A40", 86},
                     {"V100", 70},   {"P100", 60},  {"T4", 75}};
  for (const auto& e : table)
    if (m.find(e.key) != std::string::npos) return e.sm;
  return -1;
}

NodeRef ensureCpu(System* sys, std::map<std::string, int>* byKey, const std::string& key,
                  int numaid) {
  auto it = byKey->find(key);
  if (it != byKey->end()) return {NodeKind::kCpu, it->second};
  Cpu c;
  c.numaid = numaid;
  NodeRef r = addCpu(sys, c);
  (*byKey)[key] = r.index;
  return r;
}

std::string virtualBusId(int n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ffff:%02x:%02x.0", (n >> 5) & 0xff, n & 0x1f);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// nvidia-smi topo -m / topo -p2p r

struct SmiMatrix {
  std::vector<std::string> dev;                // column names: GPU0.., NIC0.., mlx5_0..
  std::vector<std::vector<std::string>> cell;  // [row dev][col dev], "" when missing
  std::vector<std::string> cpu_aff, numa_aff;  // per dev ("" when not given)
  std::vector<std::string> gpu_numa;           // per dev
  std::map<std::string, std::string> legend;   // NIC0 -> mlx5_0
  bool has_affinity = false;
  int truncated_rows = 0;
};

bool isGpuName(const std::string& s) {
  return s.size() > 3 && startsWith(s, "GPU") &&
         std::all_of(s.begin() + 3, s.end(), [](char c) { return std::isdigit((unsigned char)c); });
}

// Finds the header line (has GPU0 and no X cell); -1 when none.
int smiHeaderLine(const std::vector<std::string>& ls) {
  for (int i = 0; i < static_cast<int>(ls.size()); ++i) {
    auto w = words(ls[i]);
    if (std::find(w.begin(), w.end(), "GPU0") != w.end() &&
        std::find(w.begin(), w.end(), "X") == w.end() && isGpuName(w[0]))
      return i;
  }
  return -1;
}

braidResult_t parseSmiMatrix(const std::vector<std::string>& ls, const std::string& name,
                             SmiMatrix* m) {
  int h = smiHeaderLine(ls);
  if (h < 0)
    return fail(braidInvalidArgument, "%s: no nvidia-smi matrix header (GPU0 ...)", name.c_str());
  auto hw = words(ls[h]);
  std::vector<int> trailing;  // 0 cpu affinity, 1 numa affinity, 2 gpu numa id, 3 other
  for (size_t i = 0; i < hw.size(); ++i) {
    if (hw[i] == "CPU" && i + 1 < hw.size() && hw[i + 1] == "Affinity") {
      trailing.push_back(0);
      ++i;
    } else if (hw[i] == "NUMA" && i + 1 < hw.size() && hw[i + 1] == "Affinity") {
      trailing.push_back(1);
      ++i;
    } else if (hw[i] == "GPU" && i + 2 < hw.size() && hw[i + 1] == "NUMA" && hw[i + 2] == "ID") {
      trailing.push_back(2);
      i += 2;
    } else if (!trailing.empty()) {
      trailing.push_back(3);
    } else {
      m->dev.push_back(hw[i]);
    }
  }
  m->has_affinity = std::find(trailing.begin(), trailing.end(), 0) != trailing.end() ||
                    std::find(trailing.begin(), trailing.end(), 1) != trailing.end();
  size_t n = m->dev.size();
  m->cell.assign(n, std::vector<std::string>(n));
  m->cpu_aff.assign(n, "");
  m->numa_aff.assign(n, "");
  m->gpu_numa.assign(n, "");
  std::map<std::string, size_t> idx;
  for (size_t i = 0; i < n; ++i) idx[m->dev[i]] = i;
  for (size_t li = h + 1; li < ls.size(); ++li) {
    auto w = words(ls[li]);
    if (w.empty()) continue;
    std::string first = w[0];
    if (first.size() > 1 && first.back() == ':' && w.size() >= 2) {  // legend "NIC0: mlx5_0"
      m->legend[first.substr(0, first.size() - 1)] = w[1];
      continue;
    }
    auto it = idx.find(first);
    if (it == idx.end()) continue;
    size_t r = it->second;
    size_t k = 1;
    for (size_t c = 0; c < n; ++c, ++k) {
      if (k >= w.size()) break;
      m->cell[r][c] = w[k];
    }
    if (w.size() < n + 1) m->truncated_rows++;
    bool isGpuRow = isGpuName(first);
    for (size_t t = 0; t < trailing.size() && isGpuRow; ++t, ++k) {
      if (k >= w.size()) {
        m->truncated_rows++;
        break;
      }
      if (trailing[t] == 0) m->cpu_aff[r] = w[k];
      if (trailing[t] == 1) m->numa_aff[r] = w[k];
      if (trailing[t] == 2) m->gpu_numa[r] = w[k];
    }
  }
  return braidSuccess;
}

// Path class of a topo -m cell, or -1 (X, NV#, unknown).
int smiClass(const std::string& c, bool* node) {
  if (node) *node = false;
  if (c == "PIX") return static_cast<int>(PathClass::kPix);
  if (c == "PXB") return static_cast<int>(PathClass::kPxb);
  if (c == "PHB") return static_cast<int>(PathClass::kPhb);
  if (c == "NODE") {
    if (node) *node = true;
    return static_cast<int>(PathClass::kPhb);
  }
  if (c == "SYS" || c == "SOC") return static_cast<int>(PathClass::kSys);
  return -1;
}

int nvCount(const std::string& c) {
  long v = 0;
  if (c.size() > 2 && startsWith(c, "NV") && toLong(c.substr(2), 10, &v) && v > 0 && v < 1000)
    return static_cast<int>(v);
  return 0;
}

struct UnionFind {
  std::vector<int> p;
  explicit UnionFind(int n) : p(n) {
    for (int i = 0; i < n; ++i) p[i] = i;
  }
  int find(int x) { return p[x] == x ? x : p[x] = find(p[x]); }
  void unite(int a, int b) { p[find(a)] = find(b); }
};

braidResult_t loadSmiTopoMatrix(const SmiMatrix& m, const std::string& name, System* sys) {
  int n = static_cast<int>(m.dev.size());
  // The cell for (i, j): the row of i, else the row of j.
  auto cellOf = [&](int i, int j) { return m.cell[i][j].empty() ? m.cell[j][i] : m.cell[i][j]; };
  std::vector<bool> isGpu(n);
  for (int i = 0; i < n; ++i) isGpu[i] = isGpuName(m.dev[i]);
  // NUMA nodes: NUMA affinity where numeric, else CPU affinity, else one unknown node.
  std::vector<std::string> key(n);
  std::vector<int> numa(n, -1);
  for (int i = 0; i < n; ++i) {
    if (!isGpu[i]) continue;
    long v = 0;
    if (toLong(m.numa_aff[i], 10, &v)) {
      key[i] = "numa" + std::to_string(v);
      numa[i] = static_cast<int>(v);
    } else if (!m.cpu_aff[i].empty() && m.cpu_aff[i] != "N/A") {
      key[i] = "cpus" + m.cpu_aff[i];
    }
  }
  std::map<std::string, int> cpuByKey;
  std::vector<int> cpuOfDev(n, -1);
  std::set<std::string> keys;
  for (int i = 0; i < n; ++i)
    if (isGpu[i]) keys.insert(key[i]);
  bool guessedNuma = false;
  for (int i = 0; i < n; ++i) {
    if (!isGpu[i]) continue;
    int numaid = numa[i];
    if (numaid < 0 && keys.size() > 1) {
      auto it = cpuByKey.find(key[i]);
      numaid =
          it != cpuByKey.end() ? sys->cpus[it->second].numaid : static_cast<int>(cpuByKey.size());
      guessedNuma = true;
    }
    NodeRef c = ensureCpu(sys, &cpuByKey, key[i], numaid);
    cpuOfDev[i] = c.index;
    std::string mask = cpuListToMask(m.cpu_aff[i]);
    if (!mask.empty() && sys->cpus[c.index].affinity.empty()) sys->cpus[c.index].affinity = mask;
  }
  if (guessedNuma)
    sys->notes.push_back("NUMA affinity not given: NUMA nodes numbered by distinct CPU affinity");
  if (sys->cpus.empty()) ensureCpu(sys, &cpuByKey, "", -1);
  bool numaNa = false;
  for (int i = 0; i < n; ++i) numaNa |= isGpu[i] && numa[i] < 0;
  if (numaNa)
    sys->notes.push_back(sys->cpus.size() == 1
                             ? "NUMA affinity N/A: one NUMA node assumed (numaid unknown)"
                             : "NUMA affinity N/A for some GPUs: placed by CPU affinity");
  // NICs (and other non-GPU columns) follow the GPUs they are closest to.
  for (int i = 0; i < n; ++i) {
    if (isGpu[i]) continue;
    int best = -1, bestCls = 100, sysGpu = -1;
    for (int j = 0; j < n; ++j) {
      if (!isGpu[j]) continue;
      int c = smiClass(cellOf(i, j), nullptr);
      if (c < 0) continue;
      if (c == static_cast<int>(PathClass::kSys)) {
        sysGpu = j;
        continue;
      }
      if (c < bestCls) bestCls = c, best = j;
    }
    if (best >= 0) {
      cpuOfDev[i] = cpuOfDev[best];
    } else if (sysGpu >= 0 && sys->cpus.size() == 2) {
      cpuOfDev[i] = 1 - cpuOfDev[sysGpu];
    } else {
      cpuOfDev[i] = 0;
    }
  }
  // PCI switches from PIX (one switch) and PXB (switches under a common switch).
  UnionFind pix(n), pxb(n);
  bool sawNode = false;
  int sysSameNuma = 0;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      bool node = false;
      int c = smiClass(cellOf(i, j), &node);
      sawNode |= node;
      if (c < 0) continue;
      if (cpuOfDev[i] != cpuOfDev[j]) continue;
      if (c == static_cast<int>(PathClass::kSys)) sysSameNuma++;
      if (c == static_cast<int>(PathClass::kPix)) pix.unite(i, j), pxb.unite(i, j);
      if (c == static_cast<int>(PathClass::kPxb)) pxb.unite(i, j);
    }
  std::vector<NodeRef> parent(n);
  int nextBus = 1;
  auto newSwitch = [&](NodeRef up) {
    Pci p;
    p.pci.busid = virtualBusId(nextBus++);
    p.pci.class_code = 0x060400;
    p.parent = up;
    return addPci(sys, p);
  };
  std::map<int, std::vector<int>> pxbGroups;
  for (int i = 0; i < n; ++i) pxbGroups[pxb.find(i)].push_back(i);
  for (auto& [root, members] : pxbGroups) {
    NodeRef cpu{NodeKind::kCpu, cpuOfDev[members[0]]};
    std::map<int, std::vector<int>> units;
    for (int i : members) units[pix.find(i)].push_back(i);
    if (units.size() == 1) {
      NodeRef up = members.size() > 1 ? newSwitch(cpu) : cpu;
      for (int i : members) parent[i] = up;
      continue;
    }
    NodeRef top = newSwitch(cpu);
    for (auto& [u, devs] : units) {
      NodeRef leaf = newSwitch(top);
      for (int i : devs) parent[i] = leaf;
    }
  }
  std::vector<NodeRef> ref(n);
  for (int i = 0; i < n; ++i) {
    if (!isGpu[i]) continue;
    Gpu g;
    g.parent = parent[i];
    g.dev = std::atoi(m.dev[i].c_str() + 3);
    ref[i] = addGpu(sys, g);
  }
  for (int i = 0; i < n; ++i) {
    if (isGpu[i]) continue;
    Nic nic;
    nic.parent = parent[i];
    ref[i] = addNic(sys, nic);
    Net net;
    net.nic = ref[i].index;
    auto lg = m.legend.find(m.dev[i]);
    net.name = lg != m.legend.end() ? lg->second : m.dev[i];
    net.dev = static_cast<int>(sys->nets.size());
    addNet(sys, net);
  }
  // NVLinks: all GPU pairs with the same NV# (3+ GPUs) is an NVSwitch system.
  std::vector<int> gpus;
  for (int i = 0; i < n; ++i)
    if (isGpu[i]) gpus.push_back(i);
  int common = -1;
  bool allSame = gpus.size() >= 3;
  for (size_t a = 0; a < gpus.size() && allSame; ++a)
    for (size_t b = a + 1; b < gpus.size() && allSame; ++b) {
      int c = nvCount(cellOf(gpus[a], gpus[b]));
      if (c == 0 || (common >= 0 && c != common)) allSame = false;
      common = c;
    }
  if (allSame) {
    NvSwitch sw;
    NodeRef s = addNvSwitch(sys, sw);
    for (int i : gpus) addNvLink(sys, ref[i], s, common);
    sys->notes.push_back("every GPU pair NV" + std::to_string(common) +
                         ": modelled as one NVSwitch with " + std::to_string(common) +
                         " links from each GPU");
  } else {
    for (size_t a = 0; a < gpus.size(); ++a)
      for (size_t b = a + 1; b < gpus.size(); ++b) {
        int c = nvCount(cellOf(gpus[a], gpus[b]));
        if (c > 0) addNvLink(sys, ref[gpus[a]], ref[gpus[b]], c);
      }
  }
  connectSystem(sys);
  if (nextBus > 1)
    sys->notes.push_back(
        "nvidia-smi topo -m gives no bus ids: PCI switches (ffff:xx) inferred from PIX/PXB");
  if (!allSame && n > 0) {
    int nvPairs = 0;
    for (size_t a = 0; a < gpus.size(); ++a)
      for (size_t b = a + 1; b < gpus.size(); ++b) nvPairs += nvCount(cellOf(gpus[a], gpus[b])) > 0;
    if (nvPairs) sys->notes.push_back("NV# pairs hide their PCI relation: placed by NUMA only");
  } else if (allSame) {
    sys->notes.push_back("NV# pairs hide their PCI relation: placed by NUMA only");
  }
  if (sawNode) sys->notes.push_back("NODE read as PHB (the model has no NODE class)");
  if (sysSameNuma)
    sys->notes.push_back(std::to_string(sysSameNuma) +
                         " SYS pair(s) within one NUMA affinity: cannot be represented");
  if (m.truncated_rows)
    sys->notes.push_back(std::to_string(m.truncated_rows) + " truncated row(s) in " + name);
  for (int i = 0; i < n; ++i)
    if (!m.gpu_numa[i].empty() && m.gpu_numa[i] != "N/A") sys->memory_numa_nodes++;
  // Compare the model's classes with the matrix.
  Paths paths = computePaths(*sys);
  int mismatches = 0;
  std::string first;
  for (int i = 0; i < n; ++i) {
    if (!isGpu[i]) continue;
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int want = smiClass(cellOf(i, j), nullptr);
      if (want < 0) continue;
      Path got = isGpu[j] ? paths.gpu_gpu[ref[i].index][ref[j].index]
                          : paths.gpu_nic[ref[i].index][ref[j].index];
      if (static_cast<int>(got.cls) != want) {
        if (mismatches++ == 0)
          first = m.dev[i] + "-" + m.dev[j] + " is " + cellOf(i, j) + " in the file, " +
                  pathClassName(got.cls) + " in the model";
      }
    }
  }
  if (mismatches)
    sys->notes.push_back(std::to_string(mismatches) +
                         " path class(es) the model cannot reproduce, first: " + first);
  return braidSuccess;
}

bool isP2pCell(const std::string& c) {
  return c == "OK" || c == "NS" || c == "CNS" || c == "GNS" || c == "TNS" || c == "U" || c == "NA";
}

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
    if (s != std::string::npos) leadingDouble(l.substr(s + 6), &r->speed);
    size_t w = l.find("Width x");
    if (w != std::string::npos) r->width = std::atoi(l.c_str() + w + 7);
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

// ---------------------------------------------------------------------------------------------

std::string sniffTextTopology(const std::string& text) {
  std::vector<std::string> ls = splitLines(text.substr(0, 1 << 16));
  for (const std::string& raw : ls) {
    std::string l = trim(raw);
    if (l.empty() || startsWith(l, "$ ")) continue;
    auto w = words(l);
    if (startsWith(l, "CA '")) return "ibstat";
    if (startsWith(l, "Infiniband device '")) return "ibstatus";
    if (startsWith(l, "Machine (") || startsWith(l, "Machine L#")) return "lstopo";
    if (w.size() >= 2 && w[0] == "GPU" && !w[1].empty() && w[1].back() == ':' &&
        std::isdigit((unsigned char)w[1][0]))
      return "nvlink-status";
    if (isGpuName(w[0]) || std::find(w.begin(), w.end(), "GPU0") != w.end()) {
      if (l.find("Affinity") != std::string::npos) return "nvidia-smi-topo";
      // A header without affinity columns: topo -p2p when the cells say OK/NS.
      int h = smiHeaderLine(ls);
      if (h >= 0 && h + 1 < static_cast<int>(ls.size())) {
        auto r = words(ls[h + 1]);
        for (size_t i = 1; i < r.size(); ++i)
          if (isP2pCell(r[i])) return "nvidia-smi-p2p";
        return "nvidia-smi-topo";
      }
      return "nvidia-smi-topo";
    }
    PciRec rec;
    if (parseLspciHeader(raw, &rec)) return "lspci";
    return "";
  }
  return "";
}

braidResult_t loadNvidiaSmiTopo(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadNvidiaSmiTopo: out is null");
  std::vector<std::string> ls = splitLines(text);
  SmiMatrix m;
  BRAID_TRY(parseSmiMatrix(ls, name, &m));
  int gpus = 0;
  for (const auto& d : m.dev) gpus += isGpuName(d);
  if (gpus == 0)
    return fail(braidInvalidArgument, "%s: nvidia-smi matrix lists no GPU", name.c_str());
  // topo -p2p cells say OK/NS..., topo -m cells NV#/PIX/...; no affinity columns and neither
  // kind of cell reads as the capability matrix too.
  bool p2pCell = false, pathCell = false;
  for (const auto& row : m.cell)
    for (const auto& c : row) {
      p2pCell |= isP2pCell(c);
      pathCell |= nvCount(c) > 0 || smiClass(c, nullptr) >= 0;
    }
  bool p2p = p2pCell || (!m.has_affinity && !pathCell);
  System sys;
  sys.source = name;
  if (p2p) {
    // Capability matrix: GPUs only.
    int ok = 0, no = 0;
    for (size_t i = 0; i < m.dev.size(); ++i) {
      if (!isGpuName(m.dev[i])) continue;
      Gpu g;
      g.dev = std::atoi(m.dev[i].c_str() + 3);
      addGpu(&sys, g);
      for (const auto& c : m.cell[i]) (c == "OK" ? ok : no) += (c != "X" && !c.empty());
    }
    connectSystem(&sys);
    sys.notes.push_back("nvidia-smi topo -p2p: a P2P capability matrix (" + std::to_string(ok) +
                        " OK, " + std::to_string(no) +
                        " not OK); GPUs only, no links, NUMA or PCI placement");
  } else {
    BRAID_TRY(loadSmiTopoMatrix(m, name, &sys));
  }
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadNvidiaSmiNvlinkStatus(const std::string& text, const std::string& name,
                                        System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadNvidiaSmiNvlinkStatus: out is null");
  System sys;
  sys.source = name;
  std::vector<int> links;
  std::vector<double> gbs;
  int inactive = 0, lineNo = 0;
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (startsWith(l, "GPU ")) {
      long idx = 0;
      size_t colon = l.find(':');
      if (colon == std::string::npos || !toLong(l.substr(4, colon - 4), 10, &idx))
        return fail(braidInvalidArgument, "%s:%d: expected 'GPU N: model', got '%s'", name.c_str(),
                    lineNo, l.c_str());
      Gpu g;
      g.dev = static_cast<int>(idx);
      std::string model = trim(l.substr(colon + 1));
      size_t u = model.find(" (UUID");
      if (u != std::string::npos) model = model.substr(0, u);
      g.model = model;
      g.sm = smFromModel(model);
      addGpu(&sys, g);
      links.push_back(0);
      gbs.push_back(0);
    } else if (startsWith(l, "Link ")) {
      if (links.empty())
        return fail(braidInvalidArgument, "%s:%d: a Link line before any GPU line", name.c_str(),
                    lineNo);
      size_t colon = l.find(':');
      double v = 0;
      if (colon != std::string::npos && leadingDouble(l.substr(colon + 1), &v) && v > 0) {
        links.back()++;
        gbs.back() = v;
      } else {
        inactive++;
      }
    }
  }
  if (sys.gpus.empty())
    return fail(braidInvalidArgument, "%s: no 'GPU N:' line (nvidia-smi nvlink --status)",
                name.c_str());
  int n = static_cast<int>(sys.gpus.size());
  if (n == 2 && links[0] > 0 && links[1] > 0) {
    addNvLink(&sys, {NodeKind::kGpu, 0}, {NodeKind::kGpu, 1}, std::min(links[0], links[1]));
    sys.notes.push_back(
        "nvlink --status does not name link peers: 2 GPUs, assumed linked to "
        "each other");
  } else if (n > 2) {
    NodeRef sw{};
    for (int i = 0; i < n; ++i) {
      if (links[i] == 0) continue;
      if (!sw.valid()) sw = addNvSwitch(&sys, NvSwitch{});
      addNvLink(&sys, {NodeKind::kGpu, i}, sw, links[i]);
    }
    if (sw.valid())
      sys.notes.push_back(
          "nvlink --status does not name link peers: links assumed to go to one "
          "NVSwitch");
  }
  for (int i = 0; i < n; ++i)
    if (links[i])
      sys.notes.push_back("GPU" + std::to_string(sys.gpus[i].dev) + ": " +
                          std::to_string(links[i]) + " active NVLinks at " +
                          std::to_string(static_cast<int>(gbs[i])) + " GB/s each (as reported)");
  if (inactive) sys.notes.push_back(std::to_string(inactive) + " inactive NVLink(s)");
  sys.notes.push_back("nvlink --status gives no PCI or NUMA placement");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

namespace {

LinkLayer layerOf(const std::string& s) {
  if (s.find("InfiniBand") != std::string::npos || s.find("Infiniband") != std::string::npos)
    return LinkLayer::kInfiniBand;
  if (s.find("Ethernet") != std::string::npos) return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

// "CA 'mlx5_0'" / "Infiniband device 'mlx5_0' port 1 status:" -> mlx5_0
std::string quotedName(const std::string& l) {
  size_t a = l.find('\''), b = l.find('\'', a + 1);
  if (a == std::string::npos || b == std::string::npos) return "";
  return l.substr(a + 1, b - a - 1);
}

int nicNamed(System* sys, std::map<std::string, int>* byName, const std::string& name) {
  auto it = byName->find(name);
  if (it != byName->end()) return it->second;
  Nic nic;
  int idx = addNic(sys, nic).index;
  (*byName)[name] = idx;
  return idx;
}

}  // namespace

braidResult_t loadIbstat(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadIbstat: out is null");
  System sys;
  sys.source = name;
  std::map<std::string, int> nics;
  std::string ca, nodeGuid, caType, fw;
  Net* net = nullptr;
  int lineNo = 0;
  std::vector<std::string> down;
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (startsWith(l, "CA '")) {
      ca = quotedName(l);
      if (ca.empty())
        return fail(braidInvalidArgument, "%s:%d: CA line without a quoted name", name.c_str(),
                    lineNo);
      nicNamed(&sys, &nics, ca);
      nodeGuid.clear(), caType.clear(), fw.clear();
      net = nullptr;
      continue;
    }
    size_t colon = l.find(':');
    bool indented = std::isspace(static_cast<unsigned char>(raw[0]));
    if (ca.empty() || colon == std::string::npos || !indented) {
      noteOnce(&sys, name + ":" + std::to_string(lineNo) +
                         ": not ibstat output, skipped: " + l.substr(0, 120));
      continue;
    }
    std::string k = trim(l.substr(0, colon)), v = trim(l.substr(colon + 1));
    if (startsWith(k, "Port ") && v.empty()) {
      long p = 0;
      if (!toLong(k.substr(5), 10, &p))
        return fail(braidInvalidArgument, "%s:%d: bad port number '%s'", name.c_str(), lineNo,
                    k.c_str());
      Net n;
      n.nic = nics[ca];
      n.name = ca;
      n.port = static_cast<int>(p);
      n.dev = static_cast<int>(sys.nets.size());
      n.guid = nodeGuid;
      if (!caType.empty()) n.extra.push_back({"ca_type", caType});
      if (!fw.empty()) n.extra.push_back({"fw_ver", fw});
      net = &sys.nets[addNet(&sys, n).index];
    } else if (k == "CA type") {
      caType = v;
    } else if (k == "Firmware version") {
      fw = v;
    } else if (k == "Node GUID") {
      nodeGuid = v;
    } else if (net != nullptr) {
      if (k == "State") {
        if (v != "Active") down.push_back(ca + " port " + std::to_string(net->port) + ": " + v);
      } else if (k == "Rate") {
        double r = 0;
        if (leadingDouble(v, &r)) net->speed_gbps = r;
      } else if (k == "Link layer") {
        net->link_layer = layerOf(v);
      } else if (k == "Port GUID") {
        net->extra.push_back({"port_guid", v});
        if (net->guid.empty()) net->guid = v;
      }
    }
  }
  if (sys.nics.empty())
    return fail(braidInvalidArgument, "%s: no \"CA '...'\" line (ibstat output)", name.c_str());
  for (const auto& d : down) sys.notes.push_back(d);
  sys.notes.push_back("ibstat gives no PCI or NUMA placement of the HCAs");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadIbstatus(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadIbstatus: out is null");
  System sys;
  sys.source = name;
  std::map<std::string, int> nics;
  Net* net = nullptr;
  int lineNo = 0;
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (startsWith(l, "Infiniband device '")) {
      std::string dev = quotedName(l);
      size_t p = l.find(" port ");
      long port = -1;
      if (dev.empty() || p == std::string::npos ||
          !toLong(words(l.substr(p + 6)).empty() ? "" : words(l.substr(p + 6))[0], 10, &port))
        return fail(braidInvalidArgument,
                    "%s:%d: expected \"Infiniband device 'NAME' port N "
                    "status:\"",
                    name.c_str(), lineNo);
      Net n;
      n.nic = nicNamed(&sys, &nics, dev);
      n.name = dev;
      n.port = static_cast<int>(port);
      n.dev = static_cast<int>(sys.nets.size());
      net = &sys.nets[addNet(&sys, n).index];
      continue;
    }
    size_t colon = l.find(':');
    if (net == nullptr || colon == std::string::npos) {
      noteOnce(&sys, name + ":" + std::to_string(lineNo) + ": not ibstatus output, skipped");
      continue;
    }
    std::string k = trim(l.substr(0, colon)), v = trim(l.substr(colon + 1));
    if (k == "rate") {
      double r = 0;
      if (leadingDouble(v, &r)) net->speed_gbps = r;
    } else if (k == "link_layer") {
      net->link_layer = layerOf(v);
    } else if (k == "state") {
      if (v.find("ACTIVE") == std::string::npos)
        sys.notes.push_back(net->name + " port " + std::to_string(net->port) + ": " + v);
    } else if (k == "default gid") {
      // fe80:0000:0000:0000:0015:5dff:fd34:11eb -> port GUID 0x00155dfffd3411eb
      std::string hex;
      for (char c : v)
        if (c != ':') hex += c;
      if (hex.size() == 32) net->guid = "0x" + hex.substr(16);
      net->extra.push_back({"gid", v});
    }
  }
  if (sys.nics.empty())
    return fail(braidInvalidArgument, "%s: no \"Infiniband device '...'\" line (ibstatus output)",
                name.c_str());
  sys.notes.push_back("ibstatus gives no PCI or NUMA placement of the HCAs");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
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
        return fail(braidInvalidArgument, "%s:%d: not an lspci device line: '%s'", name.c_str(),
                    lineNo, raw.substr(0, 80).c_str());
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

braidResult_t loadTextTopology(const std::string& text, const std::string& name, System* out) {
  std::string kind = sniffTextTopology(text);
  if (kind == "nvidia-smi-topo" || kind == "nvidia-smi-p2p")
    return loadNvidiaSmiTopo(text, name, out);
  if (kind == "nvlink-status") return loadNvidiaSmiNvlinkStatus(text, name, out);
  if (kind == "ibstat") return loadIbstat(text, name, out);
  if (kind == "ibstatus") return loadIbstatus(text, name, out);
  if (kind == "lspci") return loadLspci(text, name, out);
  if (kind == "lstopo") return loadLstopoText(text, name, out);
  return fail(braidInvalidArgument,
              "%s: not a known topology format (NCCL or hwloc XML, nvidia-smi topo -m / -p2p, "
              "nvidia-smi nvlink --status, ibstat, ibstatus, lspci, lstopo output)",
              name.c_str());
}

braidResult_t loadSysfsInfinibandDir(const std::string& dir, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadSysfsInfinibandDir: out is null");
  namespace fs = std::filesystem;
  std::error_code ec;
  bool looks = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (fs::is_directory(it->path() / "ports", ec)) looks = true;
  if (!looks)
    return fail(braidInvalidArgument,
                "%s: a directory, but not a /sys/class/infiniband snapshot (no DEV/ports/); "
                "topology files are NCCL or hwloc XML or tool output",
                dir.c_str());
  System sys;
  sys.source = dir;
  int count = 0;
  BRAID_TRY(detectIbFromSysfs(dir, &sys, &count));
  if (count == 0)
    return fail(braidInvalidArgument, "%s: no RDMA device with ports found", dir.c_str());
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo
