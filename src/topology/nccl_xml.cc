// NCCL topology XML (NCCL_TOPO_FILE) into the system model; nccl_xml_dump.cc writes it back.
//
// The format (NCCL src/graph/xml.cc): <system version> holds <cpu> elements (one per NUMA
// node), which hold a tree of <pci> elements; a <pci> holding <gpu> is a GPU (its <nvlink>
// children name peers by bus id and class), one holding <nic> is a NIC with <net> ports. Files
// written by hand leave out most attributes, list devices as bare <pci> leaves with only a
// class, or point NVLinks at the GPU itself; those are read with a note, anything the model
// cannot place is refused with the file, line and problem.
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
#include "topology/nccl_pci_class.h"
#include "topology/topology.h"
#include "topology/xml_util.h"

namespace braid::topo {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

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

}  // namespace braid::topo
