// JSON and text views of a system: what braid-topo prints.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "topology/topology.h"

namespace braid::topo {
namespace {

std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

// A JSON number: JSON has no inf or nan, so those are written as null.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string nicName(const System& sys, int i) {
  const Nic& n = sys.nics[i];
  if (!n.nets.empty() && !sys.nets[n.nets[0]].name.empty()) return sys.nets[n.nets[0]].name;
  if (!n.pci.busid.empty()) return n.pci.busid;
  std::string s = "nic";
  s += std::to_string(i);
  return s;
}

double nicSpeed(const System& sys, int i) {
  double s = 0;
  for (int k : sys.nics[i].nets) s += sys.nets[k].speed_gbps;
  return s;
}

LinkLayer nicLayer(const System& sys, int i) {
  for (int k : sys.nics[i].nets)
    if (sys.nets[k].link_layer != LinkLayer::kUnknown) return sys.nets[k].link_layer;
  uint32_t cls = sys.nics[i].pci.class_code >> 8;
  if (cls == 0x0207) return LinkLayer::kInfiniBand;
  if (cls == 0x0200) return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

int numaOf(const System& sys, NodeRef r) {
  NodeRef c = cpuOf(sys, r);
  return c.valid() ? sys.cpus[c.index].numaid : -1;
}

std::string intArray(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// A graph file's RING channels where it has them (what NCCL was told to use), else the model's.
std::vector<std::vector<int>> modelRings(const System& sys, const Paths& paths) {
  auto rings = graphRings(sys);
  return rings.empty() ? buildRings(sys, paths) : rings;
}

}  // namespace

std::string toJson(const System& sys) {
  Paths paths = computePaths(sys);
  std::ostringstream o;
  o << "{\n  \"source\": " << jstr(sys.source) << ",\n";
  std::set<int> numas;
  for (const Cpu& c : sys.cpus) numas.insert(c.numaid);
  o << "  \"numa_nodes\": [";
  bool first = true;
  for (int n : numas) {
    o << (first ? "" : ", ") << n;
    first = false;
  }
  o << "],\n  \"gpus\": [";
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i) {
    const Gpu& g = sys.gpus[i];
    o << (i ? "," : "") << "\n    {\"index\": " << i << ", \"pci\": " << jstr(g.pci.busid)
      << ", \"dev\": " << g.dev << ", \"sm\": " << g.sm << ", \"numa\": " << paths.gpu_numa[i]
      << ", \"nearest_nic\": " << paths.nearest_nic[i] << ", \"nvlinks\": [";
    bool f = true;
    for (const auto& [peer, count] : nvlinkPeers(sys, i)) {
      o << (f ? "" : ", ") << "{\"peer\": " << peer << ", \"count\": " << count << "}";
      f = false;
    }
    o << "]}";
  }
  o << (sys.gpus.empty() ? "" : "\n  ") << "],\n  \"nics\": [";
  for (int i = 0; i < static_cast<int>(sys.nics.size()); ++i) {
    o << (i ? "," : "") << "\n    {\"index\": " << i << ", \"name\": " << jstr(nicName(sys, i))
      << ", \"pci\": " << jstr(sys.nics[i].pci.busid)
      << ", \"link_layer\": " << jstr(linkLayerName(nicLayer(sys, i)))
      << ", \"speed_gbps\": " << num(nicSpeed(sys, i))
      << ", \"numa\": " << numaOf(sys, {NodeKind::kNic, i}) << "}";
  }
  o << (sys.nics.empty() ? "" : "\n  ") << "],\n  \"paths\": {\n    \"gpu_gpu\": [";
  auto matrix = [&](const std::vector<std::vector<Path>>& m) {
    for (size_t i = 0; i < m.size(); ++i) {
      o << (i ? "," : "") << "\n      [";
      for (size_t j = 0; j < m[i].size(); ++j)
        o << (j ? ", " : "") << "\"" << pathClassName(m[i][j].cls) << "\"";
      o << "]";
    }
    o << (m.empty() ? "" : "\n    ");
  };
  matrix(paths.gpu_gpu);
  o << "],\n    \"gpu_nic\": [";
  matrix(paths.gpu_nic);
  o << "]\n  },\n  \"rings\": [";
  auto rings = modelRings(sys, paths);
  for (size_t r = 0; r < rings.size(); ++r) o << (r ? ", " : "") << intArray(rings[r]);
  o << "],\n  \"trees\": [";
  HostTree tree = buildHostTree(sys, paths);
  for (size_t h = 0; h < tree.parent.size(); ++h)
    o << (h ? "," : "") << "\n    {\"host\": " << h << ", \"parent\": " << tree.parent[h]
      << ", \"leader_gpu\": " << (h < tree.leader_gpu.size() ? tree.leader_gpu[h] : -1) << "}";
  o << (tree.parent.empty() ? "" : "\n  ") << "],\n";
  if (!sys.graphs.empty()) {
    o << "  \"graphs\": [";
    for (size_t i = 0; i < sys.graphs.size(); ++i) {
      const NcclGraph& g = sys.graphs[i];
      o << (i ? "," : "") << "\n    {\"id\": " << g.id << ", \"pattern\": " << g.pattern
        << ", \"pattern_name\": " << jstr(graphPatternName(g.pattern))
        << ", \"nchannels\": " << g.nchannels << ", \"speedintra\": " << num(g.speedintra)
        << ", \"speedinter\": " << num(g.speedinter) << ", \"typeintra\": " << jstr(g.typeintra)
        << ", \"typeinter\": " << jstr(g.typeinter)
        << ", \"crossnic\": " << (g.crossnic ? "true" : "false") << ", \"channels\": [";
      for (size_t c = 0; c < g.channels.size(); ++c)
        o << (c ? ", " : "") << "{\"gpus\": " << intArray(g.channels[c].gpus)
          << ", \"nets\": " << intArray(g.channels[c].nets) << "}";
      o << "]}";
    }
    o << "\n  ],\n";
  }
  o << "  \"notes\": [";
  for (size_t i = 0; i < sys.notes.size(); ++i)
    o << (i ? "," : "") << "\n    " << jstr(sys.notes[i]);
  o << (sys.notes.empty() ? "" : "\n  ") << "]\n}\n";
  return o.str();
}

std::string toText(const System& sys) {
  Paths paths = computePaths(sys);
  std::ostringstream o;
  o << "System from " << sys.source << ": " << sys.cpus.size() << " NUMA node(s), "
    << sys.gpus.size() << " GPU(s), " << sys.nvswitches.size() << " NVSwitch(es), "
    << sys.nics.size() << " NIC(s)\n";
  std::map<NodeRef, std::vector<std::pair<int, NodeRef>>> kids;
  for (int i = 0; i < static_cast<int>(sys.pcis.size()); ++i)
    kids[sys.pcis[i].parent].push_back({sys.pcis[i].seq, {NodeKind::kPci, i}});
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
    kids[sys.gpus[i].parent].push_back({sys.gpus[i].seq, {NodeKind::kGpu, i}});
  for (int i = 0; i < static_cast<int>(sys.nvswitches.size()); ++i)
    kids[sys.nvswitches[i].parent].push_back({sys.nvswitches[i].seq, {NodeKind::kNvSwitch, i}});
  for (int i = 0; i < static_cast<int>(sys.nics.size()); ++i)
    kids[sys.nics[i].parent].push_back({sys.nics[i].seq, {NodeKind::kNic, i}});
  for (auto& [k, v] : kids) std::sort(v.begin(), v.end());
  auto link = [](const PciInfo& p) {
    std::string s;
    // A link the source names, even with both halves unknown (link_speed="" link_width="0").
    if (p.link_speed_gts > 0 || p.link_width > 0 || p.has_link_speed || p.has_link_width) {
      // An unknown half (0) prints as "?" with what pcieBw rates it as, not as gen0 or x0.
      char gen[32], width[32], buf[96];
      if (p.link_speed_gts > 0)
        std::snprintf(gen, sizeof(gen), "gen%d", pcieGeneration(p.link_speed_gts));
      else
        std::snprintf(gen, sizeof(gen), "gen? (rated gen%d)", kUnknownPcieGenAs);
      if (p.link_width > 0)
        std::snprintf(width, sizeof(width), "x%d", p.link_width);
      else
        std::snprintf(width, sizeof(width), "x? (rated x%d)", kUnknownPcieWidthAs);
      std::snprintf(buf, sizeof(buf), " [PCIe %s %s, %g GB/s]", gen, width,
                    pcieBw(p.link_speed_gts, p.link_width));
      s = buf;
    }
    return s;
  };
  std::function<void(NodeRef, int)> walk = [&](NodeRef parent, int depth) {
    auto it = kids.find(parent);
    if (it == kids.end()) return;
    for (const auto& [seq, r] : it->second) {
      std::string ind(depth * 2, ' ');
      switch (r.kind) {
        case NodeKind::kPci: {
          const Pci& p = sys.pcis[r.index];
          char cls[16];
          std::snprintf(cls, sizeof(cls), "%06x", p.pci.class_code);
          o << ind << (p.isBridge() || kids.count(r) ? "PCI switch " : "PCI device ") << p.pci.busid
            << " class " << cls << link(p.pci) << "\n";
          break;
        }
        case NodeKind::kGpu: {
          const Gpu& g = sys.gpus[r.index];
          o << ind << "GPU" << r.index << " " << g.pci.busid;
          if (g.dev >= 0) o << " dev " << g.dev;
          if (g.sm >= 0) o << " sm " << g.sm;
          if (!g.model.empty()) o << " " << g.model;
          o << link(g.pci) << "\n";
          break;
        }
        case NodeKind::kNvSwitch:
          o << ind << "NVSwitch " << sys.nvswitches[r.index].pci.busid << "\n";
          break;
        case NodeKind::kNic: {
          o << ind << "NIC" << r.index << " " << nicName(sys, r.index);
          if (!sys.nics[r.index].pci.busid.empty()) o << " " << sys.nics[r.index].pci.busid;
          o << " " << linkLayerName(nicLayer(sys, r.index));
          for (int ni : sys.nics[r.index].nets)
            for (const auto& kv : sys.nets[ni].extra)
              if (kv.first == "driver") o << " (" << kv.second << ")";
          if (nicSpeed(sys, r.index) > 0)
            o << " " << nicSpeed(sys, r.index) << " Gb/s";
          else
            o << " speed unknown";
          o << link(sys.nics[r.index].pci) << "\n";
          break;
        }
        default:
          break;
      }
      walk(r, depth + 1);
    }
  };
  for (int i = 0; i < static_cast<int>(sys.cpus.size()); ++i) {
    const Cpu& c = sys.cpus[i];
    o << "NUMA " << c.numaid << " " << c.vendor << " " << c.arch;
    if (c.family >= 0) o << " family " << c.family << " model " << c.model;
    if (!c.affinity.empty()) o << " affinity " << c.affinity;
    o << "\n";
    walk({NodeKind::kCpu, i}, 1);
  }
  int ns = 0;
  for (const NvSwitch& s : sys.nvswitches)
    if (!s.parent.valid()) ++ns;
  if (ns) o << "NVSwitches known only from NVLinks: " << ns << "\n";
  // nvidia-smi topo -m style matrix: rows GPUs, columns GPUs then NICs.
  if (!sys.gpus.empty()) {
    o << "\n      ";
    for (size_t j = 0; j < sys.gpus.size(); ++j) o << "GPU" << j << (j < 10 ? "  " : " ");
    for (size_t k = 0; k < sys.nics.size(); ++k) o << "NIC" << k << (k < 10 ? "  " : " ");
    o << "NUMA\n";
    for (size_t i = 0; i < sys.gpus.size(); ++i) {
      char head[32];
      std::snprintf(head, sizeof(head), "GPU%-3zu", i);
      o << head;
      auto cell = [&](const Path& p, int count) {
        char buf[16];
        if (p.cls == PathClass::kLoc)
          std::snprintf(buf, sizeof(buf), "%-6s", "X");
        else if (p.cls == PathClass::kNvl && count > 0)
          std::snprintf(buf, sizeof(buf), "NV%-4d", count);
        else
          std::snprintf(buf, sizeof(buf), "%-6s", pathClassName(p.cls));
        o << buf;
      };
      auto peers = nvlinkPeers(sys, static_cast<int>(i));
      for (size_t j = 0; j < sys.gpus.size(); ++j) {
        int count = 0;
        for (const auto& [p, c] : peers)
          if (p == static_cast<int>(j)) count = c;
        cell(paths.gpu_gpu[i][j], count);
      }
      for (size_t k = 0; k < sys.nics.size(); ++k) cell(paths.gpu_nic[i][k], 0);
      o << paths.gpu_numa[i] << "\n";
    }
    o << "\nLegend: X self, NV# NVLinks, NVB NVLink via a GPU, PIX one PCIe switch, PXB several "
         "PCIe switches, PHB a CPU host bridge, NODE across host bridges of one NUMA node, SYS "
         "across "
         "NUMA nodes, NET over the network\n";
    for (const auto& r : modelRings(sys, paths)) {
      o << "Ring:";
      for (int g : r) o << " " << g;
      o << "\n";
    }
    HostTree tree = buildHostTree(sys, paths);
    o << "Trees (hosts in a binary tree, each entering through its leader GPU):\n";
    for (size_t h = 0; h < tree.parent.size(); ++h) {
      o << "  host " << h << ": ";
      if (tree.parent[h] < 0)
        o << "root";
      else
        o << "parent host " << tree.parent[h];
      int leader = h < tree.leader_gpu.size() ? tree.leader_gpu[h] : -1;
      if (leader >= 0)
        o << ", leader GPU" << leader << "\n";
      else
        o << ", no GPU\n";
    }
  }
  if (!sys.graphs.empty()) {
    o << "\nNCCL graphs (GPUs and nets by device index):\n";
    for (const NcclGraph& g : sys.graphs) {
      o << "  graph " << g.id << " " << graphPatternName(g.pattern) << " (pattern " << g.pattern
        << "): " << g.channels.size() << " channel(s), speed intra " << num(g.speedintra)
        << " inter " << num(g.speedinter) << " GB/s, type intra " << g.typeintra << " inter "
        << g.typeinter << (g.crossnic ? ", crossnic" : "") << "\n";
      for (size_t c = 0; c < g.channels.size(); ++c) {
        o << "    channel " << c << ": GPU";
        for (int d : g.channels[c].gpus) o << " " << d;
        if (!g.channels[c].nets.empty()) {
          o << "; net";
          for (int d : g.channels[c].nets) o << " " << d;
        }
        o << "\n";
      }
    }
  }
  for (const std::string& n : sys.notes) o << "note: " << n << "\n";
  return o.str();
}

}  // namespace braid::topo
