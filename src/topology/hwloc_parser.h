// What passes between the hwloc XML loader's two stages: stage 1 (hwloc_xml.cc) reads the XML
// into a flat list of objects (XObj) and distance matrices (XDist), absorbing the differences
// between the formats; stage 2 (hwloc_build.cc) builds the system model from them. Parser holds
// both stages' state. Internal to the loader.
#pragma once

#include <tinyxml2.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.h"
#include "topology/topology.h"

namespace braid::topo::hwloc {

enum : unsigned {
  kOsStorage = 1,
  kOsMemory = 2,
  kOsGpu = 4,
  kOsCoproc = 8,
  kOsNetwork = 16,
  kOsOpenFabrics = 32,
  kOsDma = 64,
};

enum class Kind { kMachine, kPackage, kNuma, kCore, kPu, kBridge, kPciDev, kOsDev, kOther };

struct XObj {
  Kind kind = Kind::kOther;
  int line = 0;
  long osIndex = -1;
  long gp = -1;
  std::string name, subtype;
  std::string busid;        // normalised, empty if none
  bool hostBridge = false;  // bridge_type "0-1"
  PciInfo pci;
  double linkGBs = 0;  // pci_link_speed
  unsigned osdev = 0;  // kOs* bits
  bool hasCpuset = false, cpusetEmpty = false;
  std::string cpuset;
  std::vector<std::pair<std::string, std::string>> infos;
  int parent = -1;
  std::vector<int> children;

  const char* info(const char* key) const {
    for (auto& kv : infos)
      if (kv.first == key) return kv.second.c_str();
    return nullptr;
  }
  bool isIo() const {
    return kind == Kind::kBridge || kind == Kind::kPciDev || kind == Kind::kOsDev;
  }
};

struct XDist {
  std::string name;  // NUMALatency, NVLinkBandwidth, XGMIBandwidth, ... ("" in v1)
  int line = 0;
  std::vector<int> objs;       // indexes into Parser::objs
  std::vector<double> values;  // objs.size()^2, row-major
};

class Parser {
 public:
  explicit Parser(std::string name, std::set<std::string> gpuBusIds = {})
      : file_(std::move(name)), gpuBusIds_(std::move(gpuBusIds)) {}

  braidResult_t parse(const tinyxml2::XMLDocument& doc);
  braidResult_t build(System* out);

 private:
  braidResult_t err(int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  braidResult_t parseObject(const tinyxml2::XMLElement* e, int parent);
  braidResult_t parseDistancesV1(const tinyxml2::XMLElement* e, int holder);
  braidResult_t parseDistancesV2(const tinyxml2::XMLElement* e, bool hetero);
  void note(const std::string& s) {
    if (std::find(notes_.begin(), notes_.end(), s) == notes_.end()) notes_.push_back(s);
  }

  std::string file_;
  std::set<std::string> gpuBusIds_;  // PCI devices known to be GPUs (NVML at detection)
  int version_ = 2;
  std::vector<XObj> objs_;
  std::vector<XDist> dists_;
  std::vector<std::pair<const tinyxml2::XMLElement*, int>> v1dist_;  // element, holder obj
  std::vector<std::string> notes_;
};

// s whole as a long in `base` (hexadecimal: no sign or space first); false for NULL, empty or
// trailing junk (hwloc_xml.cc).
bool parseLong(const char* s, int base, long* out);
// Appends the objects of kind k among i and those below it, in document order (hwloc_xml.cc).
void collect(const std::vector<XObj>& objs, int i, Kind k, std::vector<int>* out);

}  // namespace braid::topo::hwloc
