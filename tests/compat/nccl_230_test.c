/* NCCL 2.30's host API from C, against Braid's nccl.h and libnccl.so.2 alone:
 *  - the ABI: sizes and offsets of ncclConfig_t, ncclUniqueId, ncclSimInfo_t and
 *    ncclWaitSignalDesc_t, every enum value and flag, NCCL_CONFIG_INITIALIZER's values, against
 *    the numbers of NCCL 2.30's nccl.h (LP64);
 *  - ncclAlltoAll, ncclGather and ncclScatter on 4 thread ranks (ncclCommInitAll, one group per
 *    call as nccl-tests issues them), exact values, with their bad arguments (the process ranks
 *    run them in nccl_compat_test.c);
 *  - ncclCommMemStats on a host communicator (0 bytes of device memory) and its bad arguments;
 *  - the Param API over Braid's settings (meson.build sets BRAID_BUFFSIZE=1M and
 *    NCCL_CHUNKSIZE=64K): exact values of every getter, the dump's sources, and the refusals
 *    (unknown key, NULL, out of range, not a number, a buffer too small);
 *  - ncclResetDebugInit (and its twin) making a setenv of NCCL_DEBUG count;
 *  - every pncclX twin called beside its ncclX with the same arguments, giving the same result;
 *  - non-blocking init (config.blocking = 0) on 3 thread ranks: ncclInProgress with the comm
 *    set, ncclCommGetAsyncError polled until ncclSuccess, then an exact all-reduce.
 * Exits 0 when all hold, 1 with a message otherwise. */
#include <limits.h>
#include <nccl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compat_check.h"

#define NDEV 4

#define EQ(a, b)                                                                         \
  CHECK((long long)(a) == (long long)(b), "%s is %lld, NCCL's %lld", #a, (long long)(a), \
        (long long)(b))

static void abi(void) {
  EQ(sizeof(ncclUniqueId), 128);
  EQ(NCCL_UNIQUE_ID_BYTES, 128);
  EQ(sizeof(ncclConfig_t), 96);
  EQ(offsetof(ncclConfig_t, size), 0);
  EQ(offsetof(ncclConfig_t, magic), 8);
  EQ(offsetof(ncclConfig_t, version), 12);
  EQ(offsetof(ncclConfig_t, blocking), 16);
  EQ(offsetof(ncclConfig_t, cgaClusterSize), 20);
  EQ(offsetof(ncclConfig_t, minCTAs), 24);
  EQ(offsetof(ncclConfig_t, maxCTAs), 28);
  EQ(offsetof(ncclConfig_t, netName), 32);
  EQ(offsetof(ncclConfig_t, splitShare), 40);
  EQ(offsetof(ncclConfig_t, trafficClass), 44);
  EQ(offsetof(ncclConfig_t, commName), 48);
  EQ(offsetof(ncclConfig_t, collnetEnable), 56);
  EQ(offsetof(ncclConfig_t, CTAPolicy), 60);
  EQ(offsetof(ncclConfig_t, shrinkShare), 64);
  EQ(offsetof(ncclConfig_t, nvlsCTAs), 68);
  EQ(offsetof(ncclConfig_t, nChannelsPerNetPeer), 72);
  EQ(offsetof(ncclConfig_t, nvlinkCentricSched), 76);
  EQ(offsetof(ncclConfig_t, graphUsageMode), 80);
  EQ(offsetof(ncclConfig_t, numRmaCtx), 84);
  EQ(offsetof(ncclConfig_t, maxP2pPeers), 88);
  EQ(sizeof(ncclSimInfo_t), 24);
  EQ(offsetof(ncclSimInfo_t, estimatedTime), 16);
  EQ(sizeof(ncclWaitSignalDesc_t), 16);
  EQ(offsetof(ncclWaitSignalDesc_t, opCnt), 0);
  EQ(offsetof(ncclWaitSignalDesc_t, peer), 4);
  EQ(offsetof(ncclWaitSignalDesc_t, sigIdx), 8);
  EQ(offsetof(ncclWaitSignalDesc_t, ctx), 12);
  EQ(sizeof(ncclResult_t), 4);
  EQ(sizeof(ncclDataType_t), 4);
  EQ(sizeof(ncclRedOp_t), 4);

  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EQ(c.size, 96);
  EQ(c.magic, 0xcafebeef);
  EQ(c.version, NCCL_VERSION_CODE);
  EQ(c.blocking, INT_MIN);
  EQ(c.netName, 0);
  EQ(c.commName, 0);
  EQ(c.splitShare, INT_MIN);
  EQ(c.maxP2pPeers, INT_MIN);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EQ(sim.size, 24);
  EQ(sim.magic, 0x74685283);
  CHECK(sim.estimatedTime == -1.0f, "estimatedTime %g", (double)sim.estimatedTime);

  EQ(NCCL_VERSION(2, 30, 7), 23007);
  EQ(NCCL_VERSION(2, 8, 4), 2804);
  EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EQ(NCCL_SPLIT_NOCOLOR, -1);
  EQ(NCCL_API_MAGIC, 0xcafebeef);
  EQ(NCCL_CTA_POLICY_DEFAULT, 0);
  EQ(NCCL_CTA_POLICY_EFFICIENCY, 1);
  EQ(NCCL_CTA_POLICY_ZERO, 2);
  EQ(NCCL_SHRINK_DEFAULT, 0);
  EQ(NCCL_SHRINK_ABORT, 1);
  EQ(NCCL_REVOKE_DEFAULT, 0);
  EQ(NCCL_SUSPEND_MEM, 1);
  EQ(NCCL_WIN_DEFAULT, 0);
  EQ(NCCL_WIN_COLL_SYMMETRIC, 1);
  EQ(NCCL_WIN_STRICT_ORDERING, 2);
  EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);

  EQ(ncclSuccess, 0);
  EQ(ncclUnhandledCudaError, 1);
  EQ(ncclSystemError, 2);
  EQ(ncclInternalError, 3);
  EQ(ncclInvalidArgument, 4);
  EQ(ncclInvalidUsage, 5);
  EQ(ncclRemoteError, 6);
  EQ(ncclInProgress, 7);
  EQ(ncclTimeout, 8);
  EQ(ncclNumResults, 9);
  EQ(ncclInt8, 0);
  EQ(ncclChar, 0);
  EQ(ncclUint8, 1);
  EQ(ncclInt32, 2);
  EQ(ncclInt, 2);
  EQ(ncclUint32, 3);
  EQ(ncclInt64, 4);
  EQ(ncclUint64, 5);
  EQ(ncclFloat16, 6);
  EQ(ncclHalf, 6);
  EQ(ncclFloat32, 7);
  EQ(ncclFloat, 7);
  EQ(ncclFloat64, 8);
  EQ(ncclDouble, 8);
  EQ(ncclBfloat16, 9);
  EQ(ncclFloat8e4m3, 10);
  EQ(ncclFloat8e5m2, 11);
  EQ(ncclNumTypes, 12);
  EQ(ncclSum, 0);
  EQ(ncclProd, 1);
  EQ(ncclMax, 2);
  EQ(ncclMin, 3);
  EQ(ncclAvg, 4);
  EQ(ncclNumOps, 5);
  EQ(ncclMaxRedOp, 0x7fffffff);
  EQ(ncclScalarDevice, 0);
  EQ(ncclScalarHostImmediate, 1);
  EQ(ncclStatGpuMemSuspend, 0);
  EQ(ncclStatGpuMemSuspended, 1);
  EQ(ncclStatGpuMemPersist, 2);
  EQ(ncclStatGpuMemTotal, 3);
}

static int32_t value(int rank, int i) { return rank * 1000 + i; }

/* All-to-all, gather to 2 and scatter from 1 of 3 elements a block on NDEV thread ranks. */
static void collectives(ncclComm_t* comms) {
  enum { kCount = 3 };
  int32_t send[NDEV][NDEV * kCount], recv[NDEV][NDEV * kCount];
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < NDEV * kCount; ++i) send[d][i] = value(d, i), recv[d][i] = -1;
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAlltoAll(send[d], recv[d], kCount, ncclInt32, comms[d], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    for (int j = 0; j < NDEV; ++j)
      for (int i = 0; i < kCount; ++i)
        CHECK(recv[d][j * kCount + i] == value(j, d * kCount + i), "alltoall rank %d [%d]", d,
              j * kCount + i);

  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < NDEV * kCount; ++i) recv[d][i] = -1;
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclGather(send[d], recv[d], kCount, ncclInt32, 2, comms[d], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int j = 0; j < NDEV; ++j)
    for (int i = 0; i < kCount; ++i)
      CHECK(recv[2][j * kCount + i] == value(j, i), "gather at 2 [%d]", j * kCount + i);
  CHECK(recv[0][0] == -1 && recv[3][0] == -1, "gather wrote outside the root");

  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclScatter(send[d], recv[d], kCount, ncclInt32, 1, comms[d], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < kCount; ++i)
      CHECK(recv[d][i] == value(1, d * kCount + i), "scatter rank %d [%d]", d, i);

  /* Bad input: a clear code and message, nothing moved. */
  ncclResult_t r = ncclGather(send[0], recv[0], kCount, ncclInt32, NDEV, comms[0], NULL);
  CHECK(r == ncclInvalidArgument, "gather root %d gave %d", NDEV, (int)r);
  CHECK(strstr(ncclGetLastError(comms[0]), "root") != NULL, "message: %s",
        ncclGetLastError(comms[0]));
  r = ncclAlltoAll(send[0], recv[0], kCount, (ncclDataType_t)42, comms[0], NULL);
  CHECK(r == ncclInvalidArgument, "alltoall datatype 42 gave %d", (int)r);
  r = ncclScatter(send[0], recv[0], kCount, ncclInt32, -1, comms[0], NULL);
  CHECK(r == ncclInvalidArgument, "scatter root -1 gave %d", (int)r);
}

/* ncclGroupSimulateEnd: the group's time predicted, nothing run (buffers untouched), the same
 * figure from the twin and for the same calls again; a larger all-reduce takes longer; a bad
 * simInfo leaves the group open, and ncclGroupEnd then runs it; NULL is ncclGroupEnd. */
static float simulated(ncclComm_t* comms, int32_t (*buf)[1024], size_t count, int twin) {
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllReduce(buf[d], buf[d], count, ncclInt32, ncclSum, comms[d], NULL));
  NCCLCHECK(twin ? pncclGroupSimulateEnd(&sim) : ncclGroupSimulateEnd(&sim));
  return sim.estimatedTime;
}

static void simulate(ncclComm_t* comms) {
  static int32_t buf[NDEV][1024];
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < 1024; ++i) buf[d][i] = value(d, i);
  const float small = simulated(comms, buf, 16, 0), large = simulated(comms, buf, 1024, 0);
  CHECK(small > 0 && large > small, "predicted %g us for 16 elements, %g for 1024", small, large);
  CHECK(simulated(comms, buf, 1024, 1) == large, "pncclGroupSimulateEnd predicted otherwise");
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < 1024; ++i)
      CHECK(buf[d][i] == value(d, i), "the simulated group ran: rank %d [%d]", d, i);

  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllReduce(buf[d], buf[d], 4, ncclInt32, ncclSum, comms[d], NULL));
  ncclResult_t r = ncclGroupSimulateEnd(&bad);
  CHECK(r == ncclInvalidArgument, "a simInfo without its magic gave %d", (int)r);
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_SIM_INFO_INITIALIZER") != NULL, "message: %s",
        ncclGetLastError(NULL));
  for (int d = 0; d < NDEV; ++d)
    CHECK(buf[d][0] == value(d, 0), "the group of a refused simInfo ran: rank %d", d);
  /* The group was ended: the next one runs; NULL simInfo is ncclGroupEnd. */
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllReduce(buf[d], buf[d], 4, ncclInt32, ncclSum, comms[d], NULL));
  NCCLCHECK(ncclGroupSimulateEnd(NULL));
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < 4; ++i)
      CHECK(buf[d][i] == value(0, i) + value(1, i) + value(2, i) + value(3, i),
            "the group after a refused simInfo: rank %d [%d] is %d", d, i, buf[d][i]);
  /* A nested level leaves estimatedTime alone. */
  ncclSimInfo_t nested = NCCL_SIM_INFO_INITIALIZER;
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllReduce(buf[d] + 8, buf[d] + 8, 4, ncclInt32, ncclSum, comms[d], NULL));
  NCCLCHECK(ncclGroupSimulateEnd(&nested));
  CHECK(nested.estimatedTime == NCCL_UNDEF_FLOAT, "a nested level wrote %g", nested.estimatedTime);
  NCCLCHECK(ncclGroupSimulateEnd(&nested));
  CHECK(nested.estimatedTime > 0, "the outer level predicted %g", nested.estimatedTime);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  r = ncclGroupSimulateEnd(&sim);
  CHECK(r == ncclInvalidUsage, "ncclGroupSimulateEnd outside a group gave %d", (int)r);
}

/* Misuse inside a group: a call refused for its communicator refuses the group (nothing runs,
 * ncclGroupEnd returns the error); destroying a communicator with calls in the open group is
 * refused, aborting it drops them. */
static void groupMisuse(ncclComm_t* comms) {
  int32_t a[NDEV] = {1, 1, 1, 1};
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclAllReduce(&a[0], &a[0], 1, ncclInt32, ncclSum, comms[0], NULL));
  ncclResult_t r = ncclAllReduce(&a[1], &a[1], 1, ncclInt32, ncclSum, NULL, NULL);
  CHECK(r == ncclInvalidArgument, "a NULL comm in a group gave %d", (int)r);
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidArgument, "the group of a NULL comm's call ended with %d", (int)r);
  CHECK(a[0] == 1, "the refused group ran");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCLCHECK(ncclGroupStart());
  r = ncclSend(&a[1], 1, ncclInt32, 0, NULL, NULL);
  CHECK(r == ncclInvalidArgument, "a send on a NULL comm in a group gave %d", (int)r);
  r = ncclGroupSimulateEnd(&sim);
  CHECK(r == ncclInvalidArgument && sim.estimatedTime == NCCL_UNDEF_FLOAT,
        "simulating a group with a NULL comm's send gave %d, %g", (int)r, sim.estimatedTime);

  ncclComm_t pair[2];
  NCCLCHECK(ncclCommInitAll(pair, 2, NULL));
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclAllReduce(&a[2], &a[2], 1, ncclInt32, ncclSum, pair[0], NULL));
  r = ncclCommDestroy(pair[0]);
  CHECK(r == ncclInvalidUsage, "destroying a comm with calls in the open group gave %d", (int)r);
  NCCLCHECK(ncclCommAbort(pair[0])); /* drops its call */
  NCCLCHECK(ncclGroupEnd());         /* nothing left to run */
  CHECK(a[2] == 1, "the aborted comm's call ran");
  NCCLCHECK(ncclCommDestroy(pair[1]));
}

static void memStats(ncclComm_t comm) {
  for (int s = ncclStatGpuMemSuspend; s <= ncclStatGpuMemTotal; ++s) {
    uint64_t v = 12345;
    NCCLCHECK(ncclCommMemStats(comm, (ncclCommMemStat_t)s, &v));
    CHECK(v == 0, "stat %d of a host communicator: %llu bytes", s, (unsigned long long)v);
  }
  uint64_t v = 0;
  CHECK(ncclCommMemStats(comm, (ncclCommMemStat_t)7, &v) == ncclInvalidArgument, "stat 7");
  CHECK(strstr(ncclGetLastError(NULL), "stat 7") != NULL, "message: %s", ncclGetLastError(NULL));
  CHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, NULL) == ncclInvalidArgument, "value NULL");
  CHECK(ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v) != ncclSuccess, "comm NULL");
}

/* Each twin beside its name on the same (mostly refused) arguments: the same result. */
#define SAME(fn, ...)                                                  \
  do {                                                                 \
    ncclResult_t a_ = fn(__VA_ARGS__), b_ = p##fn(__VA_ARGS__);        \
    CHECK(a_ == b_, "%s gave %d, p%s %d", #fn, (int)a_, #fn, (int)b_); \
  } while (0)
/* NCCL 2.30's Param API over Braid's settings. meson.build runs this test with BRAID_BUFFSIZE=1M,
 * NCCL_CHUNKSIZE=64K and NCCL_DEBUG=NONE, BRAID_NSOCKS_PERPEER and NCCL_ALGO unset. */
static void expectInvalid(ncclResult_t r, const char* what, const char* needle) {
  CHECK(r == ncclInvalidArgument, "%s gave %d (%s), not ncclInvalidArgument", what, (int)r,
        ncclGetErrorString(r));
  CHECK(strstr(ncclGetLastError(NULL), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
        ncclGetLastError(NULL), needle);
}

/* What ncclParamDumpAll printed on stdout (both calls: ncclX and pncclX). */
static void dumpAll(char* out, size_t size) {
  FILE* tmp = tmpfile();
  CHECK(tmp != NULL, "tmpfile");
  out[0] = '\0';
  if (!tmp) return;
  fflush(stdout);
  int saved = dup(1);
  dup2(fileno(tmp), 1);
  ncclParamDumpAll();
  pncclParamDumpAll();
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  rewind(tmp);
  size_t n = fread(out, 1, size - 1, tmp);
  out[n] = '\0';
  fclose(tmp);
}

static int occurrences(const char* text, const char* line) {
  int n = 0;
  for (const char* p = strstr(text, line); p; p = strstr(p + 1, line)) ++n;
  return n;
}

/* The key table outlives the thread that asked for it; an unset launch variable (BRAID_RANK)
 * is no number for ncclParamGet. */
static void* keysOnAThread(void* out) {
  int n = 0;
  if (ncclParamGetAllParameterKeys((const char***)out, &n) != ncclSuccess) *(void**)out = NULL;
  return NULL;
}

static void paramEdges(void) {
  const char** keys = NULL;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, keysOnAThread, &keys) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(keys != NULL && strncmp(keys[0], "BRAID_", 6) == 0, "the key table after its thread: %s",
        keys ? keys[0] : "(none)");
  ncclParamHandle_t* rank = NULL;
  NCCLCHECK(ncclParamBind(&rank, "BRAID_RANK"));
  int32_t v = 7;
  int len = 5;
  ncclResult_t r = ncclParamGet(rank, &v, (int)sizeof v, &len);
  CHECK(r == ncclInvalidArgument && v == 7 && len == 0,
        "ncclParamGet of an unset BRAID_RANK gave %d, %d, len %d", (int)r, (int)v, len);
}

static void params(void) {
  ncclParamHandle_t *buff = NULL, *again = NULL, *chunk = NULL, *nsocks = NULL, *debug = NULL,
                    *algo = NULL, *timeout = NULL;
  /* NCCL's key, Braid's, and either without its prefix: one handle a setting. */
  NCCLCHECK(ncclParamBind(&buff, "NCCL_BUFFSIZE"));
  NCCLCHECK(pncclParamBind(&again, "BRAID_BUFFSIZE"));
  CHECK(buff != NULL && again == buff, "BRAID_BUFFSIZE bound to %p, NCCL_BUFFSIZE %p", (void*)again,
        (void*)buff);
  NCCLCHECK(ncclParamBind(&again, "BUFFSIZE"));
  CHECK(again == buff, "BUFFSIZE bound to another handle");
  NCCLCHECK(ncclParamBind(&chunk, "NCCL_CHUNKSIZE"));
  NCCLCHECK(ncclParamBind(&nsocks, "BRAID_NSOCKS_PERPEER"));
  NCCLCHECK(ncclParamBind(&debug, "NCCL_DEBUG"));
  NCCLCHECK(ncclParamBind(&algo, "NCCL_ALGO"));
  NCCLCHECK(ncclParamBind(&timeout, "NCCL_TIMEOUT"));

  /* Typed values, each twin beside its name. */
  int8_t i8 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  SAME(ncclParamGetU64, buff, &u64);
  NCCLCHECK(ncclParamGetU64(buff, &u64));
  EQ(u64, 1048576);
  SAME(ncclParamGetI64, chunk, &i64);
  NCCLCHECK(ncclParamGetI64(chunk, &i64));
  EQ(i64, 65536);
  SAME(ncclParamGetI32, buff, &i32);
  NCCLCHECK(ncclParamGetI32(buff, &i32));
  EQ(i32, 1048576);
  SAME(ncclParamGetU32, chunk, &u32);
  NCCLCHECK(ncclParamGetU32(chunk, &u32));
  EQ(u32, 65536);
  SAME(ncclParamGetI16, nsocks, &i16);
  NCCLCHECK(ncclParamGetI16(nsocks, &i16));
  EQ(i16, 2);
  SAME(ncclParamGetU16, nsocks, &u16);
  NCCLCHECK(ncclParamGetU16(nsocks, &u16));
  EQ(u16, 2);
  SAME(ncclParamGetI8, nsocks, &i8);
  NCCLCHECK(ncclParamGetI8(nsocks, &i8));
  EQ(i8, 2);
  SAME(ncclParamGetU8, nsocks, &u8);
  NCCLCHECK(ncclParamGetU8(nsocks, &u8));
  EQ(u8, 2);
  NCCLCHECK(ncclParamGetI32(timeout, &i32));
  EQ(i32, 300);

  /* Out of the type's range, not a number, NULL: refused, the output untouched. */
  i8 = 7;
  expectInvalid(ncclParamGetI8(buff, &i8), "GetI8 of 1048576", "BRAID_BUFFSIZE is 1048576");
  EQ(i8, 7);
  u16 = 7;
  expectInvalid(ncclParamGetU16(chunk, &u16), "GetU16 of 65536", "[0, 65535]");
  EQ(u16, 7);
  expectInvalid(ncclParamGetI16(buff, &i16), "GetI16 of 1048576", "outside");
  expectInvalid(ncclParamGetU8(buff, &u8), "GetU8 of 1048576", "outside");
  i32 = 7;
  expectInvalid(ncclParamGetI32(debug, &i32), "GetI32 of NONE", "not a whole number");
  EQ(i32, 7);
  expectInvalid(ncclParamGetI64(algo, &i64), "GetI64 of an empty string", "not a whole number");
  expectInvalid(ncclParamGetU64(buff, NULL), "GetU64 out NULL", "out is NULL");
  expectInvalid(ncclParamGetU64(NULL, &u64), "GetU64 handle NULL", "handle is NULL");

  /* Text, of any setting. */
  const char* str = NULL;
  SAME(ncclParamGetStr, buff, &str);
  NCCLCHECK(ncclParamGetStr(buff, &str));
  CHECK(str && strcmp(str, "1048576") == 0, "BUFFSIZE text %s", str ? str : "(null)");
  NCCLCHECK(ncclParamGetStr(debug, &str));
  CHECK(str && strcmp(str, "NONE") == 0, "DEBUG text %s", str ? str : "(null)");
  NCCLCHECK(ncclParamGetStr(algo, &str));
  CHECK(str && strcmp(str, "") == 0, "ALGO text %s", str ? str : "(null)");
  expectInvalid(ncclParamGetStr(buff, NULL), "GetStr out NULL", "out is NULL");

  /* Raw bytes: a size as uint64_t, an int as int32_t, a double, an enum's text with its NUL. */
  char buf[64];
  int n = -1;
  uint64_t raw64 = 0;
  SAME(ncclParamGet, buff, &raw64, (int)sizeof raw64, &n);
  NCCLCHECK(ncclParamGet(buff, &raw64, (int)sizeof raw64, &n));
  EQ(n, 8);
  EQ(raw64, 1048576);
  int32_t raw32 = 0;
  NCCLCHECK(ncclParamGet(nsocks, &raw32, (int)sizeof raw32, &n));
  EQ(n, 4);
  EQ(raw32, 2);
  double seconds = 0;
  NCCLCHECK(ncclParamGet(timeout, &seconds, (int)sizeof seconds, &n));
  EQ(n, 8);
  CHECK(seconds == 300.0, "TIMEOUT raw %g", seconds);
  NCCLCHECK(ncclParamGet(debug, buf, (int)sizeof buf, &n));
  EQ(n, 5);
  CHECK(memcmp(buf, "NONE", 5) == 0, "DEBUG raw %s", buf);
  n = 99;
  expectInvalid(ncclParamGet(buff, buf, 4, &n), "Get into 4 bytes", "needs 8 bytes");
  EQ(n, 0);
  expectInvalid(ncclParamGet(debug, buf, 4, &n), "Get NONE into 4 bytes", "needs 5 bytes");
  expectInvalid(ncclParamGet(buff, buf, 0, &n), "Get maxLen 0", "maxLen is 0");
  expectInvalid(ncclParamGet(buff, NULL, 8, &n), "Get out NULL", "out is NULL");
  expectInvalid(ncclParamGet(buff, buf, 8, NULL), "Get len NULL", "len is NULL");
  expectInvalid(ncclParamGet(NULL, buf, 8, &n), "Get handle NULL", "handle is NULL");

  /* By key, without a handle. */
  int len = -1;
  SAME(ncclParamGetParameter, "NCCL_CHUNKSIZE", &str, &len);
  NCCLCHECK(ncclParamGetParameter("NCCL_CHUNKSIZE", &str, &len));
  CHECK(str && strcmp(str, "65536") == 0 && len == 5, "CHUNKSIZE %s len %d", str ? str : "", len);
  NCCLCHECK(ncclParamGetParameter("BRAID_BUFFSIZE", &str, &len));
  CHECK(str && strcmp(str, "1048576") == 0 && len == 7, "BUFFSIZE %s len %d", str ? str : "", len);
  expectInvalid(ncclParamGetParameter("NCCL_NO_SUCH_KEY", &str, &len), "GetParameter unknown",
                "\"NCCL_NO_SUCH_KEY\"");
  CHECK(str == NULL && len == 0, "unknown key left %p, %d", (const void*)str, len);
  expectInvalid(ncclParamGetParameter(NULL, &str, &len), "GetParameter key NULL", "key is NULL");
  expectInvalid(ncclParamGetParameter("NCCL_DEBUG", NULL, &len), "GetParameter value NULL",
                "value is NULL");
  expectInvalid(ncclParamGetParameter("NCCL_DEBUG", &str, NULL), "GetParameter valueLen NULL",
                "valueLen is NULL");

  /* Binding what names nothing. */
  ncclParamHandle_t* h = NULL;
  expectInvalid(ncclParamBind(&h, "NCCL_NO_SUCH_KEY"), "Bind unknown", "\"NCCL_NO_SUCH_KEY\"");
  CHECK(h == NULL, "Bind of an unknown key wrote a handle");
  expectInvalid(ncclParamBind(NULL, "NCCL_DEBUG"), "Bind out NULL", "out is NULL");
  expectInvalid(ncclParamBind(&h, NULL), "Bind key NULL", "key is NULL");

  /* Every key, once, each readable; 36 settings (tests/base/settings_test.cc lists them). */
  const char** keys = NULL;
  int count = 0, twinCount = 0;
  SAME(ncclParamGetAllParameterKeys, &keys, &twinCount);
  NCCLCHECK(ncclParamGetAllParameterKeys(&keys, &count));
  EQ(count, 36);
  EQ(twinCount, count);
  const char* want[] = {"BRAID_BUFFSIZE", "BRAID_CHUNKSIZE", "BRAID_DEBUG", "BRAID_KERNEL_ISA",
                        "BRAID_COMM_SECRET"};
  for (size_t w = 0; w < sizeof want / sizeof want[0]; ++w) {
    int hits = 0;
    for (int i = 0; keys && i < count; ++i) hits += strcmp(keys[i], want[w]) == 0;
    CHECK(hits == 1, "%s listed %d times", want[w], hits);
  }
  for (int i = 0; keys && i < count; ++i)
    CHECK(ncclParamGetParameter(keys[i], &str, &len) == ncclSuccess, "listed %s unreadable",
          keys[i]);
  expectInvalid(ncclParamGetAllParameterKeys(NULL, &count), "keys table NULL", "table is NULL");
  expectInvalid(ncclParamGetAllParameterKeys(&keys, NULL), "keys tableLen NULL",
                "tableLen is NULL");

  /* The dump names each value's source: Braid's variable, NCCL's, or the default. */
  static char dump[16384];
  dumpAll(dump, sizeof dump);
  const char* lines[] = {"BRAID_BUFFSIZE=1048576 (BRAID_BUFFSIZE)\n",
                         "BRAID_CHUNKSIZE=65536 (NCCL_CHUNKSIZE)\n",
                         "BRAID_DEBUG=NONE (NCCL_DEBUG)\n", "BRAID_NSOCKS_PERPEER=2 (default)\n",
                         "BRAID_TIMEOUT=300 (default)\n"};
  for (size_t l = 0; l < sizeof lines / sizeof lines[0]; ++l)
    CHECK(occurrences(dump, lines[l]) == 2, "dump: %d times %s", occurrences(dump, lines[l]),
          lines[l]);
  CHECK(occurrences(dump, "\nBRAID_") == 2 * 36, "dump: %d settings:\n%s",
        occurrences(dump, "\nBRAID_"), dump);
}

static void twins(ncclComm_t comm) {
  int v = 0, w = 0;
  char buf[64];
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0; /* refused: not made by NCCL_CONFIG_INITIALIZER */
  ncclResult_t async;
  ncclRedOp_t op;
  SAME(ncclGetVersion, &v);
  CHECK(ncclGetVersion(&v) == ncclSuccess && pncclGetVersion(&w) == ncclSuccess && v == w,
        "versions %d %d", v, w);
  SAME(ncclGetUniqueId, NULL);
  SAME(ncclCommInitRank, NULL, 2, id, 0);
  SAME(ncclCommInitRankConfig, NULL, 2, id, 0, &config);
  SAME(ncclCommInitRankScalable, NULL, 2, 0, 0, &id, NULL);
  SAME(ncclCommInitAll, NULL, 2, NULL);
  SAME(ncclCommSplit, NULL, 0, 0, NULL, NULL);
  SAME(ncclCommFinalize, NULL);
  SAME(ncclCommAbort, NULL);
  SAME(ncclCommGetAsyncError, comm, &async);
  SAME(ncclCommCount, comm, &v);
  SAME(ncclCommCuDevice, comm, &v);
  SAME(ncclCommUserRank, comm, &v);
  SAME(ncclCommMemStats, comm, ncclStatGpuMemTotal, NULL);
  SAME(ncclMemAlloc, NULL, 0);
  SAME(ncclMemFree, NULL);
  SAME(ncclCommRegister, comm, buf, sizeof buf, NULL);
  SAME(ncclCommDeregister, comm, NULL);
  SAME(ncclRedOpCreatePreMulSum, &op, NULL, ncclFloat, ncclScalarHostImmediate, comm);
  SAME(ncclRedOpDestroy, ncclSum, comm);
  SAME(ncclReduce, buf, buf, 1, ncclInt8, ncclSum, -1, comm, NULL);
  SAME(ncclBcast, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclBroadcast, buf, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclAllReduce, buf, buf, 1, (ncclDataType_t)42, ncclSum, comm, NULL);
  SAME(ncclReduceScatter, buf, buf, 1, (ncclDataType_t)42, ncclSum, comm, NULL);
  SAME(ncclAllGather, buf, buf, 1, (ncclDataType_t)42, comm, NULL);
  SAME(ncclAlltoAll, buf, buf, 1, (ncclDataType_t)42, comm, NULL);
  SAME(ncclGather, buf, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclScatter, buf, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclSend, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclRecv, buf, 1, ncclInt8, -1, comm, NULL);
  SAME(ncclGroupStart, );
  SAME(ncclGroupEnd, );
  CHECK(strcmp(ncclGetErrorString(ncclTimeout), pncclGetErrorString(ncclTimeout)) == 0,
        "error strings");
  CHECK(strcmp(ncclGetLastError(NULL), pncclGetLastError(NULL)) == 0, "last error");
  SAME(ncclCommDestroy, NULL);
}

/* One rank of a non-blocking init: what it saw, for the main thread to check (CHECK's counter
 * is not for threads). */
#define NB_RANKS 3
#define NB_COUNT 1031
struct nbRank {
  ncclUniqueId id;
  int rank;
  ncclResult_t started, state, reduced;
  int polls, inProgressAfterReady;
  int32_t data[NB_COUNT];
  char why[256];
};
static void* nbRankMain(void* arg) {
  struct nbRank* me = (struct nbRank*)arg;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  me->started = ncclCommInitRankConfig(&comm, NB_RANKS, me->id, me->rank, &config);
  me->state = ncclInProgress;
  if (comm == NULL || (me->started != ncclInProgress && me->started != ncclSuccess)) {
    snprintf(me->why, sizeof me->why, "%s", ncclGetLastError(NULL));
    return NULL;
  }
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 120000 && me->state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &me->state) != ncclSuccess) break;
    ++me->polls;
    if (me->state == ncclInProgress) nanosleep(&ms, NULL);
  }
  if (me->state != ncclSuccess) {
    snprintf(me->why, sizeof me->why, "%s", ncclGetLastError(comm));
    ncclCommAbort(comm);
    return NULL;
  }
  ncclResult_t again = ncclInProgress;
  ncclCommGetAsyncError(comm, &again);
  me->inProgressAfterReady = again != ncclSuccess;
  for (int i = 0; i < NB_COUNT; ++i) me->data[i] = (me->rank + 1) * 100 + i;
  me->reduced = ncclAllReduce(me->data, me->data, NB_COUNT, ncclInt32, ncclSum, comm, NULL);
  if (me->reduced != ncclSuccess) snprintf(me->why, sizeof me->why, "%s", ncclGetLastError(comm));
  ncclCommDestroy(comm);
  return NULL;
}
static void nonBlocking(void) {
  static struct nbRank ranks[NB_RANKS];
  pthread_t threads[NB_RANKS];
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  for (int r = 0; r < NB_RANKS; ++r) {
    ranks[r].id = id;
    ranks[r].rank = r;
    CHECK(pthread_create(&threads[r], NULL, nbRankMain, &ranks[r]) == 0, "pthread_create");
  }
  for (int r = 0; r < NB_RANKS; ++r) pthread_join(threads[r], NULL);
  for (int r = 0; r < NB_RANKS; ++r) {
    const struct nbRank* me = &ranks[r];
    CHECK(me->started == ncclInProgress || me->started == ncclSuccess,
          "rank %d: non-blocking init gave %d: %s", r, (int)me->started, me->why);
    CHECK(me->state == ncclSuccess, "rank %d: ncclCommGetAsyncError ended at %d after %d polls: %s",
          r, (int)me->state, me->polls, me->why);
    CHECK(!me->inProgressAfterReady, "rank %d: in progress again after ncclSuccess", r);
    CHECK(me->reduced == ncclSuccess, "rank %d: all-reduce gave %d: %s", r, (int)me->reduced,
          me->why);
    for (int i = 0; i < NB_COUNT && me->reduced == ncclSuccess; ++i)
      if (me->data[i] != 600 + NB_RANKS * i) {
        CHECK(0, "rank %d: element %d is %d, want %d", r, i, (int)me->data[i], 600 + NB_RANKS * i);
        break;
      }
  }
}

/* ncclResetDebugInit: NCCL_DEBUG=NONE at first (meson.build), so a bad call's WARN is not
 * printed; after setenv NCCL_DEBUG=WARN and the reset it is. */
static size_t warnBytes(void) {
  FILE* tmp = tmpfile();
  if (!tmp) return 0;
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  ncclGetVersion(NULL); /* refused: one WARN line where WARN is on */
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long n = ftell(tmp);
  fclose(tmp);
  return n > 0 ? (size_t)n : 0;
}
static void resetDebugInit(void) {
  CHECK(warnBytes() == 0, "a WARN printed with NCCL_DEBUG=NONE");
  setenv("NCCL_DEBUG", "WARN", 1);
  CHECK(warnBytes() == 0, "NCCL_DEBUG read again before ncclResetDebugInit");
  ncclResetDebugInit();
  CHECK(warnBytes() > 0, "no WARN after NCCL_DEBUG=WARN and ncclResetDebugInit");
  setenv("NCCL_DEBUG", "NONE", 1);
  pncclResetDebugInit();
  CHECK(warnBytes() == 0, "a WARN after NCCL_DEBUG=NONE and pncclResetDebugInit");
}

int main(void) {
  abi();
  resetDebugInit();
  nonBlocking();
  ncclComm_t comms[NDEV];
  NCCLCHECK(ncclCommInitAll(comms, NDEV, NULL));
  if (failures == 0) {
    collectives(comms);
    memStats(comms[0]);
    simulate(comms);
    groupMisuse(comms);
    params();
    paramEdges();
    twins(comms[0]);
    for (int d = 0; d < NDEV; ++d) NCCLCHECK(ncclCommDestroy(comms[d]));
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
