// Detection of this machine's topology. Every source is optional; what each found, or why it
// could not be read, is said once (BRAID_DEBUG=INFO, subsystem TOPO) and kept in
// System::notes. Nothing is guessed silently.
//   hwloc library (BRAID_HAVE_HWLOC): packages, NUMA nodes, cores, PUs, the PCI tree and OS
//     devices, with I/O filters at KEEP_IMPORTANT. The topology is exported to XML and read by
//     the hwloc XML loader, so detection and loading share one mapping. Without hwloc, sysfs
//     (/sys/devices/system/{node,cpu}, /sys/class/net) gives the counts and network devices.
//   NVML (nvml_query.cc: dlopen("libnvidia-ml.so.1") at run time, no link dependency): GPUs
//     and their PCI bus ids, names, compute capability, and per NVLink its state and remote PCI
//     device, counted per peer GPU or NVSwitch.
//   libibverbs (BRAID_HAVE_IBVERBS), else /sys/class/infiniband: HCAs and ports (state, link
//     layer, active speed x width in Gb/s, GUIDs).
//   sysfs: PCI link speed and width (/sys/bus/pci/devices/*/current_link_{speed,width}) and
//     Ethernet speed (/sys/class/net/*/speed; virtio NICs say -1 or nothing: "unknown").
// detectSystemAt(fsroot) reads a saved filesystem root instead of "/" (hwloc's fsroot: a copy of
// /sys and /proc, as in hwloc's tests/hwloc/linux/*.tar.bz2): hwloc and every sysfs/procfs read
// are pointed at it, and NVML and libibverbs, which can only see this machine, are skipped.
#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#ifdef BRAID_HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef BRAID_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

#include "base/error.h"
#include "topology/nvml_query.h"
#include "topology/text_util.h"
#include "topology/topology.h"

namespace braid::topo {
namespace detail {
braidResult_t loadHwlocXmlDetected(const std::string& text, const std::string& name,
                                   const std::vector<std::string>& gpuBusIds, System* out);
}  // namespace detail

namespace {

// A /sys or /proc path under the filesystem root ("/" or "" is the machine itself).
std::string under(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + path;
}

void say(System* sys, const std::string& line) {
  BRAID_INFO("TOPO", "%s", line.c_str());
  sys->notes.push_back(line);
}

bool readLine(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::string s;
  if (!std::getline(f, s)) return false;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  *out = s;
  return true;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The PCI bus id a sysfs device link resolves to (the last path element that is one).
std::string busIdOfSysfsDevice(const std::string& link) {
  char buf[PATH_MAX];
  if (!realpath(link.c_str(), buf)) return "";
  std::string p = buf, found;
  size_t pos = 0;
  while (pos < p.size()) {
    size_t slash = p.find('/', pos);
    if (slash == std::string::npos) slash = p.size();
    std::string part = p.substr(pos, slash - pos), norm;
    if (part.find(':') != std::string::npos && part.find('.') != std::string::npos &&
        normalizeBusId(part, &norm))
      found = norm;
    pos = slash + 1;
  }
  return found;
}

// ---- sysfs fallbacks ----

// Packages, cores, PUs and NUMA nodes from /sys/devices/system when hwloc is absent.
void cpuFromSysfs(System* sys, const std::string& root) {
  std::set<std::string> pkgs, cores;
  int pus = 0;
  for (auto& c : listDir(under(root, "/sys/devices/system/cpu"))) {
    if (c.rfind("cpu", 0) != 0 || c.size() < 4 || !isdigit(static_cast<unsigned char>(c[3])))
      continue;
    std::string base = under(root, "/sys/devices/system/cpu/" + c + "/topology/"), pk, co;
    if (!readLine(base + "physical_package_id", &pk)) continue;
    readLine(base + "core_id", &co);
    pus++;
    pkgs.insert(pk);
    cores.insert(pk + ":" + co);
  }
  sys->packages = static_cast<int>(pkgs.size());
  sys->cores = static_cast<int>(cores.size());
  sys->pus = pus;
  std::string arch;
#if defined(__x86_64__)
  arch = "x86_64";
#elif defined(__aarch64__)
  arch = "arm64";
#elif defined(__powerpc64__)
  arch = "ppc64";
#endif
  for (auto& nd : listDir(under(root, "/sys/devices/system/node"))) {
    if (nd.rfind("node", 0) != 0 || nd.size() < 5) continue;
    std::string cpulist;
    readLine(under(root, "/sys/devices/system/node/" + nd + "/cpulist"), &cpulist);
    if (cpulist.empty()) {
      sys->memory_numa_nodes++;
      continue;
    }
    Cpu c;
    c.numaid = atoi(nd.c_str() + 4);
    c.arch = arch;
    addCpu(sys, c);
  }
  if (sys->cpus.empty()) {
    Cpu c;
    c.numaid = 0;
    c.arch = arch;
    addCpu(sys, c);
    say(sys, "no NUMA information in /sys/devices/system/node: one NUMA node assumed");
  }
}

// Network interfaces with a PCI device, from /sys/class/net, when hwloc is absent.
void netFromSysfs(System* sys, const std::string& root) {
  for (auto& ifc : listDir(under(root, "/sys/class/net"))) {
    std::string dev = under(root, "/sys/class/net/" + ifc + "/device");
    if (access(dev.c_str(), F_OK) != 0) continue;  // virtual (lo, bridges, ifb)
    Nic nic;
    nic.pci.busid = busIdOfSysfsDevice(dev);
    nic.parent = NodeRef{NodeKind::kCpu, 0};
    int k = addNic(sys, nic).index;
    Net net;
    net.nic = k;
    net.name = ifc;
    net.link_layer = LinkLayer::kEthernet;
    addNet(sys, net);
  }
}

void pciLinksFromSysfs(System* sys, const std::string& root) {
  int read = 0, missing = 0;
  auto fill = [&](PciInfo* p) {
    if (p->busid.empty()) return;
    std::string base = under(root, "/sys/bus/pci/devices/" + p->busid + "/"), sp, wd;
    // sysfs writes 4-digit domains; a normalised id already has them.
    bool okS = readLine(base + "current_link_speed", &sp);
    bool okW = readLine(base + "current_link_width", &wd);
    double gts = 0, lanes = 0;
    if (okS && !(text::leadingDouble(sp, &gts) && text::plausiblePcieSpeed(gts))) gts = 0;
    if (okW && !(text::leadingDouble(wd, &lanes) && text::plausiblePcieWidth(lanes))) lanes = 0;
    int w = static_cast<int>(lanes);
    if (gts > 0 && w > 0) {
      p->link_speed_gts = gts;
      p->link_width = w;
      p->link_speed_text = sp;
      p->has_link_speed = p->has_link_width = true;
      read++;
    } else {
      p->link_speed_gts = 0;
      p->link_width = 0;
      p->has_link_speed = p->has_link_width = false;
      p->link_speed_text.clear();
      missing++;
    }
  };
  for (auto& x : sys->pcis) fill(&x.pci);
  for (auto& x : sys->gpus) fill(&x.pci);
  for (auto& x : sys->nvswitches) fill(&x.pci);
  for (auto& x : sys->nics) fill(&x.pci);
  // The hwloc export's GB/s split is replaced by sysfs' exact values.
  std::erase_if(sys->notes,
                [](const std::string& s) { return s.rfind("PCI link speeds are hwloc", 0) == 0; });
  if (read + missing > 0)
    say(sys, "PCI link speed/width from sysfs: " + std::to_string(read) + " read, " +
                 std::to_string(missing) + " unknown (no current_link_speed/width, e.g. virtio)");
}

void ethSpeedFromSysfs(System* sys, const std::string& root) {
  for (auto& net : sys->nets) {
    if (net.link_layer == LinkLayer::kInfiniBand) continue;
    // The kernel driver says what the NIC is where nothing else does (virtio_net in a VM).
    char link[512];
    std::string dpath = under(root, "/sys/class/net/" + net.name + "/device/driver");
    ssize_t n = readlink(dpath.c_str(), link, sizeof(link) - 1);
    if (n > 0) {
      link[n] = 0;
      const char* base = strrchr(link, '/');
      std::string driver = base ? base + 1 : link;
      bool have = false;
      for (const auto& kv : net.extra) have |= kv.first == "driver";
      if (!have) net.extra.emplace_back("driver", driver);
      say(sys, "network " + net.name + ": driver " + driver);
    }
    if (net.speed_gbps > 0) continue;
    std::string s;
    bool ok = readLine(under(root, "/sys/class/net/" + net.name + "/speed"), &s);
    long mbps = ok ? atol(s.c_str()) : -1;
    if (ok && plausibleNetGbps(mbps / 1000.0)) {
      net.speed_gbps = mbps / 1000.0;
      say(sys, "network " + net.name + ": " + std::to_string(mbps) + " Mb/s (sysfs)");
    } else {
      say(sys, "network " + net.name + ": speed unknown (/sys/class/net/" + net.name + "/speed " +
                   (ok ? "says " + s : std::string("unreadable")) + ")");
    }
  }
}

// NUMA nodes with memory but no CPU in sysfs (NVIDIA GPU memory on POWER9, CXL). hwloc hides
// NVIDIA's GPU NUMA nodes by default (HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES), so they are counted
// here when hwloc reported none.
void memoryNumaFromSysfs(System* sys, const std::string& root) {
  if (sys->memory_numa_nodes > 0) return;
  int n = 0;
  for (auto& nd : listDir(under(root, "/sys/devices/system/node"))) {
    if (nd.rfind("node", 0) != 0 || nd.size() < 5 || !isdigit(static_cast<unsigned char>(nd[4])))
      continue;
    std::string cpulist, meminfo;
    bool okC = readLine(under(root, "/sys/devices/system/node/" + nd + "/cpulist"), &cpulist);
    bool okM = readLine(under(root, "/sys/devices/system/node/" + nd + "/meminfo"), &meminfo);
    if (okC && cpulist.empty() && okM) n++;
  }
  if (n > 0) {
    sys->memory_numa_nodes = n;
    say(sys, std::to_string(n) +
                 " NUMA node(s) with memory and no CPU in sysfs (GPU memory or CXL; hwloc hides "
                 "NVIDIA GPU NUMA nodes): counted in memory_numa_nodes, not as CPUs");
  }
}

// hwloc's KEEP_IMPORTANT filter on a 24-bit PCI class (hwloc_filter_check_pcidev_subtype_
// important, bridges aside): storage, network, display, processors, accelerators, fibre
// channel, InfiniBand, CXL memory; NVIDIA's NVSwitch (0x0680) kept too.
bool importantPciClass(uint32_t klass, int vendor) {
  uint32_t base = klass >> 16, sub = klass >> 8;
  return base == 0x01 || base == 0x02 || base == 0x03 || base == 0x0b || base == 0x12 ||
         sub == 0x0c04 || sub == 0x0c06 || sub == 0x0502 || (vendor == 0x10de && sub == 0x0680);
}

// The PCI bus ids hwloc's XML export lists as PCIDev objects.
std::vector<std::string> pciDevicesOfHwlocXml(const std::string& xml) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = xml.find("type=\"PCIDev\"", pos)) != std::string::npos) {
    size_t end = xml.find('>', pos);
    size_t at = xml.find("pci_busid=\"", pos);
    pos += 13;
    if (at == std::string::npos || (end != std::string::npos && at > end)) continue;
    at += 11;
    size_t q = xml.find('"', at);
    std::string norm;
    if (q != std::string::npos && normalizeBusId(xml.substr(at, q - at), &norm))
      out.push_back(norm);
  }
  return out;
}

// PCI devices from /sys/bus/pci/devices that pass importantPciClass: every one (wideOnly false,
// no hwloc), or only those whose domain needs more than 16 bits (10000:00:04.0: Intel VMD,
// Hyper-V), which hwloc built without --enable-32bits-pci-domain drops. They are added to
// System::pci_devices; a wide-domain NVSwitch becomes a node, and a wide-domain network function
// with netdevs a Nic (RDMA devices find theirs by bus id later).
void pciDevicesFromSysfs(System* sys, const std::string& root, bool wideOnly) {
  std::string dir = under(root, "/sys/bus/pci/devices");
  std::map<std::string, std::vector<std::string>> netdevs;  // bus id -> interfaces
  for (auto& ifc : listDir(under(root, "/sys/class/net"))) {
    std::string b = busIdOfSysfsDevice(under(root, "/sys/class/net/" + ifc + "/device"));
    if (!b.empty()) netdevs[b].push_back(ifc);
  }
  int wide = 0;
  for (auto& d : listDir(dir)) {
    size_t colon = d.find(':');
    bool isWide = colon != std::string::npos && colon > 4;
    std::string busid;
    if ((wideOnly && !isWide) || !normalizeBusId(d, &busid)) continue;
    std::string cls, ven, dev, numa;
    readLine(dir + "/" + d + "/class", &cls);
    readLine(dir + "/" + d + "/vendor", &ven);
    readLine(dir + "/" + d + "/device", &dev);
    uint32_t klass = static_cast<uint32_t>(strtoul(cls.c_str(), nullptr, 16));
    int vendor = ven.empty() ? -1 : static_cast<int>(strtol(ven.c_str(), nullptr, 16));
    if (!importantPciClass(klass, vendor)) continue;
    bool known = std::find(sys->pci_devices.begin(), sys->pci_devices.end(), busid) !=
                 sys->pci_devices.end();
    if (known) continue;  // hwloc built with 32-bit domains has it
    sys->pci_devices.push_back(busid);
    if (!isWide || findByBusId(*sys, busid).valid()) continue;
    wide++;
    PciInfo pi;
    pi.busid = busid;
    pi.class_code = klass;
    pi.vendor = vendor;
    if (!dev.empty()) pi.device = static_cast<int>(strtol(dev.c_str(), nullptr, 16));
    NodeRef parent;
    if (readLine(dir + "/" + d + "/numa_node", &numa) && atoi(numa.c_str()) >= 0)
      for (size_t i = 0; i < sys->cpus.size(); i++)
        if (sys->cpus[i].numaid == atoi(numa.c_str()))
          parent = NodeRef{NodeKind::kCpu, static_cast<int>(i)};
    if (!parent.valid() && !sys->cpus.empty()) parent = NodeRef{NodeKind::kCpu, 0};
    if (vendor == 0x10de && (klass >> 8) == 0x0680) {
      NvSwitch sw;
      sw.pci = pi;
      sw.parent = parent;
      addNvSwitch(sys, sw);
    } else if (netdevs.count(busid)) {
      Nic nic;
      nic.pci = pi;
      nic.parent = parent;
      int k = addNic(sys, nic).index;
      for (auto& ifc : netdevs[busid]) {
        Net net;
        net.nic = k;
        net.name = ifc;
        net.link_layer = LinkLayer::kEthernet;
        addNet(sys, net);
      }
    }
  }
  if (wide > 0)
    say(sys, std::to_string(wide) +
                 " PCI device(s) with a 32-bit domain from sysfs (this hwloc keeps 16-bit "
                 "domains only)");
}

// The Nic for a PCI bus id (created under CPU 0 when absent), -1 when busid is empty and
// no Cpu exists.
int nicFor(System* sys, const std::string& busid, const std::string& devName) {
  if (!busid.empty()) {
    for (size_t i = 0; i < sys->nics.size(); i++)
      if (sys->nics[i].pci.busid == busid) return static_cast<int>(i);
  }
  for (auto& net : sys->nets)
    if (net.name == devName) return net.nic;
  Nic nic;
  nic.pci.busid = busid;
  if (!sys->cpus.empty()) nic.parent = NodeRef{NodeKind::kCpu, 0};
  return addNic(sys, nic).index;
}

// The Net of (device, port): an existing one by name and port (or port -1), else a new one.
Net* netFor(System* sys, int nic, const std::string& name, int port) {
  for (auto& net : sys->nets)
    if (net.name == name && (net.port == port || net.port < 0)) return &net;
  Net net;
  net.nic = nic;
  net.name = name;
  net.port = port;
  int k = addNet(sys, net).index;
  return &sys->nets[k];
}

}  // namespace

braidResult_t detectIbFromSysfs(const std::string& root, System* out, int* count) {
  if (!out) return fail(braidInvalidArgument, "detectIbFromSysfs: out is null");
  int found = 0;
  for (auto& dev : listDir(root)) {
    std::string base = root + "/" + dev;
    std::vector<std::string> ports = listDir(base + "/ports");
    if (ports.empty()) continue;
    found++;
    std::string busid = busIdOfSysfsDevice(base + "/device");
    int nic = nicFor(out, busid, dev);
    std::string guid;
    readLine(base + "/node_guid", &guid);
    for (auto& p : ports) {
      Net* net = netFor(out, nic, dev, atoi(p.c_str()));
      net->port = atoi(p.c_str());
      std::string pb = base + "/ports/" + p + "/", state, rate, ll;
      readLine(pb + "state", &state);
      readLine(pb + "rate", &rate);
      readLine(pb + "link_layer", &ll);
      if (!guid.empty()) {  // "ec0d:9a03:0049:a212" -> "0xec0d9a030049a212"
        guid.erase(std::remove(guid.begin(), guid.end(), ':'), guid.end());
        net->guid = "0x" + guid;
      }
      if (ll == "InfiniBand")
        net->link_layer = LinkLayer::kInfiniBand;
      else if (ll == "Ethernet")
        net->link_layer = LinkLayer::kEthernet;
      double gbps = rate.empty() ? 0 : atof(rate.c_str());  // "400 Gb/sec (4X NDR)"
      if (plausibleNetGbps(gbps)) net->speed_gbps = gbps;
      if (state.find("ACTIVE") == std::string::npos) {
        std::string line = dev + " port " + p + ": state " + (state.empty() ? "unknown" : state);
        BRAID_INFO("TOPO", "%s", line.c_str());
        out->notes.push_back(line);
      }
      if (busid.empty()) {
        std::string line = dev + ": no PCI device link in sysfs, PCI locality unknown";
        if (std::find(out->notes.begin(), out->notes.end(), line) == out->notes.end())
          out->notes.push_back(line);
      }
    }
  }
  if (count) *count = found;
  return braidSuccess;
}

namespace {

#ifdef BRAID_HAVE_IBVERBS
// Gb/s per lane of ibv_port_attr::active_speed, and lanes of active_width.
double ibLaneGbps(int speed) {
  switch (speed) {
    case 1:
      return 2.5;  // SDR
    case 2:
      return 5;  // DDR
    case 4:
    case 8:
      return 10;  // QDR, FDR10
    case 16:
      return 14;  // FDR
    case 32:
      return 25;  // EDR
    case 64:
      return 50;  // HDR
    case 128:
      return 100;  // NDR
    case 256:
      return 200;  // XDR
    default:
      return 0;
  }
}
int ibLanes(int width) {
  switch (width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

// False when libibverbs reports no device list at all.
int ibFromVerbs(System* sys) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return 0;
  int found = 0;
  for (int i = 0; i < n; i++) {
    const char* name = ibv_get_device_name(list[i]);
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      say(sys, std::string("RDMA device ") + name + ": cannot be opened");
      continue;
    }
    found++;
    ibv_device_attr da{};
    std::string busid =
        busIdOfSysfsDevice(std::string("/sys/class/infiniband/") + name + "/device");
    int nic = nicFor(sys, busid, name);
    char guid[24] = {};
    snprintf(guid, sizeof guid, "0x%016llx",
             static_cast<unsigned long long>(be64toh(ibv_get_device_guid(list[i]))));
    if (ibv_query_device(ctx, &da) == 0) {
      for (int p = 1; p <= da.phys_port_cnt; p++) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
        Net* net = netFor(sys, nic, name, p);
        net->port = p;
        net->guid = guid;
        net->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet
                                                                   : LinkLayer::kInfiniBand;
        double g = ibLaneGbps(pa.active_speed) * ibLanes(pa.active_width);
        if (g > 0) net->speed_gbps = g;
        std::string line =
            std::string("RDMA ") + name + " port " + std::to_string(p) + ": " +
            ibv_port_state_str(pa.state) + ", " + linkLayerName(net->link_layer) + ", " +
            (g > 0 ? std::to_string(static_cast<int>(g)) + " Gb/s" : "speed unknown");
        say(sys, line);
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return found;
}
#endif

}  // namespace

braidResult_t detectSystem(System* out) { return detectSystemAt("/", out); }

braidResult_t detectSystemAt(const std::string& fsroot, System* out) {
  if (!out) return fail(braidInvalidArgument, "detectSystemAt: out is null");
  const bool live = fsroot.empty() || fsroot == "/";
  const std::string root = live ? std::string("/") : fsroot;
  if (!live) {
    std::vector<std::string> top = listDir(root);
    bool hasSys = std::find(top.begin(), top.end(), "sys") != top.end();
    if (!hasSys)
      return fail(braidInvalidArgument, "detectSystemAt: %s has no sys/ directory", root.c_str());
  }
  System sys;

  // NVML first: its GPUs mark PCI devices that hwloc (without a CUDA/NVML plugin) would only
  // see as 3D controllers.
  std::vector<NvmlGpu> nvml;
  std::string nvmlWhy = "NVML not queried (filesystem root " + root + ")";
  bool haveNvml = live && queryNvml(&nvml, &nvmlWhy);
  std::vector<std::string> gpuBusIds;
  for (auto& g : nvml) gpuBusIds.push_back(g.busid);

  bool cpuDone = false;
#ifdef BRAID_HAVE_HWLOC
  {
    hwloc_topology_t t;
    std::string why;
    if (hwloc_topology_init(&t) != 0) {
      why = "hwloc_topology_init failed";
    } else {
      hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
      // hwloc 2 dropped hwloc_topology_set_fsroot: its Linux component reads HWLOC_FSROOT
      // when the topology is loaded, so the variable is set around the load only.
      // The x86 backend reads this CPU's cpuid, not the root's: off for another root (hwloc's
      // own fsroot tests do the same), so vendor and model come from the root's /proc/cpuinfo.
      if (!live) hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
      int loaded;
      {
        static std::mutex envMutex;
        std::lock_guard<std::mutex> lock(envMutex);
        const char* prev = getenv("HWLOC_FSROOT");
        std::string saved = prev ? prev : "";
        if (!live) setenv("HWLOC_FSROOT", root.c_str(), 1);
        loaded = hwloc_topology_load(t);
        if (!live) {
          if (prev)
            setenv("HWLOC_FSROOT", saved.c_str(), 1);
          else
            unsetenv("HWLOC_FSROOT");
        }
      }
      if (loaded != 0) {
        why = "hwloc_topology_load failed";
      } else {
        char* buf = nullptr;
        int len = 0;
        if (hwloc_topology_export_xmlbuffer(t, &buf, &len, 0) != 0 || !buf) {
          why = "hwloc XML export failed";
        } else {
          std::string xml(buf, len > 0 ? static_cast<size_t>(len - 1) : 0);
          hwloc_free_xmlbuffer(t, buf);
          braidResult_t rc = detail::loadHwlocXmlDetected(
              xml, live ? "hwloc (this machine)" : "hwloc (fsroot " + root + ")", gpuBusIds, &sys);
          if (rc != braidSuccess) {
            why = std::string("hwloc export not understood: ") + lastError();
          } else {
            cpuDone = true;
            sys.pci_devices = pciDevicesOfHwlocXml(xml);
          }
        }
      }
      hwloc_topology_destroy(t);
    }
    if (cpuDone) {
      std::vector<std::string> fromXml;
      fromXml.swap(sys.notes);
      say(&sys, "hwloc " + std::string(HWLOC_VERSION) + ": " + std::to_string(sys.packages) +
                    " package(s), " + std::to_string(sys.cores) + " core(s), " +
                    std::to_string(sys.pus) + " PU(s), " + std::to_string(sys.cpus.size()) +
                    " NUMA node(s)");
      for (auto& s : fromXml)
        if (s != "no GPU in the file" && s.find("NIC port speeds") == std::string::npos &&
            s.find("PCI link speed") == std::string::npos)  // sysfs says these below
          say(&sys, s);
    } else {
      say(&sys, "hwloc not usable (" + why + "): CPU and NIC layout from sysfs");
    }
  }
#else
  say(&sys, "hwloc not available (built without libhwloc-dev): CPU and NIC layout from sysfs");
#endif
  if (!cpuDone) {
    std::vector<std::string> keep = std::move(sys.notes);
    sys = System{};
    sys.notes = std::move(keep);
    cpuFromSysfs(&sys, root);
    netFromSysfs(&sys, root);
    std::string host;
    if (live) {
      char buf[256] = {};
      gethostname(buf, sizeof buf - 1);
      host = buf;
    } else if (!readLine(under(root, "/proc/sys/kernel/hostname"), &host)) {
      host = "host0";
    }
    sys.hosts.push_back(Host{host, ""});
    say(&sys, "sysfs: " + std::to_string(sys.packages) + " package(s), " +
                  std::to_string(sys.cores) + " core(s), " + std::to_string(sys.cpus.size()) +
                  " NUMA node(s)");
  }
  sys.source = live ? "detected" : "detected (fsroot " + root + ")";
  if (!live)
    say(&sys, "filesystem root " + root +
                  ": NVML and libibverbs skipped (they see only this machine); RDMA devices from "
                  "its /sys/class/infiniband");
  memoryNumaFromSysfs(&sys, root);
  // Without hwloc every PCI device comes from sysfs; with it, those hwloc cannot represent.
  pciDevicesFromSysfs(&sys, root, cpuDone);

  // GPUs: NVML's details, NVLinks.
  if (!haveNvml) say(&sys, nvmlWhy);
  for (auto& g : nvml) {
    NodeRef r = findByBusId(sys, g.busid);
    if (r.kind != NodeKind::kGpu) {
      Gpu gpu;
      gpu.pci.busid = g.busid;
      gpu.parent = NodeRef{NodeKind::kCpu, 0};
      r = addGpu(&sys, gpu);
      say(&sys, "GPU " + g.busid + " (NVML) not in the PCI tree: locality unknown");
    }
    Gpu& gpu = sys.gpus[r.index];
    if (!g.name.empty()) gpu.model = g.name;
    gpu.sm = g.sm;
    if (gpu.dev < 0) gpu.dev = g.index;
  }
  int nvlinks = 0;
  for (auto& g : nvml) {
    NodeRef a = findByBusId(sys, g.busid);
    for (auto& [rb, cnt] : g.linksTo) {
      NodeRef b = findByBusId(sys, rb);
      int type = g.remoteType.count(rb) ? g.remoteType[rb] : -1;
      if (b.kind == NodeKind::kGpu) {
        if (!(a < b)) continue;  // each GPU pair once (both ends report it)
      } else if (type == 1) {    // POWER9: NVLink to the CPU (IBM NPU)
        b = cpuOf(sys, a);
        if (!b.valid()) b = NodeRef{NodeKind::kCpu, 0};
      } else {
        if (b.kind != NodeKind::kNvSwitch) {
          NvSwitch sw;
          sw.pci.busid = rb;
          b = addNvSwitch(&sys, sw);
        }
      }
      addNvLink(&sys, a, b, cnt);
      nvlinks += cnt;
    }
  }
  if (sys.gpus.empty())
    say(&sys, "no GPU found");
  else
    say(&sys, std::to_string(sys.gpus.size()) + " GPU(s), " + std::to_string(nvlinks) +
                  " active NVLink(s)" + (haveNvml ? "" : " (NVML absent: NVLinks unknown)"));

  // RDMA devices.
  int rdma = 0;
  if (!live) {
    detectIbFromSysfs(under(root, "/sys/class/infiniband"), &sys, &rdma);
  } else {
#ifdef BRAID_HAVE_IBVERBS
    rdma = ibFromVerbs(&sys);
#else
    say(&sys, "libibverbs not built in: RDMA devices from /sys/class/infiniband");
    detectIbFromSysfs("/sys/class/infiniband", &sys, &rdma);
#endif
  }
  if (rdma == 0) say(&sys, "no RDMA device");

  pciLinksFromSysfs(&sys, root);
  ethSpeedFromSysfs(&sys, root);
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo
