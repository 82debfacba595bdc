// braid-train: trains the reference MLP (784-256-128-10), or a small ViT, on Fashion-MNIST with
// data parallelism over Braid: DDP (--zero 0) or ZeRO stages 1-3. Ranks are threads of this process
// (--dp N), or processes started by braidrun / mpirun / torchrun, one rank each (then --dp
// must equal the job's size). Prints, per epoch, the mean training loss, test accuracy,
// samples/s, the share of training time spent waiting for communication, and the bytes of
// parameters, gradients and optimizer state this rank holds; --json prints one JSON object per
// epoch instead. With --pp and --tp the model is also cut into pipeline stages (GPipe or 1F1B
// over --microbatches) and its Linears split Megatron-style; pp x tp x dp ranks in all.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef BRAID_HAVE_MPI
// The C API is all we use; MPI's C++ bindings only bring warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "braid/braid.h"
#include "train_loops.h"
#include "train_options.h"
#include "training/data.h"
#include "training/optimizer.h"

namespace {

using namespace braid::training;
using namespace braid::training::cli;

// A launcher that starts one process per rank leaves one of these set.
bool launchedAsRanks() {
  for (const char* v : {"BRAID_UNIQUE_ID", "BRAID_COMM_ID", "BRAID_NRANKS", "MASTER_ADDR",
                        "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (getenv(v) != nullptr) return true;
  }
  return false;
}

// mpirun (Open MPI, or MPICH's Hydra) with no rendezvous address for braidCommInitFromEnv.
bool startedByMpirunWithoutRendezvous() {
  if (getenv("OMPI_COMM_WORLD_SIZE") == nullptr && getenv("PMI_SIZE") == nullptr) return false;
  for (const char* v : {"BRAID_UNIQUE_ID", "BRAID_COMM_ID", "MASTER_ADDR"}) {
    if (getenv(v) != nullptr) return false;
  }
  return true;
}

// Rank 0's unique id to every rank through MPI_Bcast (the perf binaries' way), then
// braidCommInitRank. Without MPI, says how to launch instead.
braidResult_t initFromMpi(braidComm_t* comm) {
#ifdef BRAID_HAVE_MPI
  MPI_Init(nullptr, nullptr);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  braidUniqueId id{};
  int ok = 1;
  if (rank == 0 && braidGetUniqueId(&id) != braidSuccess) ok = 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return braidSystemError;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return braidCommInitRank(comm, nranks, id, rank);
#else
  (void)comm;
  fprintf(stderr,
          "braid-train: started by mpirun, but built without MPI (BRAID_HAVE_MPI): rebuild with "
          "-Dmpi=enabled, set BRAID_COMM_ID=host:port (rank 0's host and a free port), or "
          "launch with braidrun\n");
  exit(2);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Threads: the layout is known now, before the data is read.
  const int thread_ranks = (o.dp == 0 ? 1 : o.dp) * o.pp * o.tp;
  if (!launchedAsRanks()) {
    for (const std::string& e : {layoutError(o, thread_ranks), batchError(o, thread_ranks)})
      if (!e.empty()) usageError(e);
  }
  ImageDataset train, test;
  try {
    train = loadFashionMnist(o.data, true);
    test = loadFashionMnist(o.data, false);
    // The models take 28x28 images: a set of another size fails here, not after an epoch.
    for (const ImageDataset* set : {&train, &test})
      if (set->features != 784)
        throw std::runtime_error(std::string(set == &train ? "training" : "test") +
                                 " images have " + std::to_string(set->features) +
                                 " pixels, not 28x28 = 784");
    standardize(train, 0.2860f, 0.3530f);
    standardize(test, 0.2860f, 0.3530f);
  } catch (const std::exception& e) {
    fprintf(stderr, "braid-train: --data %s: %s\n", o.data.c_str(), e.what());
    return 1;
  }
  if (launchedAsRanks() && o.elastic && getenv("BRAID_ELASTIC_JOIN") != nullptr) {
    // A replacement that braidrun --respawn started: it joins the running job through
    // braidCommGrow (train_elastic.cc), not through the job's first unique id.
    setBlasThreads(1);
    braidComm_t comm = nullptr;
    runRank(&comm, -1, 0, o, train, test);
    if (comm) braidCommDestroy(comm);
    return 0;
  }
  if (launchedAsRanks()) {
    braidComm_t comm = nullptr;
    const bool mpi = startedByMpirunWithoutRendezvous();
    braidResult_t r = mpi ? initFromMpi(&comm) : braidCommInitFromEnv(&comm);
    if (r != braidSuccess) {
      fprintf(stderr, "braid-train: %s failed: %s: %s\n",
              mpi ? "braidCommInitRank (unique id from MPI)" : "braidCommInitFromEnv",
              braidGetErrorString(r), braidGetLastError(nullptr));
      return 1;
    }
    int rank = 0, nranks = 1;
    braidCommUserRank(comm, &rank);
    braidCommCount(comm, &nranks);
    std::string layout = layoutError(o, nranks);
    if (layout.empty()) layout = batchError(o, nranks);
    if (!layout.empty()) {
      // Every rank sees the same flags and job size, so all of them stop here.
      if (rank == 0) fprintf(stderr, "braid-train: %s\n", layout.c_str());
      braidCommDestroy(comm);
      return 2;
    }
    // One BLAS thread per rank process: ranks share the host's cores.
    if (nranks > 1) setBlasThreads(1);
    runRank(&comm, rank, nranks, o, train, test);
    if (comm) braidCommDestroy(comm);
#ifdef BRAID_HAVE_MPI
    if (mpi) MPI_Finalize();
#endif
    return 0;
  }
  const int nranks = thread_ranks;
  if (nranks > 1) setBlasThreads(1);
  std::vector<braidComm_t> comms(nranks, nullptr);
  braidResult_t r = braidCommInitAll(comms.data(), nranks, nullptr);
  if (r != braidSuccess) {
    fprintf(stderr, "braid-train: braidCommInitAll(%d) failed: %s: %s\n", nranks,
            braidGetErrorString(r), braidGetLastError(nullptr));
    return 1;
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] { runRank(&comms[rank], rank, nranks, o, train, test); });
  }
  for (auto& t : threads) t.join();
  for (braidComm_t c : comms)
    if (c) braidCommDestroy(c);
  return 0;
}
