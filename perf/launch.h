/// @file launch.h
/// Where the perf binaries' ranks come from: threads of this process (-t), times the
/// processes of braidrun (BRAID_UNIQUE_ID, BRAID_RANK, BRAID_NRANKS), of mpirun (the
/// unique id travels by MPI_Bcast; built with BRAID_HAVE_MPI), or of any launcher that
/// braidCommInitFromEnv knows (srun, torchrun, mpirun without MPI) when a rendezvous
/// address is set: BRAID_COMM_ID=host:port, or torchrun's MASTER_ADDR and MASTER_PORT.
#ifndef BRAID_PERF_LAUNCH_H_
#define BRAID_PERF_LAUNCH_H_

#include <string>

#include "braid/braid.h"
#include "options.h"

namespace braid::perf {

struct Launch {
  int nprocs = 1;
  int proc = 0;
  int local_proc = 0;  // this process's index among those on its host
  bool mpi = false;
  braidUniqueId id{};
};

/// Finds this process's place in the job and the unique id every rank joins with, in this
/// order: BRAID_UNIQUE_ID (braidUniqueIdFromEnv); mpirun's variables when built with MPI;
/// BRAID_COMM_ID / MASTER_ADDR (braidUniqueIdFromEnv: rank 0 starts the bootstrap root
/// there); else this process alone. Exits with status 2 (bad environment) or 1 (no unique
/// id) after a message naming the cause.
Launch DetectLaunch(const Options& o, int* argc, char*** argv);

/// Ends the whole job at once with status 1: peers blocked in a collective would otherwise
/// wait for this rank until BRAID_TIMEOUT. braidrun and mpirun then stop the others.
[[noreturn]] void Abort(const Launch& l);

/// Prints "prog: msg" and exits with status 2.
[[noreturn]] void LaunchError(const Options& o, const std::string& msg);

/// Ends MPI if this launch started it.
void FinishLaunch(const Launch& l);

}  // namespace braid::perf

#endif  // BRAID_PERF_LAUNCH_H_
