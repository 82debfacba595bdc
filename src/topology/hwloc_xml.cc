// hwloc XML (lstopo --of xml) into the system model, parsed with tinyxml2 rather than the
// hwloc library so every export format loads whatever hwloc is installed:
//   v1   <!DOCTYPE topology SYSTEM "hwloc.dtd">, <topology> without version (hwloc 1.x, and
//        2.x exporting v1): NUMANode is a parent of the objects it holds, osdev_type 0..5,
//        distances as <distances relative_depth latency_base><latency value/>.
//   v2.0 hwloc2.dtd, <topology version="2.0">: NUMA nodes are memory children, osdev_type
//        0..5, <distances2> and <distances2hetero> (indexes "Type:gp_index").
//   v3.0 <topology version="3.0"> (hwloc master): osdev_type is a bitmask (1 storage, 2
//        memory, 4 GPU, 8 coproc, 16 network, 32 OpenFabrics, 64 DMA). hwloc 2.9 refuses it.
//
// This file holds stage 1, the XML into a flat list of objects, and the entry points;
// hwloc_build.cc holds stage 2, the objects into the model (what it takes, and how, is said
// there); hwloc_parser.h what passes between them.
// Errors: braidInvalidArgument "<file>:<line>: <problem>" (missing, empty, truncated or
// malformed file, wrong root, unknown version, bad bus id or pci_type, bad distances).
#include <tinyxml2.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "topology/hwloc_parser.h"
#include "topology/topology.h"

namespace braid::topo {
namespace hwloc {

// ---- Stage 1: XML -> flat object list (format differences are absorbed here) ----

namespace {

// "0x00ffffff,0xffffffff,,0x0": empty when every digit is 0. "0xf...f" (infinite) is not.
bool cpusetIsEmpty(const std::string& s) {
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == 'x' && i > 0 && s[i - 1] == '0') continue;
    if (isxdigit(static_cast<unsigned char>(c)) && c != '0') return false;
  }
  return true;
}

Kind kindOf(const char* t) {
  if (!strcmp(t, "Machine") || !strcmp(t, "System")) return Kind::kMachine;
  if (!strcmp(t, "Package") || !strcmp(t, "Socket")) return Kind::kPackage;
  if (!strcmp(t, "NUMANode")) return Kind::kNuma;
  if (!strcmp(t, "Core")) return Kind::kCore;
  if (!strcmp(t, "PU")) return Kind::kPu;
  if (!strcmp(t, "Bridge")) return Kind::kBridge;
  if (!strcmp(t, "PCIDev")) return Kind::kPciDev;
  if (!strcmp(t, "OSDev")) return Kind::kOsDev;
  return Kind::kOther;
}

// Space-separated tokens of every child element named tag, in order.
std::vector<std::string> tokens(const tinyxml2::XMLElement* e, const char* tag) {
  std::vector<std::string> out;
  for (auto* c = e->FirstChildElement(tag); c; c = c->NextSiblingElement(tag)) {
    const char* t = c->GetText();
    if (!t) continue;
    std::string s = t;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) i++;
      size_t j = i;
      while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) j++;
      if (j > i) out.push_back(s.substr(i, j - i));
      i = j;
    }
  }
  return out;
}

}  // namespace

braidResult_t Parser::err(int line, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return fail(braidInvalidArgument, "hwloc XML %s:%d: %s", file_.c_str(), line, buf);
}

bool parseLong(const char* s, int base, long* out) {
  if (!s || !*s) return false;
  // Hexadecimal values are ids and masks: no sign, no leading space (as xml_util.h's).
  if (base == 16 && !isxdigit(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  long v = strtol(s, &end, base);
  if (errno || *end) return false;
  *out = v;
  return true;
}

braidResult_t Parser::parse(const tinyxml2::XMLDocument& doc) {
  const tinyxml2::XMLElement* root = doc.RootElement();
  if (!root) return err(1, "no root element");
  if (strcmp(root->Name(), "topology") != 0) {
    if (strcmp(root->Name(), "system") == 0)
      return err(root->GetLineNum(),
                 "root element is <system>: this is an NCCL topology file, not hwloc XML "
                 "(use loadNcclTopoXml or loadTopologyFile)");
    return err(root->GetLineNum(), "root element is <%s>, expected <topology>", root->Name());
  }
  const char* v = root->Attribute("version");
  if (!v)
    version_ = 1;
  else if (strncmp(v, "2.", 2) == 0)
    version_ = 2;
  else if (strncmp(v, "3.", 2) == 0)
    version_ = 3;
  else if (strncmp(v, "1.", 2) == 0)
    version_ = 1;
  else
    return err(root->GetLineNum(), "unsupported hwloc XML version \"%s\" (1.x, 2.x, 3.x known)", v);
  if (version_ == 3)
    note(
        "hwloc XML format 3.0 (hwloc 3.x; the installed hwloc 2.9 cannot read it): loaded by "
        "Braid's own parser");
  bool sawMachine = false;
  for (auto* e = root->FirstChildElement(); e; e = e->NextSiblingElement()) {
    const char* n = e->Name();
    if (strcmp(n, "object") == 0) {
      sawMachine = true;
      BRAID_TRY(parseObject(e, -1));
    } else if (strcmp(n, "distances2") == 0) {
      BRAID_TRY(parseDistancesV2(e, false));
    } else if (strcmp(n, "distances2hetero") == 0) {
      BRAID_TRY(parseDistancesV2(e, true));
    }
  }
  if (!sawMachine) return err(root->GetLineNum(), "<topology> holds no <object> (no Machine)");
  for (auto& [e, holder] : v1dist_) BRAID_TRY(parseDistancesV1(e, holder));
  return braidSuccess;
}

braidResult_t Parser::parseObject(const tinyxml2::XMLElement* e, int parent) {
  XObj o;
  o.line = e->GetLineNum();
  const char* type = e->Attribute("type");
  if (!type) return err(o.line, "<object> without a type attribute");
  o.kind = kindOf(type);
  if (const char* s = e->Attribute("os_index")) {
    if (!parseLong(s, 10, &o.osIndex)) return err(o.line, "bad os_index \"%s\"", s);
  }
  if (const char* s = e->Attribute("gp_index")) {
    if (!parseLong(s, 10, &o.gp)) return err(o.line, "bad gp_index \"%s\"", s);
  }
  if (const char* s = e->Attribute("name")) o.name = s;
  if (const char* s = e->Attribute("subtype")) o.subtype = s;
  if (const char* s = e->Attribute("cpuset")) {
    o.hasCpuset = true;
    o.cpuset = s;
    o.cpusetEmpty = cpusetIsEmpty(s);
  }
  if (o.kind == Kind::kBridge) {
    const char* bt = e->Attribute("bridge_type");
    o.hostBridge = bt && bt[0] == '0';
  }
  if (const char* s = e->Attribute("pci_busid")) {
    if (!normalizeBusId(s, &o.busid))
      return err(o.line, "unparsable PCI bus id pci_busid=\"%s\" (expected dddd:bb:dd.f)", s);
    o.pci.busid = o.busid;
  } else if ((o.kind == Kind::kPciDev) || (o.kind == Kind::kBridge && !o.hostBridge)) {
    return err(o.line, "%s object without pci_busid", type);
  }
  if (const char* s = e->Attribute("pci_type")) {
    unsigned cls, v, d, sv, sd, rev;
    int n = sscanf(s, "%4x [%4x:%4x] [%4x:%4x] %2x", &cls, &v, &d, &sv, &sd, &rev);
    // sscanf's %x takes a sign ("-200"): every field must be 16 bits, as hwloc writes them.
    if (n < 3 || cls > 0xffff || v > 0xffff || d > 0xffff ||
        (n >= 5 && (sv > 0xffff || sd > 0xffff)))
      return err(o.line, "unparsable pci_type=\"%s\"", s);
    o.pci.class_code = cls << 8;
    o.pci.vendor = static_cast<int>(v);
    o.pci.device = static_cast<int>(d);
    if (n >= 5) {
      o.pci.subsystem_vendor = static_cast<int>(sv);
      o.pci.subsystem_device = static_cast<int>(sd);
    }
  }
  if (const char* s = e->Attribute("pci_link_speed")) {
    char* end = nullptr;
    double g = strtod(s, &end);
    if (end == s || *end || !(g >= 0)) return err(o.line, "bad pci_link_speed=\"%s\"", s);
    o.linkGBs = g;
  }
  if (o.kind == Kind::kOsDev) {
    const char* s = e->Attribute("osdev_type");
    long t = -1;
    if (!s || !parseLong(s, 10, &t) || t < 0)
      return err(o.line, "OSDev without a numeric osdev_type (\"%s\")", s ? s : "");
    if (version_ >= 3) {
      o.osdev = static_cast<unsigned>(t);
    } else {
      static const unsigned kMap[] = {kOsStorage,     kOsGpu, kOsNetwork,
                                      kOsOpenFabrics, kOsDma, kOsCoproc};
      o.osdev = t < 6 ? kMap[t] : 0;
    }
  }
  for (auto* c = e->FirstChildElement("info"); c; c = c->NextSiblingElement("info")) {
    const char* n = c->Attribute("name");
    const char* v = c->Attribute("value");
    if (n) o.infos.emplace_back(n, v ? v : "");
  }
  o.parent = parent;
  int idx = static_cast<int>(objs_.size());
  objs_.push_back(std::move(o));
  if (parent >= 0) objs_[parent].children.push_back(idx);
  for (auto* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
    if (strcmp(c->Name(), "object") == 0)
      BRAID_TRY(parseObject(c, idx));
    else if (strcmp(c->Name(), "distances") == 0)
      v1dist_.emplace_back(c, idx);
  }
  return braidSuccess;
}

braidResult_t Parser::parseDistancesV2(const tinyxml2::XMLElement* e, bool hetero) {
  XDist d;
  d.line = e->GetLineNum();
  if (const char* n = e->Attribute("name")) d.name = n;
  long nb = -1;
  if (!parseLong(e->Attribute("nbobjs"), 10, &nb) || nb <= 0 || nb > 65536)
    return err(d.line, "distances without a valid nbobjs");
  const char* type = e->Attribute("type");
  const char* indexing = e->Attribute("indexing");
  bool byOs = indexing && strcmp(indexing, "os") == 0;
  std::vector<std::string> idx = tokens(e, "indexes");
  std::vector<std::string> vals = tokens(e, "u64values");
  if (static_cast<long>(idx.size()) != nb)
    return err(d.line, "distances lists %zu indexes, nbobjs=%ld", idx.size(), nb);
  if (static_cast<long>(vals.size()) != nb * nb)
    return err(d.line, "distances lists %zu values, expected %ld", vals.size(), nb * nb);
  for (auto& tok : idx) {
    std::string t = type ? type : "";
    std::string num = tok;
    bool gp = !byOs;
    if (hetero) {
      size_t colon = tok.find(':');
      if (colon == std::string::npos)
        return err(d.line, "hetero distance index \"%s\"", tok.c_str());
      t = tok.substr(0, colon);
      num = tok.substr(colon + 1);
      gp = true;
    }
    long id;
    if (!parseLong(num.c_str(), 10, &id))
      return err(d.line, "bad distance index \"%s\"", tok.c_str());
    Kind k = kindOf(t.c_str());
    int found = -1;
    for (size_t i = 0; i < objs_.size() && found < 0; i++) {
      const XObj& o = objs_[i];
      if (o.kind != k) continue;
      if ((gp ? o.gp : o.osIndex) == id) found = static_cast<int>(i);
    }
    if (found < 0)
      return err(d.line, "distances %s name object %s %s#%ld that the file does not hold",
                 d.name.c_str(), t.c_str(), gp ? "gp" : "os", id);
    d.objs.push_back(found);
  }
  for (auto& v : vals) {
    char* end = nullptr;
    unsigned long long x = strtoull(v.c_str(), &end, 10);
    if (*end) return err(d.line, "bad distance value \"%s\"", v.c_str());
    d.values.push_back(static_cast<double>(x));
  }
  dists_.push_back(std::move(d));
  return braidSuccess;
}

void collect(const std::vector<XObj>& objs, int i, Kind k, std::vector<int>* out) {
  if (objs[i].kind == k) out->push_back(i);
  for (int c : objs[i].children) collect(objs, c, k, out);
}

// v1: nbobjs^2 <latency value> (times latency_base) between the objects relative_depth
// below the holder; Braid reads those over NUMA nodes (their count matches) and skips others.
braidResult_t Parser::parseDistancesV1(const tinyxml2::XMLElement* e, int holder) {
  XDist d;
  d.line = e->GetLineNum();
  d.name = "NUMALatency";
  long nb = -1;
  if (!parseLong(e->Attribute("nbobjs"), 10, &nb) || nb <= 0 || nb > 65536)
    return err(d.line, "distances without a valid nbobjs");
  double base = e->DoubleAttribute("latency_base", 1.0);
  for (auto* c = e->FirstChildElement("latency"); c; c = c->NextSiblingElement("latency")) {
    double v = 0;
    if (c->QueryDoubleAttribute("value", &v) != tinyxml2::XML_SUCCESS)
      return err(c->GetLineNum(), "<latency> without a numeric value");
    d.values.push_back(v * base);
  }
  if (static_cast<long>(d.values.size()) != nb * nb)
    return err(d.line, "distances lists %zu latencies, expected %ld", d.values.size(), nb * nb);
  std::vector<int> numas;
  collect(objs_, holder, Kind::kNuma, &numas);
  if (static_cast<long>(numas.size()) != nb) {
    note("a v1 distance matrix over " + std::to_string(nb) +
         " objects that are not the NUMA nodes: skipped");
    return braidSuccess;
  }
  d.objs = numas;
  dists_.push_back(std::move(d));
  return braidSuccess;
}

}  // namespace hwloc

namespace {

braidResult_t loadDoc(tinyxml2::XMLDocument& doc, tinyxml2::XMLError rc, const std::string& name,
                      System* out, std::set<std::string> gpuBusIds = {}) {
  if (rc != tinyxml2::XML_SUCCESS) {
    if (rc == tinyxml2::XML_ERROR_FILE_NOT_FOUND ||
        rc == tinyxml2::XML_ERROR_FILE_COULD_NOT_BE_OPENED)
      return fail(braidInvalidArgument, "hwloc XML %s: cannot open the file", name.c_str());
    if (rc == tinyxml2::XML_ERROR_EMPTY_DOCUMENT)
      return fail(braidInvalidArgument, "hwloc XML %s:%d: empty document", name.c_str(),
                  std::max(1, doc.ErrorLineNum()));
    return fail(braidInvalidArgument, "hwloc XML %s:%d: malformed or truncated XML (%s)",
                name.c_str(), doc.ErrorLineNum(), doc.ErrorName());
  }
  hwloc::Parser p(name, std::move(gpuBusIds));
  BRAID_TRY(p.parse(doc));
  return p.build(out);
}

}  // namespace

namespace detail {
// detect.cc: the live hwloc export, with the PCI devices NVML names as GPUs.
braidResult_t loadHwlocXmlDetected(const std::string& text, const std::string& name,
                                   const std::vector<std::string>& gpuBusIds, System* out) {
  tinyxml2::XMLDocument doc;
  tinyxml2::XMLError rc = doc.Parse(text.data(), text.size());
  return loadDoc(doc, rc, name, out, std::set<std::string>(gpuBusIds.begin(), gpuBusIds.end()));
}
}  // namespace detail

braidResult_t loadHwlocXml(const std::string& path, System* out) {
  if (!out) return fail(braidInvalidArgument, "loadHwlocXml: out is null");
  tinyxml2::XMLDocument doc;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f)
    return fail(braidInvalidArgument, "hwloc XML %s: cannot open the file (%s)", path.c_str(),
                strerror(errno));
  tinyxml2::XMLError rc = doc.LoadFile(f);
  fclose(f);
  return loadDoc(doc, rc, path, out);
}

braidResult_t loadHwlocXmlString(const std::string& text, const std::string& name, System* out) {
  if (!out) return fail(braidInvalidArgument, "loadHwlocXmlString: out is null");
  tinyxml2::XMLDocument doc;
  tinyxml2::XMLError rc = doc.Parse(text.data(), text.size());
  return loadDoc(doc, rc, name, out);
}

}  // namespace braid::topo
