// braid-train's training loops: data parallelism (DDP / ZeRO, with vit-moe's expert
// parallelism), pipeline and tensor parallelism, and the parameter server. Each prints rank
// 0's per-epoch table or JSON lines.
#pragma once

#include <string>

#include "braid/braid.h"
#include "train_options.h"
#include "training/data.h"

namespace braid::training::cli {

/// Trains this rank of comm (nranks in all) as o says; a failure ends the process (fail).
// Trains this rank; *comm may be replaced (--elastic), the caller destroys what is left there.
void runRank(braidComm_t* comm, int rank, int nranks, const Options& o, const ImageDataset& train,
             const ImageDataset& test);

/// A failed rank ends the whole job: prints "braid-train: rank R: MSG" and quick_exit(1) (its
/// peers would otherwise wait in a collective until BRAID_TIMEOUT; braidrun stops the other
/// processes when one exits non-zero).
// --elastic (train_elastic.cc): trains on *comm and replaces it with each shrunk communicator;
// the caller destroys the last one (NULL where the survivors left this rank out).
void trainElastic(braidComm_t* comm, int rank, int nranks, const Options& o,
                  const ImageDataset& train, const ImageDataset& test);

[[noreturn]] void fail(int rank, const std::string& msg);

}  // namespace braid::training::cli
