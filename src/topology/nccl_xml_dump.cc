// NCCL topology XML written from the system model (dumpNcclTopoXml: BRAID_TOPO_DUMP_FILE /
// NCCL_TOPO_DUMP_FILE, braid-topo's dump): one <cpu> per NUMA node holding its tree of <pci>
// elements, with the GPUs (and their <nvlink>s), NVSwitches and NICs (and their <net> ports) in
// it, in the model's order, so that loadNcclTopoXml (nccl_xml.cc) reads back the same model.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "topology/nccl_pci_class.h"
#include "topology/topology.h"

namespace braid::topo {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string hex(int v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, v);
  return buf;
}

class Dumper {
 public:
  explicit Dumper(const System& sys) : sys_(sys) {
    auto add = [&](NodeRef parent, int seq, NodeRef child) {
      children_[parent].push_back({seq, child});
    };
    for (int i = 0; i < static_cast<int>(sys.pcis.size()); ++i)
      add(sys.pcis[i].parent, sys.pcis[i].seq, {NodeKind::kPci, i});
    for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
      add(sys.gpus[i].parent, sys.gpus[i].seq, {NodeKind::kGpu, i});
    for (int i = 0; i < static_cast<int>(sys.nvswitches.size()); ++i)
      if (sys.nvswitches[i].parent.valid())
        add(sys.nvswitches[i].parent, sys.nvswitches[i].seq, {NodeKind::kNvSwitch, i});
    for (int i = 0; i < static_cast<int>(sys.nics.size()); ++i)
      add(sys.nics[i].parent, sys.nics[i].seq, {NodeKind::kNic, i});
    for (auto& [k, v] : children_) std::sort(v.begin(), v.end());
  }

  std::string run() {
    out_ << "<system version=\"" << sys_.version << "\">\n";
    std::vector<int> cpus(sys_.cpus.size());
    for (int i = 0; i < static_cast<int>(cpus.size()); ++i) cpus[i] = i;
    std::sort(cpus.begin(), cpus.end(),
              [&](int a, int b) { return sys_.cpus[a].seq < sys_.cpus[b].seq; });
    for (int i : cpus) {
      const Cpu& c = sys_.cpus[i];
      out_ << "  <cpu";
      if (c.numaid >= 0 || c.numaid < -1) out_ << " numaid=\"" << c.numaid << "\"";
      if (!c.affinity.empty()) out_ << " affinity=\"" << esc(c.affinity) << "\"";
      if (!c.arch.empty()) out_ << " arch=\"" << esc(c.arch) << "\"";
      if (!c.vendor.empty()) out_ << " vendor=\"" << esc(c.vendor) << "\"";
      if (c.family != -1) out_ << " familyid=\"" << c.family << "\"";
      if (c.model != -1) out_ << " modelid=\"" << c.model << "\"";
      if (c.package != -1) out_ << " package=\"" << c.package << "\"";
      extra(c.extra);
      out_ << ">\n";
      kids({NodeKind::kCpu, i}, 2);
      out_ << "  </cpu>\n";
    }
    out_ << "</system>\n";
    return out_.str();
  }

 private:
  void extra(const ExtraAttrs& attrs) {
    for (const auto& [k, v] : attrs) out_ << " " << k << "=\"" << esc(v) << "\"";
  }
  void pciOpen(const PciInfo& p, const ExtraAttrs& ex, int depth) {
    out_ << std::string(depth * 2, ' ') << "<pci busid=\"" << p.busid << "\"";
    if (p.class_code != 0) out_ << " class=\"" << hex(p.class_code, 6) << "\"";
    if (p.vendor != -1) out_ << " vendor=\"" << hex(p.vendor, 4) << "\"";
    if (p.device != -1) out_ << " device=\"" << hex(p.device, 4) << "\"";
    if (p.subsystem_vendor != -1)
      out_ << " subsystem_vendor=\"" << hex(p.subsystem_vendor, 4) << "\"";
    if (p.subsystem_device != -1)
      out_ << " subsystem_device=\"" << hex(p.subsystem_device, 4) << "\"";
    if (p.has_link_speed || p.link_speed_gts > 0) {
      std::string text = p.link_speed_text;
      if (text.empty() && p.link_speed_gts > 0) {
        std::ostringstream s;
        s << p.link_speed_gts << " GT/s";
        text = s.str();
      }
      out_ << " link_speed=\"" << esc(text) << "\"";
    }
    if (p.has_link_width || p.link_width > 0) out_ << " link_width=\"" << p.link_width << "\"";
    extra(ex);
  }
  void kids(NodeRef parent, int depth) {
    auto it = children_.find(parent);
    if (it == children_.end()) return;
    std::string ind(depth * 2, ' ');
    for (const auto& [seq, child] : it->second) {
      switch (child.kind) {
        case NodeKind::kPci: {
          const Pci& p = sys_.pcis[child.index];
          pciOpen(p.pci, p.extra, depth);
          if (children_.count(child)) {
            out_ << ">\n";
            kids(child, depth + 1);
            out_ << ind << "</pci>\n";
          } else {
            out_ << "/>\n";
          }
          break;
        }
        case NodeKind::kNvSwitch: {
          pciOpen(sys_.nvswitches[child.index].pci, {}, depth);
          out_ << "/>\n";
          break;
        }
        case NodeKind::kGpu:
          gpu(child.index, depth);
          break;
        case NodeKind::kNic:
          nic(child.index, depth);
          break;
        default:
          break;
      }
    }
  }
  void gpu(int i, int depth) {
    const Gpu& g = sys_.gpus[i];
    NodeRef self{NodeKind::kGpu, i};
    std::vector<const Link*> links;
    for (const Link& l : sys_.links)
      if ((l.type == LinkType::kNvLink || l.type == LinkType::kXgmi) &&
          (l.a == self || l.b == self))
        links.push_back(&l);
    // A bare <pci> leaf reads back as a GPU only by its class.
    bool bare = g.dev == -1 && g.sm == -1 && g.rank == -1 && g.gdr == -1 && g.model.empty() &&
                g.extra.empty() && links.empty() && (g.pci.class_code >> 16) == 0x03;
    bool wrap = !g.pci.busid.empty();
    std::string ind(depth * 2, ' ');
    if (wrap) {
      pciOpen(g.pci, g.pci_extra, depth);
      if (bare) {
        out_ << "/>\n";
        return;
      }
      out_ << ">\n";
      ind += "  ";
    }
    out_ << ind << "<gpu";
    if (g.dev != -1) out_ << " dev=\"" << g.dev << "\"";
    if (g.sm != -1) out_ << " sm=\"" << g.sm << "\"";
    if (g.rank != -1) out_ << " rank=\"" << g.rank << "\"";
    if (g.gdr != -1) out_ << " gdr=\"" << g.gdr << "\"";
    if (!g.model.empty()) out_ << " model=\"" << esc(g.model) << "\"";
    extra(g.extra);
    if (links.empty()) {
      out_ << "/>\n";
    } else {
      out_ << ">\n";
      for (const Link* l : links) nvlink(*l, self, ind + "  ");
      out_ << ind << "</gpu>\n";
    }
    if (wrap) out_ << std::string(depth * 2, ' ') << "</pci>\n";
  }
  void nvlink(const Link& l, NodeRef self, const std::string& ind) {
    NodeRef peer = l.a == self ? l.b : l.a;
    std::string busid;
    uint32_t tclass = 0x030200;
    if (peer.kind == NodeKind::kGpu) {
      busid = sys_.gpus[peer.index].pci.busid;
      if (sys_.gpus[peer.index].pci.class_code) tclass = sys_.gpus[peer.index].pci.class_code;
    } else if (peer.kind == NodeKind::kNvSwitch) {
      busid = sys_.nvswitches[peer.index].pci.busid;
      tclass = sys_.nvswitches[peer.index].pci.class_code;
      if (tclass == 0) tclass = kClassNvSwitch;
    } else if (peer.kind == NodeKind::kCpu) {
      // NCCL names the CPU end of a POWER9 NVLink by a bridge class; the bus id is unused.
      busid = "ffff:ff:1f.7";
      tclass = 0x060400;
    }
    // A GPU without a bus id (a <gpu> outside a <pci>) cannot be a target: the link is written
    // from its own end, which names this one (a dump must load back; fuzz_topo_xml found
    // target="" written for it). Between two such GPUs the file format has no way to say it.
    if (busid.empty()) return;
    out_ << ind << "<" << (l.type == LinkType::kXgmi ? "xgmi" : "nvlink") << " target=\"" << busid
         << "\" count=\"" << l.count << "\" tclass=\"" << hex(tclass, 6) << "\"/>\n";
  }
  void nic(int i, int depth) {
    const Nic& n = sys_.nics[i];
    std::string ind(depth * 2, ' ');
    bool wrap = !n.pci.busid.empty();
    if (wrap) {
      pciOpen(n.pci, n.pci_extra, depth);
      if (n.nets.empty() && (n.pci.class_code >> 16) == 0x02) {
        out_ << "/>\n";
        return;
      }
      out_ << ">\n";
      ind += "  ";
    }
    out_ << ind << "<nic>\n";
    for (int k : n.nets) {
      const Net& net = sys_.nets[k];
      out_ << ind << "  <net";
      if (!net.name.empty()) out_ << " name=\"" << esc(net.name) << "\"";
      if (net.dev != -1) out_ << " dev=\"" << net.dev << "\"";
      if (net.speed_gbps > 0) out_ << " speed=\"" << net.speed_gbps * 1000 << "\"";
      if (net.port != -1) out_ << " port=\"" << net.port << "\"";
      if (net.has_latency) out_ << " latency=\"" << net.latency_us << "\"";
      if (!net.guid.empty()) out_ << " guid=\"" << esc(net.guid) << "\"";
      if (net.maxconn != -1) out_ << " maxconn=\"" << net.maxconn << "\"";
      if (net.gdr != -1) out_ << " gdr=\"" << net.gdr << "\"";
      if (guessLinkLayer(n.pci.class_code, net.name) != net.link_layer)
        out_ << " link_layer=\"" << linkLayerName(net.link_layer) << "\"";
      extra(net.extra);
      out_ << "/>\n";
    }
    out_ << ind << "</nic>\n";
    if (wrap) out_ << std::string(depth * 2, ' ') << "</pci>\n";
  }

  const System& sys_;
  std::map<NodeRef, std::vector<std::pair<int, NodeRef>>> children_;
  std::ostringstream out_;
};

}  // namespace

braidResult_t dumpNcclTopoXml(const System& sys, std::string* xml) {
  if (xml == nullptr) return fail(braidInvalidArgument, "dumpNcclTopoXml: xml is null");
  if (!sys.graphs.empty())
    return fail(braidInvalidUsage,
                "dumpNcclTopoXml: %s is an NCCL graph file, which names GPUs and NICs only by "
                "device index; NCCL topology XML needs their PCI placement, so none is written",
                sys.source.c_str());
  for (const Cpu& c : sys.cpus)
    if (c.host != 0)
      return fail(braidInvalidUsage,
                  "dumpNcclTopoXml: NCCL topology XML describes one host; this system has %zu",
                  sys.hosts.size());
  *xml = Dumper(sys).run();
  return braidSuccess;
}

}  // namespace braid::topo
