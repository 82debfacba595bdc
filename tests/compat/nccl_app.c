/*
 * An NCCL program as its users write them, with nothing of Braid in it: it includes <nccl.h>,
 * links with -lnccl and runs on whatever libnccl.so.2 the loader finds. nccl_install.sh builds
 * it three ways (against an installed Braid through pkg-config; against NVIDIA's NCCL, then
 * run on Braid's libnccl.so.2 through LD_LIBRARY_PATH) and checks what it prints.
 * Host buffers: it needs no GPU on Braid (NVIDIA's NCCL would refuse them).
 *
 * It makes NRANKS communicators two ways, ncclCommInitAll from one thread and
 * ncclCommInitRankConfig with NCCL_CONFIG_INITIALIZER from a thread a rank (so the config's
 * size is the one of the header the program was built with), all-reduces in a group and
 * checks every element. Prints "nccl_app: version V, N ranks, ok" and exits 0, else names the
 * failing call and exits 1.
 */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NRANKS 3
#define COUNT 1000

#define CHECK(call)                                                                    \
  do {                                                                                 \
    ncclResult_t r_ = (call);                                                          \
    if (r_ != ncclSuccess) {                                                           \
      fprintf(stderr, "nccl_app: %s failed: %s (%s)\n", #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                 \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static int checkSum(const float* buf, const char* how) {
  for (int i = 0; i < COUNT; ++i) {
    /* rank r contributes r + i: the sum is NRANKS*i + NRANKS*(NRANKS-1)/2 */
    const float want = (float)(NRANKS * i + NRANKS * (NRANKS - 1) / 2);
    if (buf[i] != want) {
      fprintf(stderr, "nccl_app: %s: element %d is %g, want %g\n", how, i, buf[i], want);
      return 0;
    }
  }
  return 1;
}

static float bufs[NRANKS][COUNT];
static ncclUniqueId id;

static void fill(int rank) {
  for (int i = 0; i < COUNT; ++i) bufs[rank][i] = (float)(rank + i);
}

static void* rankMain(void* arg) {
  const int rank = (int)(size_t)arg;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t comm;
  CHECK(ncclCommInitRankConfig(&comm, NRANKS, id, rank, &config));
  CHECK(ncclAllReduce(bufs[rank], bufs[rank], COUNT, ncclFloat, ncclSum, comm, 0));
  CHECK(ncclCommDestroy(comm));
  return NULL;
}

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version));

  ncclComm_t comms[NRANKS];
  CHECK(ncclCommInitAll(comms, NRANKS, NULL));
  for (int r = 0; r < NRANKS; ++r) fill(r);
  CHECK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r)
    CHECK(ncclAllReduce(bufs[r], bufs[r], COUNT, ncclFloat, ncclSum, comms[r], 0));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < NRANKS; ++r) {
    if (!checkSum(bufs[r], "ncclCommInitAll")) return 1;
    CHECK(ncclCommDestroy(comms[r]));
  }

  CHECK(ncclGetUniqueId(&id));
  for (int r = 0; r < NRANKS; ++r) fill(r);
  pthread_t threads[NRANKS];
  for (int r = 0; r < NRANKS; ++r)
    if (pthread_create(&threads[r], NULL, rankMain, (void*)(size_t)r) != 0) return 1;
  for (int r = 0; r < NRANKS; ++r) pthread_join(threads[r], NULL);
  for (int r = 0; r < NRANKS; ++r)
    if (!checkSum(bufs[r], "ncclCommInitRankConfig")) return 1;

  printf("nccl_app: version %d, %d ranks, ok\n", version, NRANKS);
  return 0;
}
