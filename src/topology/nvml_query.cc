// NVML queried at run time: see nvml_query.h.
#include "topology/nvml_query.h"

#include <dlfcn.h>

#include <cstdio>

#include "topology/text_util.h"

namespace braid::topo {
namespace {

struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

// NVML writes 8-digit domains ("00000000:17:00.0"); hwloc and sysfs write 4 ("0000:17:00.0").
std::string nvmlBusId(const NvmlPciInfo& p) {
  std::string norm;
  unsigned fn = 0;
  if (normalizeBusId(p.busId, &norm)) fn = static_cast<unsigned>(norm.back() - '0');
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", p.domain, p.bus, p.device, fn);
  return buf;
}

}  // namespace

bool queryNvml(std::vector<NvmlGpu>* gpus, std::string* why) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "NVML not available (libnvidia-ml.so.1 not found)";
    return false;
  }
  using Dev = void*;
  auto sym = [&](const char* a, const char* b = nullptr) -> void* {
    void* f = dlsym(h, a);
    if (!f && b) f = dlsym(h, b);
    return f;
  };
  auto init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2", "nvmlInit"));
  auto shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
  auto count =
      reinterpret_cast<int (*)(unsigned*)>(sym("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"));
  auto byIndex = reinterpret_cast<int (*)(unsigned, Dev*)>(
      sym("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"));
  auto pciInfo = reinterpret_cast<int (*)(Dev, NvmlPciInfo*)>(
      sym("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"));
  auto getName = reinterpret_cast<int (*)(Dev, char*, unsigned)>(sym("nvmlDeviceGetName"));
  auto getCc =
      reinterpret_cast<int (*)(Dev, int*, int*)>(sym("nvmlDeviceGetCudaComputeCapability"));
  auto linkState = reinterpret_cast<int (*)(Dev, unsigned, int*)>(sym("nvmlDeviceGetNvLinkState"));
  auto linkRemote = reinterpret_cast<int (*)(Dev, unsigned, NvmlPciInfo*)>(
      sym("nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"));
  auto remoteType =
      reinterpret_cast<int (*)(Dev, unsigned, int*)>(sym("nvmlDeviceGetNvLinkRemoteDeviceType"));
  if (!init || !count || !byIndex || !pciInfo) {
    *why = "NVML not usable (libnvidia-ml.so.1 lacks nvmlInit/nvmlDeviceGetCount/PciInfo)";
    dlclose(h);
    return false;
  }
  if (int rc = init(); rc != 0) {
    *why = "NVML not usable (nvmlInit returned " + std::to_string(rc) + ")";
    dlclose(h);
    return false;
  }
  unsigned n = 0;
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; i++) {
    Dev d = nullptr;
    if (byIndex(i, &d) != 0) continue;
    NvmlGpu g;
    g.index = static_cast<int>(i);
    NvmlPciInfo pi{};
    if (pciInfo(d, &pi) != 0) continue;
    g.busid = nvmlBusId(pi);
    char name[96] = {};
    if (getName && getName(d, name, sizeof name) == 0) g.name = name;
    int maj = 0, min = 0;
    if (getCc && getCc(d, &maj, &min) == 0) g.sm = maj * 10 + min;
    if (linkState && linkRemote) {
      for (unsigned l = 0; l < 18; l++) {
        int active = 0;
        if (linkState(d, l, &active) != 0 || !active) continue;
        NvmlPciInfo rp{};
        if (linkRemote(d, l, &rp) != 0) continue;
        std::string rb = nvmlBusId(rp);
        g.linksTo[rb]++;
        int t = -1;
        if (remoteType && remoteType(d, l, &t) != 0) t = -1;
        g.remoteType[rb] = t;
      }
    }
    gpus->push_back(std::move(g));
  }
  if (shutdown) shutdown();
  dlclose(h);
  return true;
}

}  // namespace braid::topo
