// Rank discovery for the perf binaries; see launch.h.
#include "launch.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef BRAID_HAVE_MPI
// The C API is all we use; MPI's C++ bindings only bring warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace braid::perf {
namespace {

bool EnvInt(const char* name, int* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < 0 || v > INT_MAX) return false;
  *value = static_cast<int>(v);
  return true;
}

bool EnvSet(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

// braidUniqueIdFromEnv: rank, size and unique id from the launcher's variables (braidrun,
// or srun / torchrun / mpirun with a rendezvous address). Rank 0 starts the bootstrap root.
Launch FromEnv(const Options& o) {
  Launch l;
  int local = -1;
  const braidResult_t r = braidUniqueIdFromEnv(&l.id, &l.proc, &l.nprocs, &local);
  if (r == braidInvalidArgument) LaunchError(o, braidGetLastError(nullptr));
  if (r != braidSuccess) {
    fprintf(stderr, "%s: %s: %s\n", o.prog, braidGetErrorString(r), braidGetLastError(nullptr));
    exit(1);
  }
  l.local_proc = local >= 0 ? local : l.proc;
  return l;
}

}  // namespace

void LaunchError(const Options& o, const std::string& msg) {
  fprintf(stderr, "%s: %s\n", o.prog, msg.c_str());
  exit(2);
}

Launch DetectLaunch(const Options& o, int* argc, char*** argv) {
  Launch l;
  (void)argc;
  (void)argv;
  // braidrun: the unique id is in the environment.
  if (EnvSet("BRAID_UNIQUE_ID")) return FromEnv(o);
  int mpi_size = 0;
  const bool mpirun = EnvInt("OMPI_COMM_WORLD_SIZE", &mpi_size) || EnvInt("PMI_SIZE", &mpi_size);
#ifdef BRAID_HAVE_MPI
  if (mpirun) {
    MPI_Init(argc, argv);
    l.mpi = true;
    MPI_Comm_size(MPI_COMM_WORLD, &l.nprocs);
    MPI_Comm_rank(MPI_COMM_WORLD, &l.proc);
    if (!EnvInt("OMPI_COMM_WORLD_LOCAL_RANK", &l.local_proc) &&
        !EnvInt("MPI_LOCALRANKID", &l.local_proc) && !EnvInt("PMI_LOCAL_RANK", &l.local_proc)) {
      l.local_proc = 0;
    }
    int ok = 1;
    if (l.proc == 0) {
      const braidResult_t r = braidGetUniqueId(&l.id);
      if (r != braidSuccess) {
        fprintf(stderr, "%s: rank 0: braidGetUniqueId failed: %s: %s\n", o.prog,
                braidGetErrorString(r), braidGetLastError(nullptr));
        ok = 0;
      }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
      MPI_Finalize();
      exit(1);
    }
    MPI_Bcast(&l.id, sizeof(l.id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return l;
  }
#endif
  // srun, torchrun, or mpirun without MPI: a rendezvous address names rank 0's root.
  if (EnvSet("BRAID_COMM_ID") || EnvSet("MASTER_ADDR") || EnvSet("MASTER_PORT")) return FromEnv(o);
  if (mpirun && mpi_size > 1) {
    LaunchError(o, "started by mpirun as one of " + std::to_string(mpi_size) +
                       " processes, but this binary was built without MPI (BRAID_HAVE_MPI); "
                       "rebuild with -Dmpi=enabled, set BRAID_COMM_ID=host:port (rank 0's host "
                       "and a free port), or launch with braidrun -n " +
                       std::to_string(mpi_size));
  }
  int size = 0;
  for (const char* var : {"SLURM_NTASKS", "WORLD_SIZE"}) {
    if (EnvInt(var, &size) && size > 1) {
      // A batch script's own environment says so too: run alone, but say why.
      fprintf(stderr,
              "%s: note: %s=%d, but no rendezvous is set (BRAID_COMM_ID=host:port, or "
              "MASTER_ADDR and MASTER_PORT): this process runs alone\n",
              o.prog, var, size);
      break;
    }
  }
  const braidResult_t r = braidGetUniqueId(&l.id);
  if (r != braidSuccess) {
    fprintf(stderr, "%s: braidGetUniqueId failed: %s: %s\n", o.prog, braidGetErrorString(r),
            braidGetLastError(nullptr));
    exit(1);
  }
  return l;
}

// Ends the whole job at once: peers blocked in a collective would otherwise wait for this
// rank until BRAID_TIMEOUT. braidrun and mpirun then stop the other processes.
// quick_exit skips static destructors (other threads may be inside Braid) but lets Braid
// unlink the shared memory of ranks still in init.
void Abort(const Launch& l) {
  fflush(stdout);
  fflush(stderr);
#ifdef BRAID_HAVE_MPI
  if (l.mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#else
  (void)l;
#endif
  std::quick_exit(1);
}

void FinishLaunch(const Launch& l) {
#ifdef BRAID_HAVE_MPI
  if (l.mpi) MPI_Finalize();
#else
  (void)l;
#endif
}

}  // namespace braid::perf
