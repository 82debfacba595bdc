// A stand-in libnvidia-ml.so.1 for the detection test on machines without a GPU: 4 GPUs
// (0000:a1..a4:00.0, "Fake H100", sm 9.0); GPU0-GPU1 and GPU2-GPU3 joined by 4 NVLinks each
// direction, and every GPU with 2 NVLinks to one NVSwitch (0000:f0:00.0); link 7 is down.
#include <cstdio>
#include <cstring>

namespace {
struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
void fill(PciInfo* p, unsigned bus) {
  memset(p, 0, sizeof *p);
  p->bus = bus;
  snprintf(p->busId, sizeof p->busId, "00000000:%02x:00.0", bus);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02x:00.0", bus);
}
long idx(void* d) { return reinterpret_cast<long>(d) - 1; }
}  // namespace

extern "C" {
int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 4;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= 4) return 2;
  *d = reinterpret_cast<void*>(static_cast<long>(i) + 1);
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* p) {
  fill(p, 0xa1 + static_cast<unsigned>(idx(d)));
  return 0;
}
int nvmlDeviceGetName(void*, char* name, unsigned len) {
  snprintf(name, len, "Fake H100");
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(void*, int* maj, int* min) {
  *maj = 9;
  *min = 0;
  return 0;
}
int nvmlDeviceGetNvLinkState(void*, unsigned link, int* active) {
  if (link >= 8) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *active = link != 7;
  return 0;
}
// Links 0-3: the peer GPU; 4-5: the NVSwitch; 6: down to nothing (remote info fails).
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* d, unsigned link, PciInfo* p) {
  long i = idx(d);
  if (link < 4) {
    fill(p, 0xa1 + static_cast<unsigned>(i ^ 1));
    return 0;
  }
  if (link < 6) {
    fill(p, 0xf0);
    return 0;
  }
  return 3;  // NVML_ERROR_NOT_SUPPORTED
}
int nvmlDeviceGetNvLinkRemoteDeviceType(void*, unsigned link, int* type) {
  *type = link < 4 ? 0 : 2;
  return 0;
}
}
