// GPUs and their NVLinks from NVML, loaded at run time (dlopen("libnvidia-ml.so.1"), no link
// dependency), for live detection (detect.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace braid::topo {

struct NvmlGpu {
  std::string busid, name;
  int sm = -1;
  int index = -1;
  std::map<std::string, int> linksTo;     // remote bus id -> NVLink count
  std::map<std::string, int> remoteType;  // remote bus id -> 0 GPU, 1 IBM NPU, 2 switch, -1
};

// The machine's GPUs as NVML lists them, in NVML's order, each NVLink counted per remote PCI
// device (bus ids as hwloc and sysfs write them: 4-digit domain). False with *why set when NVML
// cannot be used (not installed, symbols missing, nvmlInit failed).
bool queryNvml(std::vector<NvmlGpu>* gpus, std::string* why);

}  // namespace braid::topo
