// NCCL topology XML (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE) to and from the system model.
//
// The format (NCCL src/graph/xml.cc): <system version> holds <cpu> elements (one per NUMA
// node), which hold a tree of <pci> elements; a <pci> holding <gpu> is a GPU (its <nvlink>
// children name peers by bus id and class), one holding <nic> is a NIC with <net> ports. Files
// written by hand leave out most attributes, list devices as bare <pci> leaves with only a
// class, or point NVLinks at the GPU itself; those are read with a note, anything the model
// cannot place is refused with the file, line and problem.
#include <sys/stat.h>
#include <tinyxml2.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "topology/topology.h"
#include "topology/xml_util.h"

namespace braid::topo {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

constexpr uint32_t kClassNvSwitch = 0x068000;

LinkLayer guessLinkLayer(uint32_t cls, const std::string& name) {
  // NCCL XML has no link-layer attribute: the PCI class says it (0x0207 InfiniBand, 0x0200
  // Ethernet, RoCE included), else the interface name.
  if ((cls >> 8) == 0x0207) return LinkLayer::kInfiniBand;
  if ((cls >> 8) == 0x0200) return LinkLayer::kEthernet;
  if (name.rfind("eth", 0) == 0 || name.rfind("en", 0) == 0 || name.rfind("bond", 0) == 0 ||
      name.rfind("mlx5_bond", 0) == 0)
    return LinkLayer::kEthernet;
  if (name.rfind("ib", 0) == 0) return LinkLayer::kInfiniBand;
  return LinkLayer::kUnknown;
}

LinkLayer parseLinkLayer(const std::string& s) {
  if (s == "InfiniBand") return LinkLayer::kInfiniBand;
  if (s == "Ethernet") return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

struct PendingLink {
  int gpu;
  std::string target;
  int count;
  long tclass;  // -1 when absent
  int line;
  LinkType type;
};

class Loader : XmlFileErrors {
 public:
  Loader(const std::string& name, System* sys) : XmlFileErrors(name), sys_(sys) {}

  braidResult_t load(const std::string& text) {
    XMLDocument doc;
    doc.Parse(text.data(), text.size());
    if (blankText(text)) return fail(braidInvalidArgument, "%s: empty file", name_.c_str());
    if (doc.Error()) return err(doc.ErrorLineNum(), "malformed XML: %s", xmlErrorText(doc).c_str());
    XMLElement* root = doc.RootElement();
    if (root == nullptr) return err(1, "no root element (empty file?)");
    std::string rootName = root->Name();
    if (rootName == "graphs" || rootName == "graph")
      return err(root->GetLineNum(),
                 "<%s> is an NCCL graph file (NCCL_GRAPH_FILE), not a topology file "
                 "(NCCL_TOPO_FILE, root <system>): load it with loadNcclGraphXml or "
                 "loadTopologyFile",
                 rootName.c_str());
    if (rootName == "topology")
      return err(root->GetLineNum(),
                 "<topology> is hwloc XML, not NCCL topology XML: load it with "
                 "loadHwlocXml or loadTopologyFile");
    if (rootName != "system")
      return err(root->GetLineNum(), "unknown root element <%s>: expected <system>",
                 rootName.c_str());
    if (const char* v = root->Attribute("version")) {
      long ver;
      if (!parseLong(v, 10, &ver))
        return err(root->GetLineNum(), "<system> version=\"%s\" is not a number", v);
      sys_->version = static_cast<int>(ver);
    }
    for (const tinyxml2::XMLAttribute* a = root->FirstAttribute(); a; a = a->Next())
      if (std::strcmp(a->Name(), "version") != 0) system_extra_.push_back({a->Name(), a->Value()});
    if (!system_extra_.empty())
      note(root->GetLineNum(), "<system> attributes other than version are not kept");
    for (XMLElement* e = root->FirstChildElement(); e; e = e->NextSiblingElement()) {
      if (std::strcmp(e->Name(), "cpu") != 0) return unknown(e, "<system>");
      BRAID_TRY(loadCpu(e));
    }
    BRAID_TRY(resolveLinks());
    finishNotes();
    connectSystem(sys_);
    return braidSuccess;
  }

 private:
  // The same quirk on many elements makes one note with a count.
  void note(int line, const std::string& what) {
    auto it = noteIndex_.find(what);
    if (it != noteIndex_.end()) {
      ++it->second.second;
      return;
    }
    noteIndex_[what] = {static_cast<int>(sys_->notes.size()), 0};
    sys_->notes.push_back(name_ + ":" + std::to_string(line) + ": " + what);
  }
  void finishNotes() {
    for (const auto& [what, at] : noteIndex_)
      if (at.second > 0)
        sys_->notes[at.first] += " (and " + std::to_string(at.second) + " more like it)";
  }

  braidResult_t intAttr(XMLElement* e, const char* attr, int base, int* out) {
    const char* v = e->Attribute(attr);
    if (v == nullptr) return braidSuccess;
    long x;
    if (!parseLong(v, base, &x) || x < -2147483647L || x > 2147483647L)
      return err(e->GetLineNum(), "<%s> %s=\"%s\" is not a number", e->Name(), attr, v);
    *out = static_cast<int>(x);
    return braidSuccess;
  }

  braidResult_t loadCpu(XMLElement* e) {
    Cpu cpu;
    ExtraAttrs extra;
    for (const tinyxml2::XMLAttribute* a = e->FirstAttribute(); a; a = a->Next()) {
      std::string n = a->Name();
      if (n == "numaid" || n == "familyid" || n == "modelid" || n == "package") continue;
      if (n == "affinity")
        cpu.affinity = a->Value();
      else if (n == "arch")
        cpu.arch = a->Value();
      else if (n == "vendor")
        cpu.vendor = a->Value();
      else
        extra.push_back({n, a->Value()});
    }
    cpu.extra = extra;
    BRAID_TRY(intAttr(e, "numaid", 10, &cpu.numaid));
    BRAID_TRY(intAttr(e, "familyid", 10, &cpu.family));
    BRAID_TRY(intAttr(e, "modelid", 10, &cpu.model));
    BRAID_TRY(intAttr(e, "package", 10, &cpu.package));  // Braid's; NCCL ignores it
    if (!e->Attribute("numaid")) note(e->GetLineNum(), "<cpu> without numaid");
    NodeRef ref = addCpu(sys_, cpu);
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      std::string n = c->Name();
      if (n == "pci") {
        BRAID_TRY(loadPci(c, ref));
      } else if (n == "nic") {
        Nic nic;
        nic.parent = ref;
        BRAID_TRY(loadNicBody(c, addNic(sys_, nic).index, 0));
      } else if (n == "gpu") {
        Gpu gpu;
        gpu.parent = ref;
        note(c->GetLineNum(), "<gpu> outside a <pci> element: no bus id");
        BRAID_TRY(loadGpuBody(c, &gpu));
        int idx = addGpu(sys_, gpu).index;
        BRAID_TRY(loadGpuLinks(c, idx));
      } else {
        return unknown(c, "<cpu>");
      }
    }
    return braidSuccess;
  }

  braidResult_t readPciInfo(XMLElement* e, PciInfo* p, ExtraAttrs* extra) {
    const char* busid = e->Attribute("busid");
    if (busid == nullptr) return err(e->GetLineNum(), "<pci> without a busid attribute");
    if (!normalizeBusId(busid, &p->busid))
      return err(e->GetLineNum(), "<pci> busid=\"%s\" is not a PCI bus id (dddd:bb:dd.f)", busid);
    auto seen = busids_.find(p->busid);
    if (seen != busids_.end())
      return err(e->GetLineNum(), "busid %s appears twice (first at line %d)", p->busid.c_str(),
                 seen->second);
    busids_[p->busid] = e->GetLineNum();
    for (const tinyxml2::XMLAttribute* a = e->FirstAttribute(); a; a = a->Next()) {
      std::string n = a->Name();
      if (n == "busid" || n == "class" || n == "vendor" || n == "device" ||
          n == "subsystem_vendor" || n == "subsystem_device" || n == "link_width")
        continue;
      if (n == "link_speed") {
        p->has_link_speed = true;
        p->link_speed_text = a->Value();
        BRAID_TRY(readLinkSpeed(e, a->Value(), &p->link_speed_gts));
      } else {
        extra->push_back({n, a->Value()});
      }
    }
    int cls = 0;
    BRAID_TRY(intAttr(e, "class", 16, &cls));
    p->class_code = static_cast<uint32_t>(cls) & 0xffffff;
    BRAID_TRY(intAttr(e, "vendor", 16, &p->vendor));
    BRAID_TRY(intAttr(e, "device", 16, &p->device));
    BRAID_TRY(intAttr(e, "subsystem_vendor", 16, &p->subsystem_vendor));
    BRAID_TRY(intAttr(e, "subsystem_device", 16, &p->subsystem_device));
    if (const char* w = e->Attribute("link_width")) {
      p->has_link_width = true;
      // Empty is unknown, as for link_speed: NCCL's own reader takes "" as 0 (strtol).
      if (*w == '\0') {
        note(e->GetLineNum(), "empty link_width: PCIe width unknown (rated as x" +
                                  std::to_string(kUnknownPcieWidthAs) + ")");
        p->link_width = 0;
      } else {
        BRAID_TRY(intAttr(e, "link_width", 10, &p->link_width));
        if (p->link_width < 0 || p->link_width > kMaxPcieWidth)
          return err(e->GetLineNum(), "<pci> link_width=\"%d\" is not a PCIe width (0-%d lanes)",
                     p->link_width, kMaxPcieWidth);
      }
    }
    return braidSuccess;
  }

  // "16 GT/s" (kernel <= 5.6), "16.0 GT/s PCIe" (later); "" and odd suffixes noted.
  braidResult_t readLinkSpeed(XMLElement* e, const char* text, double* gts) {
    if (*text == '\0') {
      note(e->GetLineNum(), "empty link_speed: PCIe speed unknown (rated as gen3)");
      return braidSuccess;
    }
    char* end = nullptr;
    double v = std::strtod(text, &end);
    // 0 is unknown; else gen1's 2.5 GT/s up to 1000 (NaN fails both comparisons).
    if (end == text || !(v == 0 || (v >= 2.5 && v <= 1000)))
      return err(e->GetLineNum(), "link_speed=\"%s\" is not a PCIe speed (2.5-1000 GT/s)", text);
    std::string rest = end;
    if (rest != " GT/s" && rest != " GT/s PCIe" && rest != "GT/s")
      note(e->GetLineNum(), "unusual link_speed \"" + std::string(text) + "\" read as " +
                                std::to_string(static_cast<int>(v)) + " GT/s");
    *gts = v;
    return braidSuccess;
  }

  braidResult_t loadPci(XMLElement* e, NodeRef parent) {
    PciInfo info;
    ExtraAttrs extra;
    BRAID_TRY(readPciInfo(e, &info, &extra));
    XMLElement* gpuEl = nullptr;
    XMLElement* nicEl = nullptr;
    bool hasPciChild = false;
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      std::string n = c->Name();
      if (n == "gpu") {
        if (gpuEl) return err(c->GetLineNum(), "second <gpu> in one <pci>");
        gpuEl = c;
      } else if (n == "nic") {
        if (nicEl) return err(c->GetLineNum(), "second <nic> in one <pci>");
        nicEl = c;
      } else if (n == "pci") {
        hasPciChild = true;
      } else {
        return unknown(c, "<pci>");
      }
    }
    uint32_t base = info.class_code >> 16;
    if (gpuEl && (nicEl || hasPciChild))
      return err(gpuEl->GetLineNum(), "<gpu> shares its <pci> with other devices");
    if (nicEl && hasPciChild)
      return err(nicEl->GetLineNum(), "<nic> shares its <pci> with PCI children");
    if (gpuEl || (base == 0x03 && !hasPciChild && !nicEl)) {
      Gpu gpu;
      gpu.pci = info;
      gpu.pci_extra = extra;
      gpu.parent = parent;
      if (gpuEl) BRAID_TRY(loadGpuBody(gpuEl, &gpu));
      int idx = addGpu(sys_, gpu).index;
      if (gpuEl) BRAID_TRY(loadGpuLinks(gpuEl, idx));
      return braidSuccess;
    }
    if (nicEl || (base == 0x02 && !hasPciChild)) {
      Nic nic;
      nic.pci = info;
      nic.pci_extra = extra;
      nic.parent = parent;
      int idx = addNic(sys_, nic).index;
      if (nicEl) BRAID_TRY(loadNicBody(nicEl, idx, info.class_code));
      return braidSuccess;
    }
    if ((info.class_code >> 8) == (kClassNvSwitch >> 8) && !hasPciChild) {
      NvSwitch sw;
      sw.pci = info;
      sw.parent = parent;
      addNvSwitch(sys_, sw);
      return braidSuccess;
    }
    Pci pci;
    pci.pci = info;
    pci.extra = extra;
    pci.parent = parent;
    NodeRef ref = addPci(sys_, pci);
    for (XMLElement* c = e->FirstChildElement("pci"); c; c = c->NextSiblingElement("pci"))
      BRAID_TRY(loadPci(c, ref));
    return braidSuccess;
  }

  braidResult_t loadGpuBody(XMLElement* e, Gpu* gpu) {
    for (const tinyxml2::XMLAttribute* a = e->FirstAttribute(); a; a = a->Next()) {
      std::string n = a->Name();
      if (n == "dev" || n == "sm" || n == "rank" || n == "gdr") continue;
      if (n == "model")
        gpu->model = a->Value();
      else
        gpu->extra.push_back({n, a->Value()});
    }
    BRAID_TRY(intAttr(e, "dev", 10, &gpu->dev));
    if (gpu->dev >= 0) {
      // One host's CUDA device indices are distinct; NCCL would pair ranks with the wrong GPU.
      auto [it, fresh] = gpuDevs_.emplace(gpu->dev, e->GetLineNum());
      if (!fresh)
        return err(e->GetLineNum(), "<gpu dev=\"%d\"> repeats the GPU dev %d of line %d", gpu->dev,
                   gpu->dev, it->second);
    }
    BRAID_TRY(intAttr(e, "sm", 10, &gpu->sm));
    BRAID_TRY(intAttr(e, "rank", 10, &gpu->rank));
    BRAID_TRY(intAttr(e, "gdr", 10, &gpu->gdr));
    return braidSuccess;
  }

  braidResult_t loadGpuLinks(XMLElement* e, int gpu) {
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      std::string n = c->Name();
      if (n != "nvlink" && n != "xgmi") return unknown(c, "<gpu>");
      PendingLink l{
          gpu, "", 1, -1, c->GetLineNum(), n == "xgmi" ? LinkType::kXgmi : LinkType::kNvLink};
      const char* target = c->Attribute("target");
      if (target == nullptr) return err(l.line, "<%s> without a target", n.c_str());
      if (!normalizeBusId(target, &l.target))
        return err(l.line, "<%s> target=\"%s\" is not a PCI bus id", n.c_str(), target);
      BRAID_TRY(intAttr(c, "count", 10, &l.count));
      if (l.count <= 0 || l.count > 64)
        return err(l.line, "<%s> count=%d is out of range", n.c_str(), l.count);
      if (const char* tc = c->Attribute("tclass")) {
        if (!parseLong(tc, 16, &l.tclass))
          return err(l.line, "<%s> tclass=\"%s\" is not a PCI class", n.c_str(), tc);
      }
      pending_.push_back(l);
    }
    return braidSuccess;
  }

  braidResult_t loadNicBody(XMLElement* e, int nic, uint32_t cls) {
    if (e->FirstAttribute()) note(e->GetLineNum(), "<nic> attributes are not kept");
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      if (std::strcmp(c->Name(), "net") != 0) return unknown(c, "<nic>");
      Net net;
      net.nic = nic;
      for (const tinyxml2::XMLAttribute* a = c->FirstAttribute(); a; a = a->Next()) {
        std::string n = a->Name();
        if (n == "dev" || n == "port" || n == "gdr" || n == "maxconn" || n == "speed" ||
            n == "latency" || n == "link_layer")
          continue;
        if (n == "name")
          net.name = a->Value();
        else if (n == "guid")
          net.guid = a->Value();
        else
          net.extra.push_back({n, a->Value()});
      }
      BRAID_TRY(intAttr(c, "dev", 10, &net.dev));
      BRAID_TRY(intAttr(c, "port", 10, &net.port));
      BRAID_TRY(intAttr(c, "gdr", 10, &net.gdr));
      BRAID_TRY(intAttr(c, "maxconn", 10, &net.maxconn));
      if (const char* s = c->Attribute("speed")) {
        double mbps;
        // 0 is unknown (NaN fails both comparisons).
        if (!parseDouble(s, &mbps) || !(mbps == 0 || plausibleNetGbps(mbps / 1000.0)))
          return err(c->GetLineNum(),
                     "<net> speed=\"%s\" is not a speed in Mb/s (0 for unknown, up to 1e7)", s);
        net.speed_gbps = mbps / 1000.0;
      }
      if (const char* s = c->Attribute("latency")) {
        if (!parseDouble(s, &net.latency_us) || !(net.latency_us >= 0 && net.latency_us <= 1e6))
          return err(c->GetLineNum(), "<net> latency=\"%s\" is not a latency in us (0-1e6)", s);
        net.has_latency = true;
      }
      // Braid writes link_layer only where the class and name would guess wrong.
      if (const char* ll = c->Attribute("link_layer"))
        net.link_layer = parseLinkLayer(ll);
      else
        net.link_layer = guessLinkLayer(cls, net.name);
      addNet(sys_, net);
    }
    return braidSuccess;
  }

  braidResult_t resolveLinks() {
    // A GPU's <nvlink> elements to one peer add up, as NCCL's do (ncclTopoConnectNodes adds
    // the bandwidth of a second link to the same node); NCCL lists a GPU pair's links on both
    // GPUs, which are one Link per pair.
    struct Resolved {
      NodeRef self, peer;
      int count;
      LinkType type;
      int line;
    };
    std::vector<Resolved> found;
    std::map<std::pair<NodeRef, NodeRef>, size_t> fromEnd;  // (GPU, peer) -> index in found
    for (const PendingLink& l : pending_) {
      NodeRef self{NodeKind::kGpu, l.gpu};
      const std::string& own = sys_->gpus[l.gpu].pci.busid;
      if (!own.empty() && l.target == own) {
        note(l.line, "NVLink of GPU " + own + " targets the GPU itself (count " +
                         std::to_string(l.count) + "): peer unknown, link dropped");
        continue;
      }
      NodeRef peer = findByBusId(*sys_, l.target);
      bool nvsClass =
          l.tclass >= 0 && (static_cast<uint32_t>(l.tclass) >> 8) == (kClassNvSwitch >> 8);
      if (!peer.valid() && nvsClass) {
        NvSwitch sw;
        sw.pci.busid = l.target;
        sw.pci.class_code = static_cast<uint32_t>(l.tclass);
        peer = addNvSwitch(sys_, sw);
      } else if (!peer.valid() && l.tclass >= 0 && (l.tclass >> 16) == 0x06) {
        // NVLink to the CPU (POWER9): the GPU's own NUMA node.
        peer = cpuOf(*sys_, self);
        if (!peer.valid()) return err(l.line, "NVLink to a CPU from a GPU outside any <cpu>");
      } else if (!peer.valid()) {
        return err(
            l.line, "NVLink from GPU %s to %s, which is not a device in this file",
            own.empty() ? ("dev " + std::to_string(sys_->gpus[l.gpu].dev)).c_str() : own.c_str(),
            l.target.c_str());
      } else if (peer.kind != NodeKind::kGpu && peer.kind != NodeKind::kNvSwitch) {
        return err(l.line, "NVLink target %s is a %s, not a GPU or NVSwitch", l.target.c_str(),
                   nodeKindName(peer.kind));
      }
      const auto [at, fresh] = fromEnd.try_emplace({self, peer}, found.size());
      if (fresh) {
        found.push_back({self, peer, l.count, l.type, l.line});
        continue;
      }
      Resolved& first = found[at->second];
      note(l.line, "another <" + std::string(l.type == LinkType::kXgmi ? "xgmi" : "nvlink") +
                       "> of one GPU to " + l.target + ": its count added (" +
                       std::to_string(first.count) + " + " + std::to_string(l.count) +
                       "), as NCCL adds them");
      first.count += l.count;
    }
    std::map<std::pair<NodeRef, NodeRef>, int> seen;  // the pair, either end -> its Link
    for (const Resolved& r : found) {
      const std::pair<NodeRef, NodeRef> key = std::minmax(r.self, r.peer);
      if (auto it = seen.find(key); it != seen.end()) {
        Link& prev = sys_->links[it->second];
        if (prev.count != r.count)
          note(r.line, "NVLink counts differ between the two ends (" + std::to_string(prev.count) +
                           " vs " + std::to_string(r.count) + "): keeping the larger");
        prev.count = std::max(prev.count, r.count);
        continue;
      }
      seen[key] = static_cast<int>(sys_->links.size());
      addNvLink(sys_, r.self, r.peer, r.count, r.type);
    }
    return braidSuccess;
  }

  System* sys_;
  std::map<std::string, int> busids_;
  std::map<int, int> gpuDevs_;  // <gpu> dev -> line of its element
  std::vector<PendingLink> pending_;
  ExtraAttrs system_extra_;
  std::map<std::string, std::pair<int, int>> noteIndex_;  // text -> (note index, repeats)
};

bool startsWithBytes(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// ---- Dump ----

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

braidResult_t loadNcclTopoXmlString(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadNcclTopoXml: out is null");
  System sys;
  sys.source = name;
  Loader loader(name, &sys);
  BRAID_TRY(loader.load(text));
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadNcclTopoXml(const std::string& path, System* out) {
  std::string text;
  if (std::string why = readFile(path, &text); !why.empty())
    return fail(braidInvalidArgument, "%s: cannot read NCCL topology file: %s", path.c_str(),
                why.c_str());
  return loadNcclTopoXmlString(text, path, out);
}

braidResult_t loadTopologyFile(const std::string& path, System* out) {
  std::string text;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return loadSysfsInfinibandDir(path, out);
  if (std::string why = readFile(path, &text); !why.empty())
    return fail(braidInvalidArgument, "%s: cannot read topology file: %s", path.c_str(),
                why.c_str());
  if (blankText(text)) return fail(braidInvalidArgument, "%s: empty file", path.c_str());
  // Archives: hwloc fsroot tarballs (a saved /sys and /proc), detected after extraction.
  if (startsWithBytes(text, "BZh") || startsWithBytes(text, "\x1f\x8b") ||
      startsWithBytes(text, "\xfd\x37zXZ") ||
      (text.size() > 262 && text.compare(257, 5, "ustar") == 0))
    return loadFsrootArchive(path, out);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] != '<' && !sniffTextTopology(text).empty())
    return loadTextTopology(text, path, out);
  XMLDocument doc;
  doc.Parse(text.data(), text.size());
  if (!doc.Error() && doc.RootElement() && std::strcmp(doc.RootElement()->Name(), "topology") == 0)
    return loadHwlocXml(path, out);
  if (!doc.Error() && doc.RootElement() &&
      (std::strcmp(doc.RootElement()->Name(), "graphs") == 0 ||
       std::strcmp(doc.RootElement()->Name(), "graph") == 0))
    return loadNcclGraphXmlString(text, path, out);
  return loadNcclTopoXmlString(text, path, out);
}

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
