/*
 * Prints the binary interface that NCCL 2.28's nccl.h and Braid's share, one "name value" line
 * each: enum values, macro values, the sizes and offsets of ncclUniqueId, ncclConfig_t's fields
 * up to 2.28's last (nvlinkCentricSched; later releases append) and ncclSimInfo_t, and what
 * the initializers set. nccl_install.sh builds it against NVIDIA's header and against Braid's
 * and requires the two outputs to be the same: a program built with either header passes the
 * other's library the same bytes.
 */
#include <nccl.h>
#include <stddef.h>
#include <stdio.h>

#define V(x) printf("%s %lld\n", #x, (long long)(x))
#define OFF(type, field) printf("offsetof(%s, %s) %zu\n", #type, #field, offsetof(type, field))

int main(void) {
  V(ncclSuccess), V(ncclUnhandledCudaError), V(ncclSystemError), V(ncclInternalError);
  V(ncclInvalidArgument), V(ncclInvalidUsage), V(ncclRemoteError), V(ncclInProgress);
  V(ncclInt8), V(ncclChar), V(ncclUint8), V(ncclInt32), V(ncclInt), V(ncclUint32), V(ncclInt64);
  V(ncclUint64), V(ncclFloat16), V(ncclHalf), V(ncclFloat32), V(ncclFloat), V(ncclFloat64);
  V(ncclDouble), V(ncclBfloat16), V(ncclFloat8e4m3), V(ncclFloat8e5m2), V(ncclNumTypes);
  V(ncclSum), V(ncclProd), V(ncclMax), V(ncclMin), V(ncclAvg), V(ncclNumOps), V(ncclMaxRedOp);
  V(ncclScalarDevice), V(ncclScalarHostImmediate);
  V(sizeof(ncclResult_t)), V(sizeof(ncclDataType_t)), V(sizeof(ncclRedOp_t));
  V(sizeof(ncclScalarResidence_t)), V(sizeof(ncclComm_t)), V(sizeof(ncclWindow_t));
  V(NCCL_UNIQUE_ID_BYTES), V(sizeof(ncclUniqueId)), V(NCCL_SPLIT_NOCOLOR);
  V(NCCL_CONFIG_UNDEF_INT), V(NCCL_UNDEF_FLOAT == -1.0f);
  V(NCCL_WIN_DEFAULT), V(NCCL_WIN_COLL_SYMMETRIC), V(NCCL_WIN_REQUIRED_ALIGNMENT);
  V(NCCL_CTA_POLICY_DEFAULT), V(NCCL_CTA_POLICY_EFFICIENCY), V(NCCL_CTA_POLICY_ZERO);
  V(NCCL_SHRINK_DEFAULT), V(NCCL_SHRINK_ABORT), V(NCCL_REVOKE_DEFAULT);
  V(NCCL_VERSION(2, 8, 4)), V(NCCL_VERSION(2, 30, 7));

  OFF(ncclConfig_t, size), OFF(ncclConfig_t, magic), OFF(ncclConfig_t, version);
  OFF(ncclConfig_t, blocking), OFF(ncclConfig_t, cgaClusterSize), OFF(ncclConfig_t, minCTAs);
  OFF(ncclConfig_t, maxCTAs), OFF(ncclConfig_t, netName), OFF(ncclConfig_t, splitShare);
  OFF(ncclConfig_t, trafficClass), OFF(ncclConfig_t, commName), OFF(ncclConfig_t, collnetEnable);
  OFF(ncclConfig_t, CTAPolicy), OFF(ncclConfig_t, shrinkShare), OFF(ncclConfig_t, nvlsCTAs);
  OFF(ncclConfig_t, nChannelsPerNetPeer), OFF(ncclConfig_t, nvlinkCentricSched);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  V(config.size >= offsetof(ncclConfig_t, nvlinkCentricSched) + sizeof(int));
  V(config.magic), V(config.blocking), V(config.cgaClusterSize), V(config.minCTAs);
  V(config.maxCTAs), V(config.netName == NULL), V(config.splitShare), V(config.trafficClass);
  V(config.commName == NULL), V(config.collnetEnable), V(config.CTAPolicy), V(config.shrinkShare);
  V(config.nvlsCTAs), V(config.nChannelsPerNetPeer), V(config.nvlinkCentricSched);

  V(sizeof(ncclSimInfo_t)), OFF(ncclSimInfo_t, size), OFF(ncclSimInfo_t, magic);
  OFF(ncclSimInfo_t, version), OFF(ncclSimInfo_t, estimatedTime);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  V(sim.size), V(sim.magic), V(sim.estimatedTime == NCCL_UNDEF_FLOAT);
  return 0;
}
