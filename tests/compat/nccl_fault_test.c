/* NCCL 2.27-2.29's fault tolerance from C, against Braid's nccl.h and libnccl.so.2 alone, on
 * thread ranks, each step checked with an exact all-reduce:
 *  - 4 ranks (ncclCommInitAll); ncclCommShrink excluding rank 3, which does not call it;
 *  - ncclCommGetUniqueId on the shrunk rank 0 and ncclCommGrow back to 4 with a new thread;
 *  - ncclCommRevoke on rank 0 while ranks 1-3 wait in an all-reduce rank 0 never joins: they
 *    end with ncclInvalidUsage naming the revocation, later calls too;
 *  - ncclCommShrink of the revoked communicator with NCCL_SHRINK_ABORT and no list: all 4;
 *  - bad arguments (flags, an excluded caller, a NULL newcomm) refused by name;
 *  - windows and one-sided calls: each rank puts into its right neighbour's window with a
 *    signal, signals again, waits for its left neighbour's two signals, and finds the data;
 *  - ncclCommSuspend / ncclCommResume on a host communicator: calls refused while suspended,
 *    ncclCommMemStats says so (and 0 bytes of device memory), calls run again after.
 * The pncclX twins take part in the same collective calls as the ncclX names.
 * Exits 0 when all hold, 1 with a message otherwise. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat_check.h"

/* The ranks are threads: CHECK's count is kept under a lock. */
static pthread_mutex_t checkLock = PTHREAD_MUTEX_INITIALIZER;
#undef CHECK
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      pthread_mutex_lock(&checkLock);                      \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
      pthread_mutex_unlock(&checkLock);                    \
    }                                                      \
  } while (0)

#define N 4

static ncclComm_t comms[N], shrunk[N], grown[N], again[N];
static ncclUniqueId growId;

/* Rank r gives r + 1 in every element; the sum over `n` ranks is n(n+1)/2. */
static void allReduce(ncclComm_t comm, int rank, int n) {
  float buf[256];
  for (int i = 0; i < 256; ++i) buf[i] = (float)(rank + 1);
  ncclResult_t r = ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, NULL);
  CHECK(r == ncclSuccess, "rank %d: all-reduce on %d ranks: %s", rank, n, ncclGetLastError(comm));
  for (int i = 0; i < 256 && r == ncclSuccess; ++i)
    CHECK(buf[i] == (float)(n * (n + 1) / 2), "rank %d: element %d is %g", rank, i, buf[i]);
}

static void* shrinkMain(void* arg) {
  const int r = (int)(long)arg;
  int exclude[1] = {3};
  /* Rank 0 calls the name, the others the twin: one collective call either way. */
  ncclResult_t res =
      r == 0 ? ncclCommShrink(comms[r], exclude, 1, &shrunk[r], NULL, NCCL_SHRINK_DEFAULT)
             : pncclCommShrink(comms[r], exclude, 1, &shrunk[r], NULL, NCCL_SHRINK_DEFAULT);
  CHECK(res == ncclSuccess && shrunk[r] != NULL, "rank %d: shrink: %s", r, ncclGetLastError(NULL));
  if (res != ncclSuccess) return NULL;
  int n = 0, me = -1;
  ncclCommCount(shrunk[r], &n);
  ncclCommUserRank(shrunk[r], &me);
  CHECK(n == 3 && me == r, "rank %d: shrunk to %d ranks, rank %d", r, n, me);
  allReduce(shrunk[r], r, 3);
  return NULL;
}

static void* growMain(void* arg) {
  const int r = (int)(long)arg;
  ncclResult_t res;
  if (r == 3) /* a new process would do the same: comm NULL, the id, its new rank */
    res = pncclCommGrow(NULL, N, &growId, 3, &grown[r], NULL);
  else
    res = ncclCommGrow(shrunk[r], N, r == 0 ? &growId : NULL, -1, &grown[r], NULL);
  CHECK(res == ncclSuccess, "rank %d: grow: %s", r, ncclGetLastError(NULL));
  if (res == ncclSuccess) allReduce(grown[r], r, N);
  return NULL;
}

static void* revokeMain(void* arg) {
  const int r = (int)(long)arg;
  float x = 1;
  if (r == 0) {
    usleep(100000);
    CHECK(ncclCommRevoke(grown[0], NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke: %s",
          ncclGetLastError(grown[0]));
    CHECK(pncclCommRevoke(grown[0], NCCL_REVOKE_DEFAULT) == ncclSuccess, "a second revoke");
  } else {
    ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, grown[r], NULL);
    CHECK(res == ncclInvalidUsage && strstr(ncclGetLastError(grown[r]), "revoked") != NULL,
          "rank %d: the waiting all-reduce gave %d: %s", r, (int)res, ncclGetLastError(grown[r]));
  }
  /* Every later call is refused; then the survivors (all 4 here) shrink with no list. */
  for (int i = 0; i < 2000; ++i) {
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, grown[r], NULL) == ncclInvalidUsage) break;
    CHECK(i < 1999, "rank %d: calls still run after the revocation", r);
    usleep(1000);
  }
  ncclResult_t res = ncclCommShrink(grown[r], NULL, 0, &again[r], NULL, NCCL_SHRINK_ABORT);
  CHECK(res == ncclSuccess, "rank %d: shrink after revoke: %s", r, ncclGetLastError(NULL));
  if (res == ncclSuccess) allReduce(again[r], r, N);
  return NULL;
}

static void onThreads(void* (*fn)(void*), int n) {
  pthread_t t[N];
  for (long r = 0; r < n; ++r) pthread_create(&t[r], NULL, fn, (void*)r);
  for (int r = 0; r < n; ++r) pthread_join(t[r], NULL);
}

static void badArguments(ncclComm_t comm) {
  ncclComm_t out = NULL;
  int self[1] = {0}, outOfRange[1] = {9};
  CHECK(ncclCommShrink(comm, NULL, 0, &out, NULL, 7) == ncclInvalidArgument, "flag 7 accepted");
  CHECK(strstr(ncclGetLastError(NULL), "shrinkFlags") != NULL, "message: %s",
        ncclGetLastError(NULL));
  CHECK(ncclCommShrink(comm, self, 1, &out, NULL, 0) == ncclInvalidArgument, "self accepted");
  CHECK(ncclCommShrink(comm, outOfRange, 1, &out, NULL, 0) == ncclInvalidArgument,
        "rank 9 accepted");
  CHECK(ncclCommShrink(comm, NULL, 0, NULL, NULL, 0) == ncclInvalidArgument, "NULL newcomm");
  CHECK(ncclCommRevoke(comm, 3) == ncclInvalidArgument, "revoke flag 3 accepted");
  CHECK(ncclCommGetUniqueId(comm, NULL) == ncclInvalidArgument, "NULL id accepted");
  CHECK(pncclCommGetUniqueId(NULL, &growId) == ncclInvalidArgument, "NULL comm accepted");
  CHECK(ncclCommGrow(NULL, 4, NULL, 3, &out, NULL) == ncclInvalidArgument,
        "a joining rank without an id accepted");
  CHECK(out == NULL, "an output was written");
}

/* Rank r puts 256 int32 (r * 1000 + i) into rank r + 1's window, signals it once more, and
 * waits for both signals of rank r - 1; odd ranks call the pncclX twins. */
static void* windowMain(void* arg) {
  const int r = (int)(long)arg, odd = r % 2;
  const int right = (r + 1) % N, left = (r + N - 1) % N;
  ncclComm_t c = again[r];
  int32_t win[256], mine[256];
  for (int i = 0; i < 256; ++i) {
    win[i] = -1;
    mine[i] = r * 1000 + i;
  }
  ncclWindow_t w = NULL;
  void* user = NULL;
  NCCLCHECK(odd ? pncclCommWindowRegister(c, win, sizeof win, &w, NCCL_WIN_DEFAULT)
                : ncclCommWindowRegister(c, win, sizeof win, &w, NCCL_WIN_DEFAULT));
  NCCLCHECK(odd ? pncclWinGetUserPtr(c, w, &user) : ncclWinGetUserPtr(c, w, &user));
  CHECK(user == (void*)win, "rank %d: the window's user pointer", r);
  NCCLCHECK(odd ? pncclPutSignal(mine, 256, ncclInt32, right, w, 0, 1, 0, 0, c, NULL)
                : ncclPutSignal(mine, 256, ncclInt32, right, w, 0, 1, 0, 0, c, NULL));
  NCCLCHECK(odd ? pncclSignal(right, 1, 0, 0, c, NULL) : ncclSignal(right, 1, 0, 0, c, NULL));
  ncclWaitSignalDesc_t desc = {2, left, 1, 0};
  NCCLCHECK(odd ? pncclWaitSignal(1, &desc, c, NULL) : ncclWaitSignal(1, &desc, c, NULL));
  for (int i = 0; i < 256; ++i)
    if (win[i] != left * 1000 + i) {
      CHECK(0, "rank %d: window element %d is %d", r, i, win[i]);
      break;
    }
  CHECK(ncclPutSignal(mine, 257, ncclInt32, right, w, 0, 1, 0, 0, c, NULL) == ncclInvalidArgument,
        "rank %d: a put past the window accepted", r);
  NCCLCHECK(odd ? pncclCommWindowDeregister(c, w) : ncclCommWindowDeregister(c, w));
  return NULL;
}

/* Each rank suspends and resumes its own communicator (local calls); the all-reduce runs on
 * every rank before and after. */
static void* suspendMain(void* arg) {
  const int r = (int)(long)arg;
  ncclComm_t c = again[r];
  uint64_t v = 7;
  float x = 1;
  CHECK(ncclCommSuspend(c, 2) == ncclInvalidArgument, "rank %d: flags 2 accepted", r);
  CHECK(ncclCommResume(c) == ncclInvalidUsage, "rank %d: resume while running accepted", r);
  NCCLCHECK(r % 2 ? pncclCommSuspend(c, NCCL_SUSPEND_MEM) : ncclCommSuspend(c, NCCL_SUSPEND_MEM));
  CHECK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 1,
        "rank %d: not suspended (%llu)", r, (unsigned long long)v);
  CHECK(pncclCommMemStats(c, ncclStatGpuMemTotal, &v) == ncclSuccess && v == 0,
        "rank %d: %llu bytes of device memory", r, (unsigned long long)v);
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL) == ncclInvalidUsage &&
            strstr(ncclGetLastError(c), "suspended") != NULL,
        "rank %d: a call ran while suspended", r);
  NCCLCHECK(r % 2 ? pncclCommResume(c) : ncclCommResume(c));
  allReduce(c, r, N);
  return NULL;
}

int main(void) {
  NCCLCHECK(ncclCommInitAll(comms, N, NULL));
  if (failures == 0) badArguments(comms[0]);
  onThreads(shrinkMain, 3);
  NCCLCHECK(ncclCommDestroy(comms[3]));
  for (int r = 0; r < 3; ++r) NCCLCHECK(ncclCommDestroy(comms[r]));
  if (failures == 0) {
    NCCLCHECK(ncclCommGetUniqueId(shrunk[0], &growId));
    onThreads(growMain, N);
  }
  if (failures == 0) onThreads(revokeMain, N);
  if (failures == 0) onThreads(windowMain, N);
  if (failures == 0) onThreads(suspendMain, N);
  for (int r = 0; r < N; ++r) {
    if (shrunk[r]) ncclCommDestroy(shrunk[r]);
    if (grown[r]) ncclCommDestroy(grown[r]);
    if (again[r]) ncclCommDestroy(again[r]);
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
