// nvidia-smi text into the model: `topo -m`, `topo -p2p r` and `nvlink --status`.

#include "topology/text_util.h"

namespace braid::topo {
using namespace text;  // NOLINT: the shared helpers of the text loaders

namespace {

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
  int later_matrix_line = 0;  // 1-based line of a second matrix's header, 0 when none
};

int smiClass(const std::string& c);
int nvCount(const std::string& c);
bool isP2pCell(const std::string& c);
bool knownSmiCell(const std::string& c) {
  return c == "X" || c == "N/A" || nvCount(c) > 0 || smiClass(c) >= 0 || isP2pCell(c);
}

bool isGpuName(const std::string& s) {
  // GPU0..GPU9999999: a longer index is no GPU (and would overflow atoi).
  return s.size() > 3 && s.size() <= 10 && startsWith(s, "GPU") &&
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
  if (h < 0) {
    size_t first = 0;
    while (first < ls.size() && trim(ls[first]).empty()) ++first;
    return fail(braidInvalidArgument,
                "%s:%zu: '%s': expected the header of an nvidia-smi matrix (column names GPU0 "
                "GPU1 ... as topo -m or topo -p2p print them)",
                name.c_str(), first + 1,
                first < ls.size() ? trim(ls[first]).substr(0, 120).c_str() : "");
  }
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
      const std::string& d = hw[i];
      // GPU and a number that no index has: refused, not taken for a NIC's column.
      if (startsWith(d, "GPU") && d.size() > 3 && !isGpuName(d) &&
          std::all_of(d.begin() + 3, d.end(),
                      [](char c) { return std::isdigit((unsigned char)c); }))
        return fail(braidInvalidArgument, "%s:%d: column %s: a GPU index of more than 7 digits",
                    name.c_str(), h + 1, d.c_str());
      if (std::find(m->dev.begin(), m->dev.end(), d) != m->dev.end())
        return fail(braidInvalidArgument,
                    "%s:%d: '%s': column %s given twice; expected each device's column once",
                    name.c_str(), h + 1, trim(ls[h]).substr(0, 120).c_str(), d.c_str());
      m->dev.push_back(d);
    }
  }
  if (m->dev.size() > static_cast<size_t>(kMaxTextDevices))
    return fail(braidInvalidArgument,
                "%s:%d: the header lists %zu devices, more than the %d a text topology may have",
                name.c_str(), h + 1, m->dev.size(), kMaxTextDevices);
  m->has_affinity = std::find(trailing.begin(), trailing.end(), 0) != trailing.end() ||
                    std::find(trailing.begin(), trailing.end(), 1) != trailing.end();
  size_t n = m->dev.size();
  m->cell.assign(n, std::vector<std::string>(n));
  m->cpu_aff.assign(n, "");
  m->numa_aff.assign(n, "");
  m->gpu_numa.assign(n, "");
  std::map<std::string, size_t> idx;
  for (size_t i = 0; i < n; ++i) idx[m->dev[i]] = i;
  std::vector<std::string> seen;      // devices whose row was read
  std::vector<size_t> rowLine(n, 0);  // 1-based line of each device's row, 0 when none
  // The rows follow the header up to the first line that is no row (a blank line, "Legend:",
  // a second matrix such as topo -p2p's); after them only the NIC legend is read.
  bool inRows = true;
  for (size_t li = h + 1; li < ls.size(); ++li) {
    auto w = words(ls[li]);
    if (w.empty()) {
      inRows = inRows && seen.empty();
      continue;
    }
    std::string first = w[0];
    auto it = idx.find(first);
    if (inRows && it == idx.end() && seen.empty())
      return fail(braidInvalidArgument,
                  "%s:%zu: '%s': expected the row of a device of the header at line %d (%s ...)",
                  name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), h + 1,
                  m->dev.empty() ? "GPU0" : m->dev[0].c_str());
    // A GPU's row (or a row of matrix cells) whose device the header does not list.
    if (inRows && it == idx.end() && (isGpuName(first) || (w.size() > 1 && knownSmiCell(w[1]))))
      return fail(braidInvalidArgument,
                  "%s:%zu: '%s': a row of %s, which the header at line %d does not list; "
                  "expected the row of a device of the header",
                  name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), first.c_str(), h + 1);
    if (!inRows || it == idx.end()) {
      inRows = false;
      // NIC legend "  NIC0: mlx5_0"; a second matrix (topo -p2p r after topo -m) is noted.
      if (first.size() > 1 && first.back() == ':' && w.size() >= 2 &&
          idx.count(first.substr(0, first.size() - 1)))
        m->legend[first.substr(0, first.size() - 1)] = w[1];
      else if (smiHeaderLine({ls[li]}) == 0)
        m->later_matrix_line =
            m->later_matrix_line ? m->later_matrix_line : static_cast<int>(li + 1);
      continue;
    }
    size_t r = it->second;
    if (rowLine[r])
      return fail(braidInvalidArgument,
                  "%s:%zu: '%s': a second row of %s (the first at line %zu); expected each "
                  "device's row once",
                  name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), first.c_str(),
                  rowLine[r]);
    rowLine[r] = li + 1;
    if (w.size() > n + 1 + trailing.size())
      return fail(braidInvalidArgument,
                  "%s:%zu: '%s': %zu cells after %s; expected at most %zu (the header's columns)",
                  name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), w.size() - 1,
                  first.c_str(), n + trailing.size());
    size_t k = 1;
    for (size_t c = 0; c < n; ++c, ++k) {
      if (k >= w.size()) break;
      if (!knownSmiCell(w[k]))
        return fail(braidInvalidArgument,
                    "%s:%zu: '%s': cell %zu (%s) is '%s', expected X, NV#, PIX, PXB, PHB, NODE, "
                    "SYS or a topo -p2p status (OK, NS, CNS, GNS, TNS, DR, U, NA)",
                    name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), c + 1,
                    m->dev[c].c_str(), w[k].c_str());
      if ((c == r) != (w[k] == "X"))
        return fail(braidInvalidArgument, "%s:%zu: '%s': cell %zu (%s) is '%s', expected %s",
                    name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), c + 1,
                    m->dev[c].c_str(), w[k].c_str(),
                    c == r ? "X (the device itself)" : "no X off the diagonal");
      // topo -m is symmetric: a path class or NV# that differs from the other row's is refused.
      const std::string& other = m->cell[c][r];
      auto isPath = [](const std::string& x) { return nvCount(x) > 0 || smiClass(x) >= 0; };
      if (c != r && !other.empty() && other != w[k] && (isPath(other) || isPath(w[k])))
        return fail(braidInvalidArgument,
                    "%s:%zu: '%s': cell %zu (%s) is '%s' but line %zu gives %s-%s as '%s'; "
                    "expected a symmetric matrix",
                    name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), c + 1,
                    m->dev[c].c_str(), w[k].c_str(), rowLine[c], m->dev[c].c_str(), first.c_str(),
                    other.c_str());
      m->cell[r][c] = w[k];
    }
    bool isGpuRow = isGpuName(first);
    // A GPU's row cut short would leave its links to be guessed: refuse (a NIC's is noted).
    if (w.size() < n + 1 && isGpuRow)
      return fail(braidInvalidArgument,
                  "%s:%zu: the row of %s ends after %zu of its %zu cells: truncated output",
                  name.c_str(), li + 1, first.c_str(), w.size() - 1, n);
    if (w.size() < n + 1) m->truncated_rows++;
    seen.push_back(first);
    for (size_t t = 0; t < trailing.size() && isGpuRow; ++t, ++k) {
      if (k >= w.size()) {
        m->truncated_rows++;
        break;
      }
      long v = 0;
      if (trailing[t] == 0 && w[k] != "N/A" && cpuListToMask(w[k]).empty())
        return fail(braidInvalidArgument,
                    "%s:%zu: '%s': CPU affinity '%s' of %s; expected a CPU list such as 0-7,16-23 "
                    "(ascending ranges of CPUs 0..8191) or N/A",
                    name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), w[k].c_str(),
                    first.c_str());
      if (trailing[t] == 1 && w[k] != "N/A" &&
          (!toLong(w[k], 10, &v) || v < 0 || v > kMaxTextNumaId))
        return fail(braidInvalidArgument,
                    "%s:%zu: '%s': NUMA affinity '%s' of %s; expected a NUMA node 0..%d or N/A",
                    name.c_str(), li + 1, trim(ls[li]).substr(0, 120).c_str(), w[k].c_str(),
                    first.c_str(), kMaxTextNumaId);
      if (trailing[t] == 0) m->cpu_aff[r] = w[k];
      if (trailing[t] == 1) m->numa_aff[r] = w[k];
      if (trailing[t] == 2) m->gpu_numa[r] = w[k];
    }
  }
  for (const std::string& d : m->dev)
    if (isGpuName(d) && std::find(seen.begin(), seen.end(), d) == seen.end())
      return fail(braidInvalidArgument,
                  "%s:%d: the header lists %s but no row for it follows: truncated output",
                  name.c_str(), h + 1, d.c_str());
  return braidSuccess;
}

// Path class of a topo -m cell, or -1 (X, NV#, unknown).
int smiClass(const std::string& c) {
  if (c == "PIX") return static_cast<int>(PathClass::kPix);
  if (c == "PXB") return static_cast<int>(PathClass::kPxb);
  if (c == "PHB") return static_cast<int>(PathClass::kPhb);
  if (c == "NODE") return static_cast<int>(PathClass::kNode);
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
      int c = smiClass(cellOf(i, j));
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
  // PCI switches from PIX (one switch) and PXB (switches under a common switch); host bridges
  // from PHB (one bridge) where NODE pairs say a NUMA node has several.
  UnionFind pix(n), pxb(n), phb(n);
  std::set<int> cpusWithNode;
  int sysSameNuma = 0;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      int c = smiClass(cellOf(i, j));
      if (c < 0) continue;
      if (cpuOfDev[i] != cpuOfDev[j]) continue;
      if (c == static_cast<int>(PathClass::kSys)) sysSameNuma++;
      if (c == static_cast<int>(PathClass::kNode)) cpusWithNode.insert(cpuOfDev[i]);
      if (c == static_cast<int>(PathClass::kPix)) pix.unite(i, j);
      if (c <= static_cast<int>(PathClass::kPxb)) pxb.unite(i, j);
      if (c <= static_cast<int>(PathClass::kPhb)) phb.unite(i, j);
    }
  std::vector<NodeRef> parent(n);
  int nextBus = 1, hostBridges = 0;
  auto newSwitch = [&](NodeRef up, uint32_t cls) {
    Pci p;
    p.pci.busid = virtualBusId(nextBus++);
    p.pci.class_code = cls;
    p.parent = up;
    return addPci(sys, p);
  };
  std::map<int, NodeRef> bridgeOf;  // phb root -> host bridge
  auto upstream = [&](int i) {
    NodeRef cpu{NodeKind::kCpu, cpuOfDev[i]};
    if (!cpusWithNode.count(cpuOfDev[i])) return cpu;
    auto it = bridgeOf.find(phb.find(i));
    if (it != bridgeOf.end()) return it->second;
    ++hostBridges;
    return bridgeOf[phb.find(i)] = newSwitch(cpu, 0x060000);
  };
  std::map<int, std::vector<int>> pxbGroups;
  for (int i = 0; i < n; ++i) pxbGroups[pxb.find(i)].push_back(i);
  for (auto& [root, members] : pxbGroups) {
    NodeRef cpu = upstream(members[0]);
    std::map<int, std::vector<int>> units;
    for (int i : members) units[pix.find(i)].push_back(i);
    if (units.size() == 1) {
      NodeRef up = members.size() > 1 ? newSwitch(cpu, 0x060400) : cpu;
      for (int i : members) parent[i] = up;
      continue;
    }
    NodeRef top = newSwitch(cpu, 0x060400);
    for (auto& [u, devs] : units) {
      NodeRef leaf = newSwitch(top, 0x060400);
      for (int i : devs) parent[i] = leaf;
    }
  }
  std::vector<NodeRef> ref(n);
  for (int i = 0; i < n; ++i) {
    if (!isGpu[i]) continue;
    Gpu g;
    g.parent = parent[i];
    g.dev = std::atoi(m.dev[i].c_str() + 3);
    g.pci.busid = gpuPlaceholderBusId(g.dev);
    ref[i] = addGpu(sys, g);
  }
  for (int i = 0; i < n; ++i) {
    if (isGpu[i]) continue;
    Nic nic;
    nic.parent = parent[i];
    nic.pci.busid = nicPlaceholderBusId(static_cast<int>(sys->nics.size()));
    nic.pci.class_code = 0x020000;
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
    sw.pci.busid = kNvSwitchPlaceholderBusId;
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
  if (hostBridges)
    sys->notes.push_back(std::to_string(hostBridges) +
                         " PCIe host bridge(s) inferred from NODE and PHB (placeholder bus ids)");
  if (!allSame && n > 0) {
    int nvPairs = 0;
    for (size_t a = 0; a < gpus.size(); ++a)
      for (size_t b = a + 1; b < gpus.size(); ++b) nvPairs += nvCount(cellOf(gpus[a], gpus[b])) > 0;
    if (nvPairs) sys->notes.push_back("NV# pairs hide their PCI relation: placed by NUMA only");
  } else if (allSame) {
    sys->notes.push_back("NV# pairs hide their PCI relation: placed by NUMA only");
  }
  if (sysSameNuma)
    sys->notes.push_back(std::to_string(sysSameNuma) +
                         " SYS pair(s) within one NUMA affinity: cannot be represented");
  if (m.truncated_rows)
    sys->notes.push_back(std::to_string(m.truncated_rows) + " truncated row(s) in " + name);
  if (m.later_matrix_line)
    sys->notes.push_back(name + ":" + std::to_string(m.later_matrix_line) +
                         ": a second matrix (topo -p2p) after the first: not read");
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
      int want = smiClass(cellOf(i, j));
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
  return c == "OK" || c == "NS" || c == "CNS" || c == "GNS" || c == "TNS" || c == "DR" ||
         c == "U" || c == "NA";
}

}  // namespace

const char* text::sniffNvidiaSmi(const std::vector<std::string>& ls, const std::string& l) {
  auto w = words(l);
  if (w.empty() || !(isGpuName(w[0]) || std::find(w.begin(), w.end(), "GPU0") != w.end()))
    return nullptr;
  if (l.find("Affinity") != std::string::npos) return "nvidia-smi-topo";
  // A header without affinity columns: topo -p2p when the cells say OK/NS.
  int h = smiHeaderLine(ls);
  if (h >= 0 && h + 1 < static_cast<int>(ls.size())) {
    auto r = words(ls[h + 1]);
    for (size_t i = 1; i < r.size(); ++i)
      if (isP2pCell(r[i])) return "nvidia-smi-p2p";
  }
  return "nvidia-smi-topo";
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
      pathCell |= nvCount(c) > 0 || smiClass(c) >= 0;
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
      g.pci.busid = gpuPlaceholderBusId(g.dev);
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
      g.pci.busid = gpuPlaceholderBusId(g.dev);
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
      if (!sw.valid()) {
        NvSwitch placeholder;
        placeholder.pci.busid = kNvSwitchPlaceholderBusId;
        sw = addNvSwitch(&sys, placeholder);
      }
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

}  // namespace braid::topo
