// Text outputs of system tools read into the system model: `nvidia-smi topo -m` and
// `topo -p2p r`, `nvidia-smi nvlink --status`, `ibstat`, `ibstatus`, `ibv_devinfo`,
// `lspci -nn` / `-vvv` / `-tv`, lstopo's console output, and a /sys/class/infiniband snapshot
// directory. Text is read as pasted from a terminal: prompt and command lines, CR LF ends and
// text after the output are allowed (text_util.h splitLines). Each gives part of
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
    if (l.empty()) continue;
    auto w = words(l);
    if (startsWith(l, "CA '")) return "ibstat";
    if (startsWith(l, "Infiniband device '")) return "ibstatus";
    if (w.size() == 2 && w[0] == "hca_id:") return "ibv_devinfo";
    if (isLspciTreeLine(l)) return "lspci-tree";
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
  if (kind == "ibv_devinfo") return loadIbvDevinfo(text, name, out);
  if (kind == "lspci") return loadLspci(text, name, out);
  if (kind == "lspci-tree") return loadLspciTree(text, name, out);
  if (kind == "lstopo") return loadLstopoText(text, name, out);
  std::vector<std::string> ls = splitLines(text.substr(0, 1 << 16));
  size_t first = 0;
  while (first < ls.size() && trim(ls[first]).empty()) ++first;
  if (first == ls.size())
    return fail(braidInvalidArgument, "%s: no text besides blank and shell prompt lines",
                name.c_str());
  return fail(braidInvalidArgument,
              "%s:%zu: '%s': not a known topology format; expected NCCL or hwloc XML, or the "
              "output of nvidia-smi topo -m / -p2p, nvidia-smi nvlink --status, ibstat, "
              "ibstatus, ibv_devinfo, lspci (-nn, -vvv, -tv) or lstopo",
              name.c_str(), first + 1, trim(ls[first]).substr(0, 120).c_str());
}

}  // namespace braid::topo
