/* A C program written against nccl.h, linked to Braid's libnccl.so.2, on host-memory ranks:
 * the way nccl-tests drives NCCL from one thread (ncclCommInitAll, then each call once per
 * communicator inside ncclGroupStart/End), and as processes (ncclGetUniqueId,
 * ncclCommInitRankConfig, ncclCommSplit). Every value is checked exactly; every profiling
 * twin (pncclX) is linked. The process ranks also put into each other's windows, suspend and
 * resume, shrink without a rank and revoke (NCCL 2.27-2.29's calls as processes). Exits 0 when
 * all hold, 1 with a message otherwise. */
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compat_check.h"

#define NDEV 4
#define COUNT 1000

/* Every profiling twin, so that the link fails if one is missing. */
static void* const twins[] = {(void*)pncclGetVersion,     (void*)pncclGetUniqueId,
                              (void*)pncclCommInitRank,   (void*)pncclCommInitRankConfig,
                              (void*)pncclCommInitAll,    (void*)pncclCommFinalize,
                              (void*)pncclCommDestroy,    (void*)pncclCommAbort,
                              (void*)pncclCommSplit,      (void*)pncclGetErrorString,
                              (void*)pncclGetLastError,   (void*)pncclCommGetAsyncError,
                              (void*)pncclCommCount,      (void*)pncclCommCuDevice,
                              (void*)pncclCommUserRank,   (void*)pncclMemAlloc,
                              (void*)pncclMemFree,        (void*)pncclCommRegister,
                              (void*)pncclCommDeregister, (void*)pncclRedOpCreatePreMulSum,
                              (void*)pncclRedOpDestroy,   (void*)pncclReduce,
                              (void*)pncclBcast,          (void*)pncclBroadcast,
                              (void*)pncclAllReduce,      (void*)pncclReduceScatter,
                              (void*)pncclAllGather,      (void*)pncclSend,
                              (void*)pncclRecv,           (void*)pncclGroupStart,
                              (void*)pncclGroupEnd};

/* Rank r's element i: small integers, exact in float. */
static float input(int r, int i) { return (float)(r + 1) * 0.5f + (float)(i % 7); }

static void singleProcess(void) {
  ncclComm_t comms[NDEV];
  NCCLCHECK(ncclCommInitAll(comms, NDEV, NULL));
  float* send[NDEV];
  float* recv[NDEV];
  for (int d = 0; d < NDEV; ++d) {
    int count = -1, rank = -1, dev = 0;
    NCCLCHECK(ncclCommCount(comms[d], &count));
    NCCLCHECK(ncclCommUserRank(comms[d], &rank));
    NCCLCHECK(ncclCommCuDevice(comms[d], &dev));
    CHECK(count == NDEV && rank == d, "comm %d: count %d rank %d", d, count, rank);
    CHECK(dev >= -1, "comm %d: device %d", d, dev);
    send[d] = malloc(sizeof(float) * COUNT * NDEV);
    recv[d] = malloc(sizeof(float) * COUNT * NDEV);
    for (int i = 0; i < COUNT * NDEV; ++i) send[d][i] = input(d, i);
  }
  cudaStream_t stream = NULL; /* host buffers: the call has finished when it returns */

  /* All-reduce (sum), as nccl-tests issues it: one thread, one group, every communicator. */
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllReduce(send[d], recv[d], COUNT, ncclFloat, ncclSum, comms[d], stream));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    for (int i = 0; i < COUNT; ++i) {
      float want = 0;
      for (int r = 0; r < NDEV; ++r) want += input(r, i);
      if (recv[d][i] != want) {
        CHECK(0, "allreduce rank %d [%d] = %g, expected %g", d, i, recv[d][i], want);
        break;
      }
    }

  /* All-gather, reduce-scatter (max), broadcast from 2, reduce (min) to 1. */
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclAllGather(send[d], recv[d], COUNT, ncclFloat, comms[d], stream));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    for (int r = 0; r < NDEV; ++r)
      CHECK(memcmp(recv[d] + r * COUNT, send[r], sizeof(float) * COUNT) == 0,
            "allgather rank %d block %d", d, r);
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclReduceScatter(send[d], recv[d], COUNT, ncclFloat, ncclMax, comms[d], stream));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    CHECK(recv[d][5] == input(NDEV - 1, d * COUNT + 5), "reducescatter rank %d", d);
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclBroadcast(send[d], recv[d], COUNT, ncclFloat, 2, comms[d], stream));
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    CHECK(memcmp(recv[d], send[2], sizeof(float) * COUNT) == 0, "broadcast rank %d", d);
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(ncclReduce(send[d], recv[d], COUNT, ncclFloat, ncclMin, 1, comms[d], stream));
  NCCLCHECK(ncclGroupEnd());
  CHECK(memcmp(recv[1], send[0], sizeof(float) * COUNT) == 0, "reduce min at root 1");

  /* In-place ncclBcast of int32 from 3. */
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d) {
    int32_t* b = (int32_t*)recv[d];
    for (int i = 0; i < COUNT; ++i) b[i] = d == 3 ? 1000 + i : -1;
    NCCLCHECK(ncclBcast(b, COUNT, ncclInt32, 3, comms[d], stream));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d) CHECK(((int32_t*)recv[d])[17] == 1017, "bcast rank %d", d);

  /* Send/recv around the ring in one group. */
  NCCLCHECK(ncclGroupStart());
  for (int d = 0; d < NDEV; ++d) {
    NCCLCHECK(ncclSend(send[d], COUNT, ncclFloat, (d + 1) % NDEV, comms[d], stream));
    NCCLCHECK(ncclRecv(recv[d], COUNT, ncclFloat, (d + NDEV - 1) % NDEV, comms[d], stream));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int d = 0; d < NDEV; ++d)
    CHECK(memcmp(recv[d], send[(d + NDEV - 1) % NDEV], sizeof(float) * COUNT) == 0,
          "sendrecv rank %d", d);

  /* PreMulSum: sum of 0.5 * x, the scalar read at creation; an all-reduce through pncclX. */
  ncclRedOp_t ops[NDEV];
  float half = 0.5f;
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(
        ncclRedOpCreatePreMulSum(&ops[d], &half, ncclFloat, ncclScalarHostImmediate, comms[d]));
  NCCLCHECK(pncclGroupStart());
  for (int d = 0; d < NDEV; ++d)
    NCCLCHECK(pncclAllReduce(send[d], recv[d], COUNT, ncclFloat, ops[d], comms[d], stream));
  NCCLCHECK(pncclGroupEnd());
  {
    float want = 0;
    for (int r = 0; r < NDEV; ++r) want += 0.5f * input(r, 3);
    CHECK(recv[0][3] == want, "premulsum %g, expected %g", recv[0][3], want);
  }
  for (int d = 0; d < NDEV; ++d) NCCLCHECK(ncclRedOpDestroy(ops[d], comms[d]));

  /* Registration of a host buffer; a foreign handle is refused. */
  void* handle = NULL;
  NCCLCHECK(ncclCommRegister(comms[0], send[0], sizeof(float) * COUNT, &handle));
  CHECK(ncclCommDeregister(comms[1], handle) == ncclInvalidArgument, "foreign handle");
  NCCLCHECK(ncclCommDeregister(comms[0], handle));

  /* Bad input: a clear code and message, nothing launched. */
  ncclResult_t r =
      ncclAllReduce(send[0], recv[0], COUNT, (ncclDataType_t)42, ncclSum, comms[0], stream);
  CHECK(r == ncclInvalidArgument, "bad datatype gave %d", (int)r);
  CHECK(strstr(ncclGetLastError(comms[0]), "datatype 42") != NULL, "message: %s",
        ncclGetLastError(comms[0]));
  ncclResult_t async = ncclInternalError;
  NCCLCHECK(ncclCommGetAsyncError(comms[0], &async));
  CHECK(async == ncclSuccess, "async error %d after a refused call", (int)async);

  for (int d = 0; d < NDEV; ++d) {
    NCCLCHECK(ncclCommFinalize(comms[d]));
    NCCLCHECK(ncclCommDestroy(comms[d]));
    free(send[d]);
    free(recv[d]);
  }
}

/* Device memory: granted with a CUDA device, else a clear "no CUDA device". */
static void memory(void) {
  void* p = NULL;
  ncclResult_t r = ncclMemAlloc(&p, 1 << 20);
  if (r == ncclSuccess) {
    printf("ncclMemAlloc: device memory granted\n");
    NCCLCHECK(ncclMemFree(p));
  } else {
    printf("ncclMemAlloc: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    CHECK(r == ncclUnhandledCudaError && p == NULL, "ncclMemAlloc gave %d", (int)r);
    CHECK(strstr(ncclGetLastError(NULL), "CUDA") != NULL, "message: %s", ncclGetLastError(NULL));
  }
}

/* One process of NPROC: config init, a split into even/odd ranks, an all-reduce on each; then
 * a communicator made by ncclCommInitRankScalable from two ids, and NCCL 2.28's all-to-all,
 * gather and scatter on it (the latter through their pncclX twins). */
#define NPROC 4
#define NIDS 3 /* the ncclCommInitRankConfig id, then ncclCommInitRankScalable's two */
static void scalable(ncclUniqueId* ids, int rank) {
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRankScalable(&comm, NPROC, rank, 2, ids, NULL));
  int32_t send[NPROC * 2], recv[NPROC * 2];
  for (int i = 0; i < NPROC * 2; ++i) send[i] = rank * 100 + i;
  NCCLCHECK(ncclAlltoAll(send, recv, 2, ncclInt32, comm, NULL));
  for (int j = 0; j < NPROC; ++j) /* block j came from rank j: its block `rank` */
    CHECK(recv[2 * j] == j * 100 + 2 * rank && recv[2 * j + 1] == j * 100 + 2 * rank + 1,
          "rank %d: alltoall block %d = %d %d", rank, j, recv[2 * j], recv[2 * j + 1]);
  for (int i = 0; i < NPROC * 2; ++i) recv[i] = -1;
  NCCLCHECK(pncclGather(send, recv, 2, ncclInt32, 3, comm, NULL));
  if (rank == 3)
    for (int j = 0; j < NPROC; ++j)
      CHECK(recv[2 * j] == j * 100 && recv[2 * j + 1] == j * 100 + 1, "gather block %d", j);
  int32_t mine[2] = {-1, -1};
  NCCLCHECK(pncclScatter(send, mine, 2, ncclInt32, 1, comm, NULL));
  CHECK(mine[0] == 100 + 2 * rank && mine[1] == 100 + 2 * rank + 1, "rank %d: scatter %d %d", rank,
        mine[0], mine[1]);
  NCCLCHECK(ncclCommDestroy(comm));
}

/* In the process ranks: a put with a signal into the right neighbour's window; suspend and
 * resume (ncclCommMemStats saying so); then ranks 0-2 shrink without rank 3 (which leaves),
 * and rank 0 revokes the shrunk communicator while ranks 1 and 2 wait in an all-reduce. */
static void faultAndOneSided(ncclComm_t comm, int rank) {
  int32_t win[64], mine[64];
  for (int i = 0; i < 64; ++i) win[i] = -1, mine[i] = rank * 100 + i;
  ncclWindow_t w = NULL;
  NCCLCHECK(ncclCommWindowRegister(comm, win, sizeof win, &w, NCCL_WIN_DEFAULT));
  NCCLCHECK(ncclPutSignal(mine, 64, ncclInt32, (rank + 1) % NPROC, w, 0, 2, 0, 0, comm, NULL));
  ncclWaitSignalDesc_t desc = {1, (rank + NPROC - 1) % NPROC, 2, 0};
  NCCLCHECK(ncclWaitSignal(1, &desc, comm, NULL));
  CHECK(win[63] == ((rank + NPROC - 1) % NPROC) * 100 + 63, "rank %d: window %d", rank, win[63]);
  NCCLCHECK(ncclCommWindowDeregister(comm, w));
  uint64_t v = 0;
  NCCLCHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 1,
        "rank %d: not suspended", rank);
  NCCLCHECK(ncclCommResume(comm));
  if (rank == 3) return; /* excluded: does not call shrink */
  int exclude[1] = {3};
  ncclComm_t small = NULL;
  NCCLCHECK(ncclCommShrink(comm, exclude, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
  if (!small) return;
  float x = 1;
  if (rank == 0) {
    const struct timespec wait = {0, 100000000}; /* ranks 1 and 2 wait meanwhile */
    nanosleep(&wait, NULL);
    NCCLCHECK(ncclCommRevoke(small, NCCL_REVOKE_DEFAULT));
  } else {
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, small, NULL) == ncclInvalidUsage,
          "rank %d: the all-reduce was not revoked", rank);
  }
  NCCLCHECK(ncclCommDestroy(small));
}

static int child(ncclUniqueId* ids, int rank) {
  ncclUniqueId id = ids[0];
  ncclComm_t comm, half;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  NCCLCHECK(ncclCommInitRankConfig(&comm, NPROC, id, rank, &config));
  NCCLCHECK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
  int64_t mine = rank, sum = -1;
  NCCLCHECK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, half, NULL));
  CHECK(sum == (rank % 2 ? 1 + 3 : 0 + 2), "rank %d: split sum %lld", rank, (long long)sum);
  NCCLCHECK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclMax, comm, NULL));
  CHECK(sum == NPROC - 1, "rank %d: max %lld", rank, (long long)sum);
  NCCLCHECK(ncclCommDestroy(half));
  faultAndOneSided(comm, rank);
  NCCLCHECK(ncclCommFinalize(comm));
  NCCLCHECK(ncclCommDestroy(comm));
  scalable(ids + 1, rank);
  return failures ? 1 : 0;
}

/* The children are forked before ncclGetUniqueId starts the root's thread here (a fork of a
 * process with threads is what ThreadSanitizer, and POSIX, advise against; main runs this
 * first, before any communicator's threads); each reads the id from its pipe. */
static void processes(void) {
  pid_t pids[NPROC];
  int pipes[NPROC][2];
  int forked = 0;
  signal(SIGPIPE, SIG_IGN); /* a child that died: write fails, and says so below */
  for (int r = 0; r < NPROC; ++r) {
    if (pipe(pipes[r]) != 0) {
      CHECK(0, "pipe for rank %d", r);
      break;
    }
    pids[r] = fork();
    if (pids[r] == 0) {
      for (int q = 0; q < r; ++q) close(pipes[q][1]); /* the earlier ranks' write ends */
      close(pipes[r][1]);
      ncclUniqueId ids[NIDS];
      size_t got = 0;
      while (got < sizeof ids) {
        ssize_t n = read(pipes[r][0], (char*)ids + got, sizeof ids - got);
        if (n <= 0) _exit(3); /* the parent gave up: no id */
        got += (size_t)n;
      }
      _exit(child(ids, r));
    }
    close(pipes[r][0]);
    if (pids[r] < 0) {
      CHECK(0, "fork for rank %d", r);
      close(pipes[r][1]);
      break;
    }
    ++forked;
  }
  ncclUniqueId ids[NIDS];
  ncclResult_t idResult = forked == NPROC ? ncclSuccess : ncclInternalError;
  for (int i = 0; i < NIDS && idResult == ncclSuccess; ++i) idResult = ncclGetUniqueId(&ids[i]);
  CHECK(forked < NPROC || idResult == ncclSuccess, "ncclGetUniqueId: %s",
        ncclGetErrorString(idResult));
  for (int r = 0; r < forked; ++r) {
    if (idResult == ncclSuccess)
      CHECK(write(pipes[r][1], ids, sizeof ids) == (ssize_t)sizeof ids, "ids to rank %d", r);
    close(pipes[r][1]); /* without an id the child reads EOF and exits */
  }
  for (int r = 0; r < forked; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process rank %d: status 0x%x", r, status);
  }
}

int main(void) {
  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE && version == 22203, "version %d", version);
  for (size_t i = 0; i < sizeof twins / sizeof twins[0]; ++i)
    CHECK(twins[i] != NULL, "twin %zu", i);
  CHECK(strcmp(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclSuccess)) != 0,
        "error strings");
  processes(); /* first: it forks, and no thread may run yet (see there) */
  singleProcess();
  memory();
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
