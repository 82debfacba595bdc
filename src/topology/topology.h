// The system model Braid plans over: hosts, CPUs (NUMA nodes), the PCIe tree, GPUs,
// NVSwitches, NICs and their network ports, joined by typed links with a bandwidth.
// Loaders (NCCL topology XML here, hwloc XML in hwloc_xml.cc, live detection in detect.cc)
// fill the node vectors and the NVLink links, then call connectSystem(), which derives the
// PCIe, CPU-interconnect and network links and every link's bandwidth.
//
// The node kinds and path classes follow NCCL's graph model (src/graph/topo.h, paths.cc);
// bandwidths are NCCL's constants, in GB/s (1e9 bytes/s), listed with their source below.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.h"

namespace braid::topo {

enum class NodeKind : uint8_t { kNone, kCpu, kPci, kGpu, kNvSwitch, kNic, kNet };
const char* nodeKindName(NodeKind kind);

// A typed index: which vector (kind) and where in it (index).
struct NodeRef {
  NodeKind kind = NodeKind::kNone;
  int index = -1;
  bool valid() const { return kind != NodeKind::kNone && index >= 0; }
  friend bool operator==(const NodeRef&, const NodeRef&) = default;
  friend auto operator<=>(const NodeRef&, const NodeRef&) = default;
};

// Attributes an element carried that the model has no field for (host_hash, gcn, ...): kept
// so a dump writes them back.
using ExtraAttrs = std::vector<std::pair<std::string, std::string>>;

struct Host {
  std::string name;  // hostname where known, else "host0", ...
  std::string hash;  // NCCL host_hash attribute where given
};

// One <cpu> of NCCL's model: a NUMA node with its CPU package properties.
struct Cpu {
  int host = 0;
  int numaid = -1;       // -1 when unknown
  int package = -1;      // physical package (socket) where known
  std::string affinity;  // cpumask as NCCL writes it: "000000ff,ffff0000"; empty if unknown
  std::string arch;      // "x86_64", "arm64", "ppc64"
  std::string vendor;    // "GenuineIntel", "AuthenticAMD"
  int family = -1;       // NCCL familyid (base + extended<<4 on AMD), -1 if unknown
  int model = -1;        // NCCL modelid
  ExtraAttrs extra;
  int seq = 0;  // creation order, so a dump keeps the file's order
};

// PCI identity and upstream link of a device. Class 0 means "not given".
struct PciInfo {
  std::string busid;        // normalised: lowercase, domain at least 4 hex digits "0000:17:00.0"
  uint32_t class_code = 0;  // 24-bit class: 0x060400 bridge, 0x030200 3D ctrl, 0x020700 IB
  int vendor = -1, device = -1, subsystem_vendor = -1, subsystem_device = -1;  // -1: absent
  double link_speed_gts = 0;    // per-lane GT/s of the link to the parent, 0 if unknown
  int link_width = 0;           // lanes, 0 if unknown
  std::string link_speed_text;  // the attribute as written ("32 GT/s PCIe/s"), for dumps
  bool has_link_speed = false, has_link_width = false;  // attribute present in the source
};

// A PCIe switch, bridge, or a PCI device of no kind the model knows (NCCL's PCI node).
struct Pci {
  PciInfo pci;
  NodeRef parent;  // a Cpu or another Pci
  ExtraAttrs extra;
  int seq = 0;
  // Virtual switches in cloud files use busids like ffff:ff:01.0.
  bool isBridge() const { return (pci.class_code >> 8) == 0x0604; }
  // A PCIe host bridge (root complex) under a NUMA node: class 0x0600. Readers add one only
  // where a source tells host bridges apart (nvidia-smi's NODE), so paths between them are NODE.
  bool isHostBridge() const { return (pci.class_code >> 8) == 0x0600; }
};

struct Gpu {
  int host = 0;
  PciInfo pci;           // busid empty when the GPU was given without a PCI element
  NodeRef parent;        // a Cpu or Pci
  int dev = -1;          // CUDA/HIP device index, -1 unknown
  int sm = -1;           // compute capability x10 (80 = A100, 90 = H100); -1 unknown
  int rank = -1;         // NCCL rank in the dump, -1 unknown
  int gdr = -1;          // GPUDirect RDMA support: 1, 0, -1 unknown
  std::string model;     // "NVIDIA A100-SXM4-80GB" where known
  ExtraAttrs extra;      // <gpu> attributes not modelled (gcn, arch, ...)
  ExtraAttrs pci_extra;  // <pci> attributes not modelled
  int seq = 0;
};

// An NVSwitch, known from a PCI element of class 0x0680xx or from NVLink targets.
struct NvSwitch {
  int host = 0;
  PciInfo pci;
  NodeRef parent;  // kNone when known only as an NVLink target
  int seq = 0;
};

enum class LinkLayer : uint8_t { kUnknown, kInfiniBand, kEthernet };
const char* linkLayerName(LinkLayer layer);

// A network port of a NIC (NCCL's <net>).
struct Net {
  int nic = -1;      // index into System::nics
  std::string name;  // "mlx5_0", "eth0", "rdmap79s0"
  int dev = -1;      // NCCL net device index
  int port = -1;
  double speed_gbps = 0;  // Gb/s (NCCL writes Mb/s in "speed")
  LinkLayer link_layer = LinkLayer::kUnknown;
  std::string guid;  // as written ("0x1e95b50003fd7010", "0")
  int gdr = -1;
  double latency_us = 0;
  bool has_latency = false;
  int maxconn = -1;
  ExtraAttrs extra;
};

struct Nic {
  int host = 0;
  PciInfo pci;            // busid empty for a <nic> without a PCI element (a VM's eth0)
  NodeRef parent;         // a Cpu or Pci
  std::vector<int> nets;  // indices into System::nets
  ExtraAttrs pci_extra;
  int seq = 0;
};

enum class LinkType : uint8_t { kNvLink, kXgmi, kPcie, kCpu, kNet };
const char* linkTypeName(LinkType type);

// An undirected link. For kNvLink/kXgmi, count = number of links and version = NVLink
// generation (from the SM); for kPcie, version = PCIe generation and width = lanes; kCpu
// joins two NUMA nodes of a host; kNet joins a Nic to one of its Nets.
struct Link {
  NodeRef a, b;
  LinkType type = LinkType::kPcie;
  int count = 1;
  int version = 0;
  int width = 0;
  double bw_gbs = 0;  // GB/s, one direction
};

// NCCL's path classes (src/graph/topo.h), ordered from closest to farthest:
//   LOC same device; NVL NVLink (directly or through NVSwitches); NVB NVLink through an
//   intermediate GPU; PIX at most one PCIe switch; PXB several PCIe switches, no CPU;
//   PHB through a CPU host bridge; NODE across host bridges within one NUMA node (nvidia-smi's
//   class, which NCCL counts as PHB); SYS across the CPU interconnect; NET across the network.
enum class PathClass : uint8_t { kLoc, kNvl, kNvb, kPix, kPxb, kPhb, kNode, kSys, kNet, kDis };
const char* pathClassName(PathClass c);

struct Path {
  PathClass cls = PathClass::kDis;
  double bw_gbs = 0;  // bottleneck bandwidth along the path, GB/s
  int hops = 0;
};

// NCCL's graph search patterns (src/graph/topo.h NCCL_TOPO_PATTERN_*): 1 BALANCED_TREE (tree,
// split across NICs), 2 SPLIT_TREE, 3 TREE (all on one NIC), 4 RING, 5 NVLS, 6 COLLNET_DIRECT.
enum GraphPattern : int {
  kPatternBalancedTree = 1,
  kPatternSplitTree = 2,
  kPatternTree = 3,
  kPatternRing = 4,
  kPatternNvls = 5,
  kPatternCollnetDirect = 6,
};
// "RING", "TREE", ...; "UNKNOWN" for a number NCCL does not define.
const char* graphPatternName(int pattern);

// One channel of an NCCL graph (NCCL_GRAPH_FILE <channel>): the GPUs in order (CUDA device
// indices) and the network devices it enters and leaves by (NCCL net device indices).
struct GraphChannel {
  std::vector<int> gpus;
  std::vector<int> nets;
};

// One <graph> of an NCCL graph file: what NCCL's search found (or was told) for one pattern.
struct NcclGraph {
  int id = -1;        // NCCL's graph index (0 ring, 1 tree, 2 collnet chain, ...)
  int pattern = 0;    // GraphPattern
  int nchannels = 0;  // as written; channels.size() may differ (noted)
  double speedintra = 0, speedinter = 0;  // GB/s per channel
  std::string typeintra, typeinter;       // path class names ("NVL", "SYS", "PIX")
  bool crossnic = false;
  std::vector<GraphChannel> channels;
};

struct System {
  std::vector<Host> hosts;
  std::vector<Cpu> cpus;
  std::vector<Pci> pcis;
  std::vector<Gpu> gpus;
  std::vector<NvSwitch> nvswitches;
  std::vector<Nic> nics;
  std::vector<Net> nets;
  std::vector<Link> links;
  std::string source;              // file path, or "detected"
  std::vector<std::string> notes;  // what could not be read or was guessed, one line each
  int version = 1;                 // NCCL <system version=...>
  int next_seq = 0;                // for Cpu/Pci/Gpu/NvSwitch/Nic::seq
  // Machine counts from hwloc XML and detection (-1 unknown); not part of NCCL's model, so
  // neither dumped nor fingerprinted. cpus are the NUMA nodes with CPUs; memory_numa_nodes
  // counts NUMA nodes with memory only (GPU memory on POWER9, CXL), which are not Cpus.
  int packages = -1, cores = -1, pus = -1, memory_numa_nodes = 0;
  // Detection only: bus ids of the PCI devices found (hwloc's KEEP_IMPORTANT filter: storage,
  // network, display, accelerators...), modelled or not; 32-bit domains kept (10000:00:04.0).
  std::vector<std::string> pci_devices;
  // hwloc's NUMALatency matrix over cpus (relative, 10 = local), [cpus][cpus]; empty if none.
  std::vector<std::vector<uint32_t>> numa_latency;
  // NCCL graph files only (loadNcclGraphXml): the graphs as written. Its GPUs are dev 0..max and
  // its NICs one per net dev, none placed on a PCI tree.
  std::vector<NcclGraph> graphs;
};

// ---- Bandwidth facts (GB/s), from NCCL src/graph/topo.h and topo.cc ----
// PCIe: NCCL rates a link at width * (per-lane Mb/s / 100) / 80, i.e. 12 GB/s for gen3 x16,
// 24 for gen4 x16, 48 for gen5 x16; an unknown speed counts as gen3, an unknown width as x16.
// Any input is defined: a width <= 0 is x16, a speed <= 0 gen3.
double pcieBw(double gts, int width);
// What pcieBw rates an unknown width and speed (0) as: x16, and gen3's 8 GT/s.
inline constexpr int kUnknownPcieWidthAs = 16;
inline constexpr int kUnknownPcieGenAs = 3;
// The widest PCIe link (x32, PCIe base spec); loaders refuse or drop wider widths.
inline constexpr int kMaxPcieWidth = 32;
// What readers take as a network port's speed: (0, 10000] Gb/s (10 Tb/s, far past any NIC);
// anything else (NaN, infinities, 1e308) is refused or read as unknown, so no figure of the
// cost model becomes NaN or overflows what prints it.
inline bool plausibleNetGbps(double gbps) { return gbps > 0 && gbps <= 10000; }
int pcieGeneration(double gts);  // 2.5->1, 5->2, 8->3, 16->4, 32->5, 64->6; 0 unknown
// NVLink per link by SM: sm60 18, sm70 20, sm80 20, sm86 12, sm90 20.6, sm100+ 40.1 (NCCL
// SMxx_NVLINK_BW); an unknown SM counts as sm80.
double nvlinkBwPerLink(int sm);
int nvlinkVersion(int sm);  // 60->1, 70->2, 80/86->3, 90->4, 100->5
// RCCL's xGMI per link: 50 GB/s (MI200 class).
double xgmiBwPerLink();
// CPU interconnect by architecture: Intel BDW QPI 6, SKL 10, SPR 22, EMR 40; AMD 16; POWER9
// 32; ARM 6 (NCCL *_QPI_BW, AMD_BW, P9_BW, ARM_BW).
double cpuInterconnectBw(const Cpu& cpu);
// Network: NCCL counts a port at speed/8 (100 Gb/s -> 12.5 GB/s).
double netBw(double speed_gbps);

// ---- Building ----
// Normalises a PCI bus id: lowercase, domain padded to 4 hex digits (32-bit domains such as
// 10000:00:00.0 kept), "bb:dd.f" given a 0000 domain. False when it is not a bus id.
bool normalizeBusId(const std::string& in, std::string* out);
// Appends a node, stamping seq; returns its reference.
NodeRef addCpu(System* sys, Cpu cpu);
NodeRef addPci(System* sys, Pci pci);
NodeRef addGpu(System* sys, Gpu gpu);
NodeRef addNvSwitch(System* sys, NvSwitch sw);
NodeRef addNic(System* sys, Nic nic);
NodeRef addNet(System* sys, Net net);  // also appends it to nics[net.nic].nets
// An NVLink (type kNvLink) or xGMI (kXgmi) between a GPU and a GPU, NVSwitch or CPU.
void addNvLink(System* sys, NodeRef a, NodeRef b, int count, LinkType type = LinkType::kNvLink);
// Derives PCIe links (each device to its parent), CPU-interconnect links (every NUMA pair of
// a host), network links (Nic to Net) and every link's bandwidth; removes links it derived
// before, so it may be called again. Ensures hosts is not empty and gives NVSwitches without a
// PCI class NCCL's 0x068000.
void connectSystem(System* sys);
// Finds a node by normalised bus id among pcis, gpus, nvswitches and nics; kNone if absent.
NodeRef findByBusId(const System& sys, const std::string& busid);

// ---- Loading and dumping ----
// NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE XML (also RCCL's <xgmi> dialect). Errors:
// braidInvalidArgument naming the file, the line and the problem (missing file, malformed
// XML, a graph file, an unknown element, a bad bus id, an NVLink to a GPU that does not
// exist). Tolerated quirks are recorded in System::notes.
braidResult_t loadNcclTopoXml(const std::string& path, System* out);
// Same, from memory; name stands for the file in messages.
braidResult_t loadNcclTopoXmlString(const std::string& text, const std::string& name, System* out);
// NCCL graph file (NCCL_GRAPH_FILE, NCCL_GRAPH_DUMP_FILE; nccl_graph.cc): <graphs version>
// holding <graph id pattern nchannels speedintra speedinter typeintra typeinter crossnic ...>
// elements of <channel>s listing <net dev/> and <gpu dev/>. Fills System::graphs, GPUs dev
// 0..max and a NIC per net dev, without PCI placement (said in notes). Errors:
// braidInvalidArgument naming the file, the line and the problem (malformed XML, a <gpu> or
// <net> dev missing, negative or not a number, a <channel> outside a <graph>, an unknown
// element, a GPU twice in one channel); an nchannels that differs from the channels given is
// noted.
braidResult_t loadNcclGraphXml(const std::string& path, System* out);
braidResult_t loadNcclGraphXmlString(const std::string& text, const std::string& name, System* out);
// The channels of the RING-pattern graphs as rings of GPU indices (empty when there are none).
std::vector<std::vector<int>> graphRings(const System& sys);
// An hwloc Linux fsroot tarball (a saved /sys and /proc, as in hwloc's tests/hwloc/linux;
// archive.cc, libarchive): extracted into a fresh directory under $TMPDIR (default /tmp),
// refusing entries with absolute paths or ".." and stopping at 256 MiB or 200000 entries, then
// read by detectSystemAt on the archive's root (the single top directory holding sys/, or the
// top itself). The directory is removed afterwards, on error too. System::source is the
// archive. Errors: braidInvalidArgument naming the archive and the problem; braidInvalidUsage
// when Braid was built without libarchive (fsrootArchiveSupported() is then false).
braidResult_t loadFsrootArchive(const std::string& path, System* out);
bool fsrootArchiveSupported();
// hwloc XML (lstopo --of xml). Implemented in hwloc_xml.cc.
braidResult_t loadHwlocXml(const std::string& path, System* out);
// Same, from memory; name stands for the file in messages.
braidResult_t loadHwlocXmlString(const std::string& text, const std::string& name, System* out);
// This machine (hwloc, sysfs, NVML where present). Implemented in detect.cc.
braidResult_t detectSystem(System* out);
// The same against a saved filesystem root (a copy of /sys and /proc, hwloc's fsroot; "/" is
// this machine, detectSystem()): hwloc and every sysfs/procfs read use the root; NVML and
// libibverbs, which see only this machine, are skipped (said in notes). Refuses a root without
// sys/.
braidResult_t detectSystemAt(const std::string& fsroot, System* out);
// RDMA devices from a /sys/class/infiniband tree at root (detect.cc; detectSystem uses
// "/sys/class/infiniband" where libibverbs is absent): each device's ports become Nets (state,
// rate -> speed_gbps, link layer), under the Nic of its PCI bus id (the device link) or a new
// Nic. Returns the number of devices found in *count.
braidResult_t detectIbFromSysfs(const std::string& root, System* out, int* count);
// Loads any format: a <topology> root is hwloc, <system> is NCCL topology, <graphs> an NCCL
// graph file; a bzip2/gzip/xz/tar archive an hwloc fsroot tarball (loadFsrootArchive); text is
// sniffed for the tool outputs below; a directory is read as a /sys/class/infiniband snapshot.
// An empty file is refused as "<path>: empty file".
braidResult_t loadTopologyFile(const std::string& path, System* out);
// Tool output (text_formats.cc); name stands for the file in messages. What a format does not
// say is left unknown, and guesses are noted in System::notes.
//   nvidia-smi topo -m: GPUs, NICs (legend names), NUMA nodes, NV# links, PCI switches
//   inferred from PIX/PXB; topo -p2p r: GPUs only.
braidResult_t loadNvidiaSmiTopo(const std::string& text, const std::string& name, System* out);
// nvidia-smi nvlink --status: GPUs and active links per GPU (peers not named).
braidResult_t loadNvidiaSmiNvlinkStatus(const std::string& text, const std::string& name,
                                        System* out);
// ibstat / ibstatus: a NIC per CA, a Net per port (state, rate, link layer, GUID).
braidResult_t loadIbstat(const std::string& text, const std::string& name, System* out);
braidResult_t loadIbstatus(const std::string& text, const std::string& name, System* out);
// ibv_devinfo (-v): a NIC per hca_id, a Net per port (state, link layer, rate from -v's
// active_width x active_speed, node GUID).
braidResult_t loadIbvDevinfo(const std::string& text, const std::string& name, System* out);
// lspci -nn / -vvv: GPUs, NVSwitches, NICs by class; -vvv's bridges, NUMA and LnkSta.
braidResult_t loadLspci(const std::string& text, const std::string& name, System* out);
// lspci -tv (or -t): the PCI tree by domain and bus; GPUs, NVSwitches and NICs by name
// (NVIDIA 3D/VGA, Mellanox/ConnectX/Broadcom/Intel Ethernet), PCI switches from nesting.
braidResult_t loadLspciTree(const std::string& text, const std::string& name, System* out);
// lstopo console output (-v): packages, NUMA nodes, cores, PUs, PCI GPUs and NICs.
braidResult_t loadLstopoText(const std::string& text, const std::string& name, System* out);
// Which of the text formats above text is ("nvidia-smi-topo", "nvidia-smi-p2p",
// "nvlink-status", "ibstat", "ibstatus", "ibv_devinfo", "lspci", "lspci-tree", "lstopo"), ""
// when none; and a load by it. Text may be pasted from a terminal: prompt and command lines,
// CR LF line ends and text after the tool's output are allowed.
std::string sniffTextTopology(const std::string& text);
braidResult_t loadTextTopology(const std::string& text, const std::string& name, System* out);
// A /sys/class/infiniband snapshot directory, through detectIbFromSysfs.
braidResult_t loadSysfsInfinibandDir(const std::string& dir, System* out);
// Writes the model as NCCL topology XML that loadNcclTopoXml reads back to the same model.
// Refuses (braidInvalidUsage) a system from an NCCL graph file: it has no PCI placement.
braidResult_t dumpNcclTopoXml(const System& sys, std::string* xml);

// A canonical text of the model (nodes, attributes, tree, links), independent of node order
// and of source/notes: two systems are the same model iff their fingerprints are equal.
std::string fingerprint(const System& sys);
bool sameModel(const System& a, const System& b);

// ---- Queries ----
struct Paths {
  std::vector<std::vector<Path>> gpu_gpu;  // [gpus][gpus]
  std::vector<std::vector<Path>> gpu_nic;  // [gpus][nics]
  std::vector<std::vector<Path>> cpu_nic;  // [cpus][nics]
  std::vector<int> gpu_cpu;                // each GPU's CPU (NUMA node) index, -1 if none
  std::vector<int> gpu_numa;               // each GPU's numaid, -1 if unknown
  std::vector<int> nearest_nic;  // per GPU: best class, then bandwidth, then index; -1 none
};
// Shortest paths (by hops, then bandwidth, like NCCL's ncclTopoComputePaths); a path only
// passes through a GPU over NVLink (NVB) and never through a NIC; GPUs of different hosts
// are NET apart.
Paths computePaths(const System& sys);
NodeRef cpuOf(const System& sys, NodeRef node);  // the Cpu above a node, kNone if none
// NVLink (or xGMI) peers of a GPU as (gpu index, link count): direct links, plus GPUs sharing
// NVSwitches, counted as the links both GPUs have into the switches they share.
std::vector<std::pair<int, int>> nvlinkPeers(const System& sys, int gpu);
int nvlinkCount(const System& sys, int gpu_a, int gpu_b);  // 0 when not NVLink peers

// One ring per host over its GPUs (GPU indices): follows NVLink neighbours where they exist,
// else keeps GPUs under the same PCIe switch adjacent, then the same NUMA node.
std::vector<std::vector<int>> buildRings(const System& sys, const Paths& paths);
// The order in which the ranks of one host should form a ring, following that host's model ring
// (buildRings): gpuOfRank[r] is rank r's GPU (index into sys.gpus). Returns a permutation of
// 0..n-1 that visits the GPUs in ring order, ranks sharing a GPU next to each other in rank
// order, rotated so that rank 0 comes first (when its GPU is on the ring); the host is that of
// the first rank with a valid GPU, and ranks whose GPU is -1, out of range or on another host
// come last, in rank order. With a subset of the GPUs, the ring restricted to them. Meant for a
// communicator's ring over one host, so it travels NVLink (or the closest PCIe) hops rather
// than rank order; nothing in src/core calls it yet.
std::vector<int> ringOrder(const System& sys, const std::vector<int>& gpuOfRank);
// A binary tree over hosts (heap order: host h's parent is (h-1)/2); each host enters the
// tree through its leader GPU (the GPU closest to a NIC).
struct HostTree {
  std::vector<int> parent;      // per host, -1 for the root
  std::vector<int> leader_gpu;  // per host, a GPU index, -1 if the host has none
};
HostTree buildHostTree(const System& sys, const Paths& paths);

// ---- Printing ----
// One JSON object: numa_nodes, gpus (pci, numa, nvlinks [{peer, count}]), nics (name, pci,
// link_layer, speed_gbps, numa), paths {gpu_gpu, gpu_nic} as class names, rings (a graph
// file's RING channels where it has them, else buildRings), trees (buildHostTree: per host its
// parent and leader GPU), graphs (graph files only: pattern name, channels' GPU devs and nets),
// notes.
std::string toJson(const System& sys);
// The layout as an indented tree, then GPU x GPU and GPU x NIC class matrices like
// `nvidia-smi topo -m`, then notes.
std::string toText(const System& sys);

}  // namespace braid::topo
