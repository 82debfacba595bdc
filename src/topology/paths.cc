// Path classes and bottleneck bandwidths between GPUs, NICs and CPUs; rings and the host tree.
//
// Paths follow NCCL's model (src/graph/paths.cc): among the paths with the fewest hops take the
// widest (largest bottleneck bandwidth); its class is the worst class of its hops, where an
// NVLink hop is NVL (NVB when it leaves an intermediate GPU), a PCIe hop between two PCI
// switches is PXB, a PCIe hop touching a CPU or a host bridge is PHB, except the hop from a
// host bridge up to its CPU, which is NODE (nvidia-smi's class for a path that crosses host
// bridges within one NUMA node; NCCL folds it into PHB), other PCIe hops PIX, and a CPU-to-CPU
// hop SYS. Traffic never relays through a NIC, relays through a GPU only NVLink to NVLink, and
// through an NVSwitch only NVLink to NVLink.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>

#include "topology/topology.h"

namespace braid::topo {
namespace {

struct Edge {
  NodeRef to;
  const Link* link;
};

bool isNvl(const Link* l) { return l->type == LinkType::kNvLink || l->type == LinkType::kXgmi; }

bool isHostBridge(const System& sys, NodeRef r) {
  return r.kind == NodeKind::kPci && sys.pcis[r.index].isHostBridge();
}

PathClass hopClass(const System& sys, NodeRef from, NodeRef to, const Link* l, NodeRef source) {
  switch (l->type) {
    case LinkType::kNvLink:
    case LinkType::kXgmi:
      return (from.kind == NodeKind::kGpu && from != source) ? PathClass::kNvb : PathClass::kNvl;
    case LinkType::kCpu:
      return PathClass::kSys;
    case LinkType::kNet:
      return PathClass::kNet;
    case LinkType::kPcie:
      if (from.kind == NodeKind::kCpu || to.kind == NodeKind::kCpu)
        return isHostBridge(sys, from) || isHostBridge(sys, to) ? PathClass::kNode
                                                                : PathClass::kPhb;
      if (isHostBridge(sys, from) || isHostBridge(sys, to)) return PathClass::kPhb;
      if (from.kind == NodeKind::kPci && to.kind == NodeKind::kPci) return PathClass::kPxb;
      return PathClass::kPix;
  }
  return PathClass::kSys;
}

class Graph {
 public:
  // NVSwitches of a host act as one (NCCL keeps a single NVS node): a GPU's links into any
  // of them add up to one edge.
  explicit Graph(const System& sys) : sys_(sys) {
    std::map<int, int> firstSwitch;  // host -> NVSwitch index standing for all of them
    for (int i = 0; i < static_cast<int>(sys.nvswitches.size()); ++i)
      firstSwitch.emplace(sys.nvswitches[i].host, i);
    auto canon = [&](NodeRef r) {
      if (r.kind == NodeKind::kNvSwitch) r.index = firstSwitch[sys.nvswitches[r.index].host];
      return r;
    };
    std::map<std::pair<NodeRef, NodeRef>, Link*> merged;
    for (const Link& l : sys.links) {
      Link c = l;
      c.a = canon(l.a);
      c.b = canon(l.b);
      if (c.a == c.b) continue;
      if (isNvl(&c) && (c.a.kind == NodeKind::kNvSwitch || c.b.kind == NodeKind::kNvSwitch)) {
        auto key = std::minmax(c.a, c.b);
        auto it = merged.find(key);
        if (it != merged.end()) {
          it->second->count += c.count;
          it->second->bw_gbs += c.bw_gbs;
          continue;
        }
        links_.push_back(c);
        merged[key] = &links_.back();
      } else {
        links_.push_back(c);
      }
    }
    for (const Link& l : links_) {
      adj_[l.a].push_back({l.b, &l});
      adj_[l.b].push_back({l.a, &l});
    }
  }

  // Best path from source to every node reachable from it.
  std::map<NodeRef, Path> from(NodeRef source) const {
    // State: node and whether it was entered over NVLink (relays through GPUs and NVSwitches
    // need NVLink on both sides).
    struct Best {
      int hops;
      double bw;
      PathClass cls;
    };
    auto better = [](const Best& a, const Best& b) {
      if (a.hops != b.hops) return a.hops < b.hops;
      if (a.bw != b.bw) return a.bw > b.bw;
      return a.cls < b.cls;
    };
    using State = std::pair<NodeRef, bool>;
    std::map<State, Best> best;
    std::vector<State> frontier{{source, false}};
    best[{source, false}] = {0, 1e30, PathClass::kLoc};
    // Level by level: every state of a level is final once the level is done.
    for (int hops = 0; !frontier.empty(); ++hops) {
      std::map<State, Best> next;
      for (const State& st : frontier) {
        const Best& cur = best[st];
        NodeRef u = st.first;
        bool relay = u != source;
        if (relay && (u.kind == NodeKind::kNic || u.kind == NodeKind::kNet)) continue;
        auto it = adj_.find(u);
        if (it == adj_.end()) continue;
        for (const Edge& e : it->second) {
          if (relay && (u.kind == NodeKind::kGpu || u.kind == NodeKind::kNvSwitch) &&
              !(st.second && isNvl(e.link)))
            continue;
          Best cand{hops + 1, std::min(cur.bw, e.link->bw_gbs),
                    std::max(cur.cls, hopClass(sys_, u, e.to, e.link, source))};
          State ns{e.to, isNvl(e.link)};
          if (best.count(ns)) continue;
          auto nx = next.find(ns);
          if (nx == next.end() || better(cand, nx->second)) next[ns] = cand;
        }
      }
      frontier.clear();
      for (const auto& [st, b] : next) {
        best[st] = b;
        frontier.push_back(st);
      }
    }
    std::map<NodeRef, Path> out;
    for (const auto& [st, b] : best) {
      Path p{b.cls, st.first == source ? 0 : b.bw, b.hops};
      auto it = out.find(st.first);
      if (it == out.end() || p.hops < it->second.hops ||
          (p.hops == it->second.hops && p.bw_gbs > it->second.bw_gbs))
        out[st.first] = p;
    }
    return out;
  }

 private:
  const System& sys_;
  std::deque<Link> links_;  // stable addresses for the edges
  std::map<NodeRef, std::vector<Edge>> adj_;
};

int hostOf(const System& sys, NodeRef r) {
  switch (r.kind) {
    case NodeKind::kCpu:
      return sys.cpus[r.index].host;
    case NodeKind::kGpu:
      return sys.gpus[r.index].host;
    case NodeKind::kNic:
      return sys.nics[r.index].host;
    case NodeKind::kNvSwitch:
      return sys.nvswitches[r.index].host;
    default:
      return 0;
  }
}

double nicBw(const System& sys, int nic) {
  double bw = 0;
  for (int n : sys.nics[nic].nets) bw += netBw(sys.nets[n].speed_gbps);
  return bw;
}

bool closer(const Path& a, const Path& b) {
  if (a.cls != b.cls) return a.cls < b.cls;
  return a.bw_gbs > b.bw_gbs;
}

}  // namespace

Paths computePaths(const System& sys) {
  Graph g(sys);
  int ng = static_cast<int>(sys.gpus.size()), nn = static_cast<int>(sys.nics.size());
  int nc = static_cast<int>(sys.cpus.size());
  Paths p;
  p.gpu_gpu.assign(ng, std::vector<Path>(ng));
  p.gpu_nic.assign(ng, std::vector<Path>(nn));
  p.cpu_nic.assign(nc, std::vector<Path>(nn));
  p.gpu_cpu.assign(ng, -1);
  p.gpu_numa.assign(ng, -1);
  p.nearest_nic.assign(ng, -1);
  auto lookup = [](const std::map<NodeRef, Path>& m, NodeRef r) {
    auto it = m.find(r);
    return it == m.end() ? Path{} : it->second;
  };
  for (int i = 0; i < ng; ++i) {
    NodeRef gi{NodeKind::kGpu, i};
    auto m = g.from(gi);
    for (int j = 0; j < ng; ++j) p.gpu_gpu[i][j] = lookup(m, {NodeKind::kGpu, j});
    for (int k = 0; k < nn; ++k) p.gpu_nic[i][k] = lookup(m, {NodeKind::kNic, k});
    NodeRef cpu = cpuOf(sys, gi);
    if (cpu.valid()) {
      p.gpu_cpu[i] = cpu.index;
      p.gpu_numa[i] = sys.cpus[cpu.index].numaid;
    }
    int best = -1;
    for (int k = 0; k < nn; ++k) {
      if (sys.nics[k].host != sys.gpus[i].host || p.gpu_nic[i][k].cls == PathClass::kDis) continue;
      if (best < 0 || closer(p.gpu_nic[i][k], p.gpu_nic[i][best])) best = k;
    }
    p.nearest_nic[i] = best;
  }
  for (int c = 0; c < nc; ++c) {
    auto m = g.from({NodeKind::kCpu, c});
    for (int k = 0; k < nn; ++k) p.cpu_nic[c][k] = lookup(m, {NodeKind::kNic, k});
  }
  // GPUs on different hosts meet over the network: the narrower of the two sides' NICs.
  for (int i = 0; i < ng; ++i) {
    for (int j = 0; j < ng; ++j) {
      if (hostOf(sys, {NodeKind::kGpu, i}) == hostOf(sys, {NodeKind::kGpu, j})) continue;
      double bw = 0;
      int a = p.nearest_nic[i], b = p.nearest_nic[j];
      if (a >= 0 && b >= 0)
        bw = std::min(
            {p.gpu_nic[i][a].bw_gbs, nicBw(sys, a), p.gpu_nic[j][b].bw_gbs, nicBw(sys, b)});
      p.gpu_gpu[i][j] = Path{PathClass::kNet, bw, 0};
    }
  }
  return p;
}

namespace {

// Position of every GPU in a depth-first walk of the PCIe tree (CPUs in order, children in
// source order): GPUs under one switch come out adjacent, then those of one NUMA node.
std::vector<int> treeOrder(const System& sys) {
  std::map<NodeRef, std::vector<std::pair<int, NodeRef>>> children;
  auto addChild = [&](NodeRef parent, int seq, NodeRef child) {
    children[parent].push_back({seq, child});
  };
  for (int i = 0; i < static_cast<int>(sys.pcis.size()); ++i)
    addChild(sys.pcis[i].parent, sys.pcis[i].seq, {NodeKind::kPci, i});
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
    addChild(sys.gpus[i].parent, sys.gpus[i].seq, {NodeKind::kGpu, i});
  for (auto& [k, v] : children) std::sort(v.begin(), v.end());
  std::vector<int> pos(sys.gpus.size(), -1);
  int next = 0;
  std::vector<NodeRef> stack;
  std::vector<std::pair<int, NodeRef>> roots;
  for (int i = 0; i < static_cast<int>(sys.cpus.size()); ++i)
    roots.push_back({sys.cpus[i].seq, {NodeKind::kCpu, i}});
  roots.push_back({-1, NodeRef{}});  // nodes without a parent
  std::sort(roots.begin(), roots.end());
  for (const auto& [seq, root] : roots) {
    stack.push_back(root);
    while (!stack.empty()) {
      NodeRef u = stack.back();
      stack.pop_back();
      if (u.kind == NodeKind::kGpu && pos[u.index] < 0) pos[u.index] = next++;
      auto it = children.find(u);
      if (it == children.end()) continue;
      for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) stack.push_back(c->second);
    }
  }
  for (int& p : pos)
    if (p < 0) p = next++;
  return pos;
}

// Searches for a Hamiltonian cycle over NVLink-class GPU pairs, trying the widest neighbours
// first; gives up after a bounded number of steps (rings of up to 16 GPUs finish quickly).
bool nvlinkCycle(const std::vector<int>& gpus, const std::vector<std::vector<Path>>& gg,
                 const std::vector<int>& pos, std::vector<int>* ring) {
  int n = static_cast<int>(gpus.size());
  auto linked = [&](int a, int b) { return gg[a][b].cls == PathClass::kNvl; };
  std::vector<int> order(gpus);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return pos[a] < pos[b]; });
  std::vector<int> path{order[0]};
  std::vector<bool> used(gg.size(), false);
  used[order[0]] = true;
  long budget = 200000;
  std::function<bool()> extend = [&]() -> bool {
    if (--budget < 0) return false;
    if (static_cast<int>(path.size()) == n) return n < 3 || linked(path.back(), path[0]);
    std::vector<int> cands;
    for (int g : order)
      if (!used[g] && linked(path.back(), g)) cands.push_back(g);
    std::stable_sort(cands.begin(), cands.end(), [&](int a, int b) {
      return gg[path.back()][a].bw_gbs > gg[path.back()][b].bw_gbs;
    });
    for (int c : cands) {
      used[c] = true;
      path.push_back(c);
      if (extend()) return true;
      path.pop_back();
      used[c] = false;
    }
    return false;
  };
  if (n == 1 || extend()) {
    *ring = path;
    return true;
  }
  return false;
}

}  // namespace

// NVLink peers of a GPU: other GPUs directly, and GPUs sharing an NVSwitch (count = the
// fewer of the two GPUs' links into the switches).
std::vector<std::pair<int, int>> nvlinkPeers(const System& sys, int gpu) {
  std::map<int, int> direct;
  std::map<int, int> toSwitch;  // nvswitch -> count, for every GPU
  std::map<int, std::map<int, int>> switchCounts;
  for (const Link& l : sys.links) {
    if (l.type != LinkType::kNvLink && l.type != LinkType::kXgmi) continue;
    if (l.a.kind == NodeKind::kGpu && l.b.kind == NodeKind::kGpu) {
      if (l.a.index == gpu) direct[l.b.index] += l.count;
      if (l.b.index == gpu) direct[l.a.index] += l.count;
    }
    NodeRef g = l.a.kind == NodeKind::kGpu ? l.a : l.b;
    NodeRef s = l.a.kind == NodeKind::kNvSwitch ? l.a : l.b;
    if (g.kind == NodeKind::kGpu && s.kind == NodeKind::kNvSwitch)
      switchCounts[g.index][s.index] += l.count;
  }
  auto mine = switchCounts.find(gpu);
  if (mine != switchCounts.end()) {
    int myTotal = 0;
    for (const auto& [s, c] : mine->second) myTotal += c;
    for (const auto& [other, counts] : switchCounts) {
      if (other == gpu) continue;
      int shared = 0, total = 0;
      for (const auto& [s, c] : counts) {
        total += c;
        if (mine->second.count(s)) shared += std::min(c, mine->second.at(s));
      }
      if (shared > 0) direct[other] += std::min({shared, total, myTotal});
    }
  }
  return {direct.begin(), direct.end()};
}

int nvlinkCount(const System& sys, int gpu_a, int gpu_b) {
  for (const auto& [peer, count] : nvlinkPeers(sys, gpu_a))
    if (peer == gpu_b) return count;
  return 0;
}

std::vector<std::vector<int>> buildRings(const System& sys, const Paths& paths) {
  std::vector<int> pos = treeOrder(sys);
  std::vector<std::vector<int>> rings;
  for (int h = 0; h < static_cast<int>(std::max<size_t>(sys.hosts.size(), 1)); ++h) {
    std::vector<int> gpus;
    for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
      if (sys.gpus[i].host == h) gpus.push_back(i);
    if (gpus.empty()) continue;
    std::vector<int> ring;
    if (!nvlinkCycle(gpus, paths.gpu_gpu, pos, &ring)) {
      ring = gpus;
      std::sort(ring.begin(), ring.end(), [&](int a, int b) { return pos[a] < pos[b]; });
    }
    rings.push_back(ring);
  }
  return rings;
}

std::vector<int> ringOrder(const System& sys, const std::vector<int>& gpuOfRank) {
  const int n = static_cast<int>(gpuOfRank.size());
  const int ng = static_cast<int>(sys.gpus.size());
  auto valid = [&](int g) { return g >= 0 && g < ng; };
  // The host: that of the first rank with a GPU of the model.
  int host = -1;
  for (int g : gpuOfRank)
    if (valid(g)) {
      host = sys.gpus[g].host;
      break;
    }
  // Position of each GPU in its host's model ring (ranks' GPUs on other hosts have none).
  std::vector<int> pos(ng, -1);
  if (host >= 0) {
    for (const auto& ring : buildRings(sys, computePaths(sys))) {
      if (ring.empty() || sys.gpus[ring[0]].host != host) continue;
      for (int i = 0; i < static_cast<int>(ring.size()); ++i) pos[ring[i]] = i;
    }
  }
  const int big = ng + 1;  // after every ring position
  auto key = [&](int r) {
    return valid(gpuOfRank[r]) && pos[gpuOfRank[r]] >= 0 ? pos[gpuOfRank[r]] : big;
  };
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  // A ring has no start: rotate so that rank 0 leads (among the ranks placed on the ring).
  auto zero = std::find(order.begin(), order.end(), 0);
  if (zero != order.end() && key(0) != big) {
    auto endRing = std::find_if(order.begin(), order.end(), [&](int r) { return key(r) == big; });
    std::rotate(order.begin(), zero, endRing);
  }
  return order;
}

HostTree buildHostTree(const System& sys, const Paths& paths) {
  HostTree t;
  int nh = static_cast<int>(std::max<size_t>(sys.hosts.size(), 1));
  t.parent.resize(nh);
  t.leader_gpu.assign(nh, -1);
  for (int h = 0; h < nh; ++h) t.parent[h] = h == 0 ? -1 : (h - 1) / 2;
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i) {
    int h = sys.gpus[i].host;
    if (h < 0 || h >= nh) continue;
    int& lead = t.leader_gpu[h];
    if (lead < 0) {
      lead = i;
      continue;
    }
    int a = paths.nearest_nic[i], b = paths.nearest_nic[lead];
    if (a >= 0 && (b < 0 || closer(paths.gpu_nic[i][a], paths.gpu_nic[lead][b]))) lead = i;
  }
  return t;
}

}  // namespace braid::topo
