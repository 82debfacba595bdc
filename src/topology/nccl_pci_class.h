// What NCCL's topology XML leaves to PCI class codes, shared by its reader (nccl_xml.cc) and
// its writer (nccl_xml_dump.cc): the class of an NVSwitch, and the link layer that a NIC's
// class, else its interface name, implies.
#pragma once

#include <cstdint>
#include <string>

#include "topology/topology.h"

namespace braid::topo {

constexpr uint32_t kClassNvSwitch = 0x068000;

inline LinkLayer guessLinkLayer(uint32_t cls, const std::string& name) {
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

}  // namespace braid::topo
