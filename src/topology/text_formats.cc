// Text outputs of system tools read into the system model: `nvidia-smi topo -m` and
// `topo -p2p r`, `nvidia-smi nvlink --status`, `ibstat`, `ibstatus`, `lspci -nn` / `-vvv`,
// lstopo's console output, and a /sys/class/infiniband snapshot directory. Each gives part of
// a machine; what a format cannot say (bus ids, link peers, NUMA placement) is left unknown or
// guessed with a line in System::notes. Errors name the file, the line and the problem.
//
// This file recognises a text (sniffTextTopology) and hands it to its loader: nvidia-smi
// in text_smi.cc, InfiniBand tools in text_ib.cc, PCI views in text_pci.cc.

#include "topology/text_util.h"

namespace braid::topo {
using namespace text;  // NOLINT: the shared helpers of the text loaders

// ---------------------------------------------------------------------------------------------

std::string sniffTextTopology(const std::string& text) {
  std::vector<std::string> ls = splitLines(text.substr(0, 1 << 16));
  for (const std::string& raw : ls) {
    std::string l = trim(raw);
    if (l.empty() || startsWith(l, "$ ")) continue;
    auto w = words(l);
    if (startsWith(l, "CA '")) return "ibstat";
    if (startsWith(l, "Infiniband device '")) return "ibstatus";
    if (startsWith(l, "Machine (") || startsWith(l, "Machine L#")) return "lstopo";
    if (w.size() >= 2 && w[0] == "GPU" && !w[1].empty() && w[1].back() == ':' &&
        std::isdigit((unsigned char)w[1][0]))
      return "nvlink-status";
    if (const char* kind = sniffNvidiaSmi(ls, l)) return kind;
    if (isLspciLine(raw)) return "lspci";
    return "";
  }
  return "";
}

braidResult_t loadTextTopology(const std::string& text, const std::string& name, System* out) {
  std::string kind = sniffTextTopology(text);
  if (kind == "nvidia-smi-topo" || kind == "nvidia-smi-p2p")
    return loadNvidiaSmiTopo(text, name, out);
  if (kind == "nvlink-status") return loadNvidiaSmiNvlinkStatus(text, name, out);
  if (kind == "ibstat") return loadIbstat(text, name, out);
  if (kind == "ibstatus") return loadIbstatus(text, name, out);
  if (kind == "lspci") return loadLspci(text, name, out);
  if (kind == "lstopo") return loadLstopoText(text, name, out);
  return fail(braidInvalidArgument,
              "%s: not a known topology format (NCCL or hwloc XML, nvidia-smi topo -m / -p2p, "
              "nvidia-smi nvlink --status, ibstat, ibstatus, lspci, lstopo output)",
              name.c_str());
}

}  // namespace braid::topo
