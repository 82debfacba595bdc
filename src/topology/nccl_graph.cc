// NCCL graph files (NCCL_GRAPH_FILE, NCCL_GRAPH_DUMP_FILE) into the system model.
//
// The format (NCCL src/graph/search.cc, ncclTopoGetGraphFromXml): <graphs version="1"> holds
// one <graph> per search NCCL ran (id 0 ring, 1 tree, 2 collnet chain, ...), each with its
// pattern, channel count, per-channel speeds and path types, and <channel> elements listing
// the devices a channel visits: <net dev="N"/> where it enters or leaves the node and
// <gpu dev="N"/> for each GPU in order. Devices are indices only (CUDA devices, NCCL net
// devices), so the model gets GPUs 0..max and a NIC per net, placed nowhere.
#include <tinyxml2.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <map>
#include <set>

#include "base/error.h"
#include "topology/topology.h"
#include "topology/xml_util.h"

namespace braid::topo {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

// Device indices above this are not a machine's GPUs or NICs but a typo; refusing them also
// bounds the GPUs the model creates.
constexpr long kMaxDev = 4095;

class GraphLoader : XmlFileErrors {
 public:
  GraphLoader(const std::string& name, System* sys) : XmlFileErrors(name), sys_(sys) {}

  braidResult_t load(const std::string& text) {
    if (blankText(text)) return fail(braidInvalidArgument, "%s: empty file", name_.c_str());
    XMLDocument doc;
    doc.Parse(text.data(), text.size());
    if (doc.Error()) return err(doc.ErrorLineNum(), "malformed XML: %s", xmlErrorText(doc).c_str());
    XMLElement* root = doc.RootElement();
    if (root == nullptr) return err(1, "no root element");
    if (std::strcmp(root->Name(), "graph") == 0)
      return err(root->GetLineNum(),
                 "<graph> as the root: NCCL reads a graph file only as "
                 "<graphs version=\"1\"> holding <graph> elements");
    if (std::strcmp(root->Name(), "graphs") != 0)
      return err(root->GetLineNum(), "unknown root element <%s>: expected <graphs>", root->Name());
    for (XMLElement* e = root->FirstChildElement(); e; e = e->NextSiblingElement()) {
      if (std::strcmp(e->Name(), "channel") == 0)
        return err(e->GetLineNum(), "<channel> outside a <graph>");
      if (std::strcmp(e->Name(), "graph") != 0) return unknown(e, "<graphs>");
      BRAID_TRY(loadGraph(e));
    }
    if (sys_->graphs.empty()) note(root->GetLineNum(), "<graphs> holds no <graph>");
    build();
    return braidSuccess;
  }

 private:
  void note(int line, const std::string& what) {
    sys_->notes.push_back(name_ + ":" + std::to_string(line) + ": " + what);
  }

  braidResult_t intAttr(XMLElement* e, const char* attr, int* out) {
    const char* v = e->Attribute(attr);
    if (v == nullptr) return braidSuccess;
    long x;
    if (!parseLong(v, 10, &x) || x < -2147483647L || x > 2147483647L)
      return err(e->GetLineNum(), "<%s> %s=\"%s\" is not a number", e->Name(), attr, v);
    *out = static_cast<int>(x);
    return braidSuccess;
  }
  braidResult_t doubleAttr(XMLElement* e, const char* attr, double* out) {
    const char* v = e->Attribute(attr);
    if (v == nullptr) return braidSuccess;
    double x;
    if (!parseDouble(v, &x))
      return err(e->GetLineNum(), "<%s> %s=\"%s\" is not a number", e->Name(), attr, v);
    // A speed in GB/s: inf, nan or a negative value is no speed (and cannot be written as JSON).
    if (!std::isfinite(x))
      return err(e->GetLineNum(), "<%s> %s=\"%s\" is not a finite number", e->Name(), attr, v);
    if (x < 0) return err(e->GetLineNum(), "<%s> %s=\"%s\" is negative", e->Name(), attr, v);
    *out = x;
    return braidSuccess;
  }
  // A required device index: present, a number, 0..kMaxDev.
  braidResult_t devAttr(XMLElement* e, int* out) {
    const char* v = e->Attribute("dev");
    if (v == nullptr) return err(e->GetLineNum(), "<%s> without a dev attribute", e->Name());
    long x;
    if (!parseLong(v, 10, &x))
      return err(e->GetLineNum(), "<%s> dev=\"%s\" is not a number", e->Name(), v);
    if (x < 0) return err(e->GetLineNum(), "<%s> dev=\"%s\" is negative", e->Name(), v);
    if (x > kMaxDev)
      return err(e->GetLineNum(), "<%s> dev=\"%s\" is larger than %ld", e->Name(), v, kMaxDev);
    *out = static_cast<int>(x);
    return braidSuccess;
  }

  braidResult_t loadGraph(XMLElement* e) {
    static const std::set<std::string> kKnown = {
        "id",        "pattern",   "crossnic",     "nchannels",    "speedintra", "speedinter",
        "typeintra", "typeinter", "samechannels", "latencyinter", "nvlsintra",  "collnet"};
    NcclGraph g;
    BRAID_TRY(intAttr(e, "id", &g.id));
    BRAID_TRY(intAttr(e, "pattern", &g.pattern));
    BRAID_TRY(intAttr(e, "nchannels", &g.nchannels));
    BRAID_TRY(doubleAttr(e, "speedintra", &g.speedintra));
    BRAID_TRY(doubleAttr(e, "speedinter", &g.speedinter));
    int crossnic = 0;
    BRAID_TRY(intAttr(e, "crossnic", &crossnic));
    g.crossnic = crossnic != 0;
    if (const char* v = e->Attribute("typeintra")) g.typeintra = v;
    if (const char* v = e->Attribute("typeinter")) g.typeinter = v;
    if (!e->Attribute("pattern")) return err(e->GetLineNum(), "<graph> without a pattern");
    if (std::strcmp(graphPatternName(g.pattern), "UNKNOWN") == 0)
      note(e->GetLineNum(),
           "<graph> pattern=\"" + std::to_string(g.pattern) + "\" is not one NCCL defines (1-6)");
    for (const tinyxml2::XMLAttribute* a = e->FirstAttribute(); a; a = a->Next())
      if (!kKnown.count(a->Name()))
        note(e->GetLineNum(), std::string("<graph> attribute ") + a->Name() + " is not kept");
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      if (std::strcmp(c->Name(), "channel") != 0) return unknown(c, "<graph>");
      GraphChannel ch;
      std::map<int, int> seen;  // gpu dev -> line
      for (XMLElement* d = c->FirstChildElement(); d; d = d->NextSiblingElement()) {
        int dev = -1;
        if (std::strcmp(d->Name(), "gpu") == 0) {
          BRAID_TRY(devAttr(d, &dev));
          auto [it, fresh] = seen.emplace(dev, d->GetLineNum());
          if (!fresh)
            return err(d->GetLineNum(),
                       "<gpu dev=\"%d\"> appears twice in one channel (first "
                       "at line %d)",
                       dev, it->second);
          ch.gpus.push_back(dev);
          maxGpu_ = std::max(maxGpu_, dev);
        } else if (std::strcmp(d->Name(), "net") == 0) {
          BRAID_TRY(devAttr(d, &dev));
          ch.nets.push_back(dev);
          nets_.insert(dev);
        } else {
          return unknown(d, "<channel>");
        }
      }
      if (ch.gpus.empty()) note(c->GetLineNum(), "<channel> without a <gpu>");
      g.channels.push_back(std::move(ch));
    }
    if (!e->Attribute("nchannels") || g.nchannels != static_cast<int>(g.channels.size()))
      note(e->GetLineNum(), "<graph id=\"" + std::to_string(g.id) + "\"> nchannels=\"" +
                                (e->Attribute("nchannels") ? e->Attribute("nchannels") : "") +
                                "\" but it holds " + std::to_string(g.channels.size()) +
                                " <channel> element(s)");
    sys_->graphs.push_back(std::move(g));
    return braidSuccess;
  }

  void build() {
    for (int d = 0; d <= maxGpu_; ++d) {
      Gpu gpu;
      gpu.dev = d;
      addGpu(sys_, gpu);
    }
    for (int d : nets_) {
      Nic nic;
      int idx = addNic(sys_, nic).index;
      Net net;
      net.nic = idx;
      net.dev = d;
      net.name = "net" + std::to_string(d);
      addNet(sys_, net);
    }
    if (maxGpu_ >= 0)
      sys_->notes.push_back("GPU placement unknown: an NCCL graph file lists only device indices");
    if (!nets_.empty())
      sys_->notes.push_back(
          "NIC placement unknown: an NCCL graph file lists only net device indices");
    connectSystem(sys_);
  }

  System* sys_;
  int maxGpu_ = -1;
  std::set<int> nets_;
};

}  // namespace

const char* graphPatternName(int pattern) {
  switch (pattern) {
    case kPatternBalancedTree:
      return "BALANCED_TREE";
    case kPatternSplitTree:
      return "SPLIT_TREE";
    case kPatternTree:
      return "TREE";
    case kPatternRing:
      return "RING";
    case kPatternNvls:
      return "NVLS";
    case kPatternCollnetDirect:
      return "COLLNET_DIRECT";
    default:
      return "UNKNOWN";
  }
}

braidResult_t loadNcclGraphXmlString(const std::string& text, const std::string& name,
                                     System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadNcclGraphXml: out is null");
  System sys;
  sys.source = name;
  GraphLoader loader(name, &sys);
  BRAID_TRY(loader.load(text));
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadNcclGraphXml(const std::string& path, System* out) {
  std::string text;
  if (std::string why = readFile(path, &text); !why.empty())
    return fail(braidInvalidArgument, "%s: cannot read NCCL graph file: %s", path.c_str(),
                why.c_str());
  return loadNcclGraphXmlString(text, path, out);
}

std::vector<std::vector<int>> graphRings(const System& sys) {
  std::map<int, int> byDev;  // GPU dev -> index
  for (int i = 0; i < static_cast<int>(sys.gpus.size()); ++i)
    if (sys.gpus[i].host == 0 && sys.gpus[i].dev >= 0) byDev.emplace(sys.gpus[i].dev, i);
  std::vector<std::vector<int>> rings;
  for (const NcclGraph& g : sys.graphs) {
    if (g.pattern != kPatternRing) continue;
    for (const GraphChannel& ch : g.channels) {
      std::vector<int> ring;
      for (int d : ch.gpus)
        if (auto it = byDev.find(d); it != byDev.end()) ring.push_back(it->second);
      rings.push_back(std::move(ring));
    }
  }
  return rings;
}

}  // namespace braid::topo
