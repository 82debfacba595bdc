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

}  // namespace

void LaunchError(const Options& o, const std::string& msg) {
  fprintf(stderr, "%s: %s\n", o.prog, msg.c_str());
  exit(2);
}

Launch DetectLaunch(const Options& o, int* argc, char*** argv) {
  Launch l;
  (void)argc;
  (void)argv;
  if (const char* text = getenv("BRAID_UNIQUE_ID"); text != nullptr) {
    if (!EnvInt("BRAID_RANK", &l.proc) || !EnvInt("BRAID_NRANKS", &l.nprocs) || l.nprocs < 1 ||
        l.proc >= l.nprocs) {
      LaunchError(o,
                  "BRAID_UNIQUE_ID is set but BRAID_RANK / BRAID_NRANKS are missing or "
                  "invalid (need 0 <= BRAID_RANK < BRAID_NRANKS); launch with braidrun");
    }
    if (braidUniqueIdFromString(text, &l.id) != braidSuccess) {
      LaunchError(o,
                  "BRAID_UNIQUE_ID is not a unique id (256 hex digits from "
                  "braidUniqueIdToString): " +
                      std::string(braidGetLastError(nullptr)));
    }
    if (!EnvInt("BRAID_LOCAL_RANK", &l.local_proc)) l.local_proc = l.proc;
    return l;
  }
  int mpi_size = 0;
  if (EnvInt("OMPI_COMM_WORLD_SIZE", &mpi_size) || EnvInt("PMI_SIZE", &mpi_size)) {
#ifdef BRAID_HAVE_MPI
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
#else
    if (mpi_size > 1) {
      LaunchError(o, "started by mpirun as one of " + std::to_string(mpi_size) +
                         " processes, but this binary was built without MPI (BRAID_HAVE_MPI); "
                         "rebuild with -Dmpi=enabled or launch with braidrun -n " +
                         std::to_string(mpi_size));
    }
#endif
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
