// braid-topo: prints the topology Braid sees (this machine, or a topology file).
//   braid-topo                    detect this machine
//   braid-topo --file FILE        any topology file loadTopologyFile reads (see usage())
//   braid-topo --fsroot DIR       detect from a saved filesystem root (a copy of /sys, /proc)
//   braid-topo --json             one JSON object instead of the text tree and matrix
//   braid-topo --dump OUT         also write the model as NCCL topology XML to OUT
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "braid/braid.h"
#include "braid/braid_model.h"

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: braid-topo [--file FILE | --fsroot DIR] [--json] [--dump OUT]\n"
      "  --file FILE  read a topology file instead of detecting; FILE may be:\n"
      "                 NCCL topology XML (NCCL_TOPO_FILE, <system>, RCCL's <xgmi> too)\n"
      "                 NCCL graph XML (NCCL_GRAPH_FILE, <graphs>)\n"
      "                 hwloc XML (lstopo --of xml, <topology>)\n"
      "                 an hwloc fsroot tarball (.tar.bz2/.tar.gz/.tar.xz of /sys and /proc)\n"
      "                 nvidia-smi topo -m, nvidia-smi topo -p2p r, nvidia-smi nvlink --status\n"
      "                 ibstat, ibstatus, ibv_devinfo (-v), lspci (-nn, -vvv or -tv),\n"
      "                 lstopo text (lstopo -v); tool text may be pasted from a terminal\n"
      "                 (prompt and command lines, CR LF, text after it; docs/topology-text.md)\n"
      "                 a /sys/class/infiniband directory (or a copy of one)\n"
      "  --fsroot DIR detect from a filesystem root holding a copy of /sys and /proc\n"
      "               (NVML and libibverbs are not used)\n"
      "  --json       print JSON (numa_nodes, gpus, nics, paths, rings, trees, graphs)\n"
      "  --dump OUT   write the model as NCCL topology XML (NCCL_TOPO_FILE format); refused\n"
      "               for an NCCL graph file, which gives no PCI placement\n");
}

}  // namespace

int main(int argc, char** argv) {
  // The library logs each failure at BRAID_DEBUG=WARN (its default); this tool prints the
  // failure itself, once, so it keeps the library quiet unless the user asked otherwise.
  setenv("BRAID_DEBUG", "NONE", 0);
  std::string file, dump, fsroot;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--file" || a == "-f") && i + 1 < argc) {
      file = argv[++i];
    } else if (a == "--fsroot" && i + 1 < argc) {
      fsroot = argv[++i];
    } else if (a == "--dump" && i + 1 < argc) {
      dump = argv[++i];
    } else if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "braid-topo: unknown or incomplete argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!file.empty() && !fsroot.empty()) {
    std::fprintf(stderr, "braid-topo: --file and --fsroot exclude each other\n");
    usage(stderr);
    return 2;
  }
  braidTopology_t topo = nullptr;
  braidResult_t rc = braidTopologyLoad(&topo, file.c_str(), fsroot.c_str());
  if (rc != braidSuccess) {
    std::fprintf(stderr, "braid-topo: %s (%s)\n", braidGetLastError(nullptr),
                 braidGetErrorString(rc));
    return 1;
  }
  const char* text = nullptr;
  if (!dump.empty()) {
    if (braidTopologyPrint(topo, braidTopologyNcclXml, &text) != braidSuccess) {
      std::fprintf(stderr, "braid-topo: %s\n", braidGetLastError(nullptr));
      braidTopologyDestroy(topo);
      return 1;
    }
    std::ofstream out(dump, std::ios::binary);
    out << text;
    if (!out) {
      std::fprintf(stderr, "braid-topo: cannot write %s: %s\n", dump.c_str(), std::strerror(errno));
      braidTopologyDestroy(topo);
      return 1;
    }
  }
  rc = braidTopologyPrint(topo, json ? braidTopologyJson : braidTopologyText, &text);
  if (rc == braidSuccess) std::fputs(text, stdout);
  braidTopologyDestroy(topo);
  return rc == braidSuccess ? 0 : 1;
}
