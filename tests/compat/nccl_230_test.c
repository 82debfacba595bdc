/* NCCL 2.30's host API from C, against Braid's nccl.h and libnccl.so.2 alone:
 *  - the ABI: sizes and offsets of ncclConfig_t, ncclUniqueId, ncclSimInfo_t and
 *    ncclWaitSignalDesc_t, every enum value and flag, NCCL_CONFIG_INITIALIZER's values, against
 *    the numbers of NCCL 2.30's nccl.h (LP64);
 *  - ncclAlltoAll, ncclGather and ncclScatter on 4 thread ranks (ncclCommInitAll, one group per
 *    call as nccl-tests issues them), exact values, with their bad arguments (the process ranks
 *    run them in nccl_compat_test.c);
 *  - ncclCommMemStats on a host communicator (0 bytes of device memory) and its bad arguments;
 *  - every function Braid cannot carry out yet returns ncclInvalidUsage, with
 *    ncclGetLastError naming the function and saying nothing was done;
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

#define NDEV 4

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)
#define NCCLCHECK(call)                                                    \
  do {                                                                     \
    ncclResult_t r_ = (call);                                              \
    CHECK(r_ == ncclSuccess, "%s: %s (%s)", #call, ncclGetErrorString(r_), \
          ncclGetLastError(NULL));                                         \
  } while (0)
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

/* What Braid cannot do yet: ncclInvalidUsage and a message naming the function; the pncclX
 * twin says the same. */
static void expectNotYet(ncclResult_t r, ncclResult_t twin, const char* fn) {
  CHECK(r == ncclInvalidUsage, "%s gave %d (%s), not ncclInvalidUsage", fn, (int)r,
        ncclGetErrorString(r));
  CHECK(twin == r, "p%s gave %d, %s %d", fn, (int)twin, fn, (int)r);
  const char* msg = ncclGetLastError(NULL);
  CHECK(strstr(msg, fn) != NULL && strstr(msg, "not in Braid yet") != NULL, "%s: message: %s", fn,
        msg);
}
#define NOT_YET(fn, ...) expectNotYet(fn(__VA_ARGS__), p##fn(__VA_ARGS__), #fn)

static void notYet(ncclComm_t* comms) {
  ncclComm_t out = NULL;
  int exclude[1] = {3};
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclWindow_t win = NULL;
  void* ptr = NULL;
  char buf[64];
  ncclWaitSignalDesc_t desc = {1, 1, 0, 0};
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclParamHandle_t* h = NULL;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  const char* str;
  const char** keys;
  int n;
  NOT_YET(ncclCommShrink, comms[0], exclude, 1, &out, NULL, NCCL_SHRINK_DEFAULT);
  NOT_YET(ncclCommGetUniqueId, comms[0], &id);
  NOT_YET(ncclCommGrow, comms[0], NDEV + 1, &id, -1, &out, NULL);
  NOT_YET(ncclCommRevoke, comms[0], NCCL_REVOKE_DEFAULT);
  NOT_YET(ncclCommSuspend, comms[0], NCCL_SUSPEND_MEM);
  NOT_YET(ncclCommResume, comms[0]);
  NOT_YET(ncclCommWindowRegister, comms[0], buf, sizeof buf, &win, NCCL_WIN_DEFAULT);
  NOT_YET(ncclCommWindowDeregister, comms[0], win);
  NOT_YET(ncclWinGetUserPtr, comms[0], win, &ptr);
  NOT_YET(ncclPutSignal, buf, 4, ncclInt8, 1, win, 0, 0, 0, 0, comms[0], NULL);
  NOT_YET(ncclSignal, 1, 0, 0, 0, comms[0], NULL);
  NOT_YET(ncclWaitSignal, 1, &desc, comms[0], NULL);
  NOT_YET(ncclGroupSimulateEnd, &sim);
  NOT_YET(ncclParamBind, &h, "BUFFSIZE");
  NOT_YET(ncclParamGetI8, h, &i8);
  NOT_YET(ncclParamGetI16, h, &i16);
  NOT_YET(ncclParamGetI32, h, &i32);
  NOT_YET(ncclParamGetI64, h, &i64);
  NOT_YET(ncclParamGetU8, h, &u8);
  NOT_YET(ncclParamGetU16, h, &u16);
  NOT_YET(ncclParamGetU32, h, &u32);
  NOT_YET(ncclParamGetU64, h, &u64);
  NOT_YET(ncclParamGetStr, h, &str);
  NOT_YET(ncclParamGet, h, buf, (int)sizeof buf, &n);
  NOT_YET(ncclParamGetParameter, "BUFFSIZE", &str, &n);
  NOT_YET(ncclParamGetAllParameterKeys, &keys, &n);
  CHECK(out == NULL && win == NULL && ptr == NULL && h == NULL, "an output was written");
  CHECK(sim.estimatedTime == -1.0f, "simInfo was written");
  ncclParamDumpAll(); /* prints that it cannot yet */
  pncclParamDumpAll();
}

/* Each twin beside its name on the same (mostly refused) arguments: the same result. */
#define SAME(fn, ...)                                                  \
  do {                                                                 \
    ncclResult_t a_ = fn(__VA_ARGS__), b_ = p##fn(__VA_ARGS__);        \
    CHECK(a_ == b_, "%s gave %d, p%s %d", #fn, (int)a_, #fn, (int)b_); \
  } while (0)
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

int main(void) {
  abi();
  nonBlocking();
  ncclComm_t comms[NDEV];
  NCCLCHECK(ncclCommInitAll(comms, NDEV, NULL));
  if (failures == 0) {
    collectives(comms);
    memStats(comms[0]);
    notYet(comms);
    twins(comms[0]);
    for (int d = 0; d < NDEV; ++d) NCCLCHECK(ncclCommDestroy(comms[d]));
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
