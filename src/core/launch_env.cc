// Ranks from the launcher's environment: braidCommInitFromEnv and braidUniqueIdFromEnv.
//
// Rank and size come from the first launcher whose variables are set (braidrun, Open MPI,
// MPICH Hydra, srun, torchrun); the rendezvous from BRAID_UNIQUE_ID, else BRAID_COMM_ID,
// else torchrun's MASTER_ADDR / MASTER_PORT + 1. For an address rendezvous rank 0 starts
// the bootstrap root at that port and every rank derives the same 32-byte secret from
// BRAID_COMM_SECRET or the job's identifier, so no id has to travel between processes.
// Everything is read at call time (not from the cached config), so a process may set the
// variables itself before calling.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "braid/braid.h"
#include "core/bootstrap.h"

namespace braid {
namespace {

// The largest job the bootstrap root accepts.
constexpr long long kMaxRanks = 1 << 24;

// A variable's value, or nullptr when unset or empty (an empty value counts as unset).
const char* envValue(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// Strict decimal integer in [lo, hi]: digits only, no sign, space or suffix.
bool parseInt(const char* text, long long lo, long long hi, long long* out) {
  if (text == nullptr || *text == '\0') return false;
  long long v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > hi) return false;
  }
  if (v < lo) return false;
  *out = v;
  return true;
}

// One launcher's variables, in the order braidCommInitFromEnv looks for them.
struct RankVars {
  const char* rank;
  const char* size;
  const char* local[2];  // local rank: the first one set (nullptr: none)
  const char* launcher;
};
constexpr RankVars kBraidrun = {
    "BRAID_RANK", "BRAID_NRANKS", {"BRAID_LOCAL_RANK", nullptr}, "braidrun"};
constexpr RankVars kOpenMpi = {"OMPI_COMM_WORLD_RANK",
                               "OMPI_COMM_WORLD_SIZE",
                               {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
                               "Open MPI's mpirun"};
constexpr RankVars kHydra = {
    "PMI_RANK", "PMI_SIZE", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, "MPICH's mpiexec (Hydra)"};
constexpr RankVars kSlurm = {"SLURM_PROCID", "SLURM_NTASKS", {"SLURM_LOCALID", nullptr}, "srun"};
constexpr RankVars kTorch = {"RANK", "WORLD_SIZE", {"LOCAL_RANK", nullptr}, "torchrun"};

std::string setting(const char* name, const char* value) {
  return std::string(name) + "=" + (value ? value : "");
}

braidResult_t detectRank(EnvLaunch* out) {
  // torchrun marks the workers it starts with TORCHELASTIC_RUN_ID; their RANK/WORLD_SIZE
  // then describe this process, while srun's or mpirun's variables, inherited from outside
  // (srun torchrun ...), describe the torchrun agent: torchrun's come first.
  std::vector<const RankVars*> order = {&kBraidrun, &kOpenMpi, &kHydra, &kSlurm, &kTorch};
  if (envValue("TORCHELASTIC_RUN_ID") && (envValue("RANK") || envValue("WORLD_SIZE")))
    order = {&kBraidrun, &kTorch, &kOpenMpi, &kHydra, &kSlurm};
  for (const RankVars* v : order) {
    const char* rankText = envValue(v->rank);
    const char* sizeText = envValue(v->size);
    if (!rankText && !sizeText) continue;
    if (!rankText || !sizeText) {
      const char* set = rankText ? v->rank : v->size;
      const char* missing = rankText ? v->size : v->rank;
      return fail(braidInvalidArgument,
                  "%s is set but %s is not: %s sets both (this process's rank and the job's "
                  "size); set the missing one, or unset %s if no launcher set it",
                  setting(set, rankText ? rankText : sizeText).c_str(), missing, v->launcher, set);
    }
    long long rank = 0, size = 0;
    if (!parseInt(sizeText, 1, kMaxRanks, &size))
      return fail(braidInvalidArgument,
                  "%s is not a job size: it must be a decimal integer in [1, %lld]",
                  setting(v->size, sizeText).c_str(), kMaxRanks);
    if (!parseInt(rankText, 0, INT_MAX, &rank))
      return fail(braidInvalidArgument,
                  "%s is not a rank: it must be a decimal integer >= 0 (and below %s=%s)",
                  setting(v->rank, rankText).c_str(), v->size, sizeText);
    if (rank >= size)
      return fail(braidInvalidArgument,
                  "%s is out of range: with %s ranks must be in [0, %lld); every process of the "
                  "job must see the same %s",
                  setting(v->rank, rankText).c_str(), setting(v->size, sizeText).c_str(), size,
                  v->size);
    out->rank = static_cast<int>(rank);
    out->nranks = static_cast<int>(size);
    out->rankSource = std::string(v->rank) + "/" + v->size + " (" + v->launcher + ")";
    out->localRank = -1;
    for (const char* name : v->local) {
      if (!name) continue;
      const char* text = envValue(name);
      if (!text) continue;
      long long local = 0;
      if (!parseInt(text, 0, INT_MAX, &local))
        return fail(braidInvalidArgument,
                    "%s is not a local rank: it must be a decimal integer >= 0",
                    setting(name, text).c_str());
      out->localRank = static_cast<int>(local);
      break;
    }
    return braidSuccess;
  }
  return fail(braidInvalidArgument,
              "no launcher variables give this process's rank: set BRAID_RANK/BRAID_NRANKS "
              "(braidrun), OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun), "
              "PMI_RANK/PMI_SIZE (mpiexec), SLURM_PROCID/SLURM_NTASKS (srun) or "
              "RANK/WORLD_SIZE (torchrun), or use braidGetUniqueId + braidCommInitRank");
}

// Resolves host (IPv4) for the variable setting `what`.
braidResult_t resolve(const std::string& host, int port, const std::string& what,
                      sockaddr_in* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return fail(braidInvalidArgument, "%s: cannot resolve host '%s' to an IPv4 address: %s",
                what.c_str(), host.c_str(), rc != 0 ? gai_strerror(rc) : "no address");
  *out = *reinterpret_cast<const sockaddr_in*>(res->ai_addr);
  out->sin_port = htons(static_cast<uint16_t>(port));
  freeaddrinfo(res);
  return braidSuccess;
}

// Splits "host:port" (BRAID_COMM_ID); IPv4 addresses and host names only.
braidResult_t parseHostPort(const char* name, const char* text, std::string* host, int* port) {
  const std::string s = text;
  const size_t colon = s.rfind(':');
  if (s[0] == '[' || (colon != std::string::npos && s.find(':') != colon))
    return fail(braidInvalidArgument,
                "%s: IPv6 addresses are not supported; give host:port with an IPv4 address or "
                "a host name",
                setting(name, text).c_str());
  long long p = 0;
  if (colon == std::string::npos || colon == 0 || !parseInt(s.c_str() + colon + 1, 1, 65535, &p))
    return fail(braidInvalidArgument,
                "%s is not host:port (e.g. node0:29500 or 10.0.0.1:29500; port in [1, 65535])",
                setting(name, text).c_str());
  *host = s.substr(0, colon);
  *port = static_cast<int>(p);
  return braidSuccess;
}

// The job's 32-byte secret: SHA-256 over a label, the first job identifier found and the
// rendezvous setting. `source` receives where it came from, for the log.
void deriveSecret(const std::string& rendezvous, uint8_t secret[32], std::string* source) {
  std::string material = "braid-comm-secret-v1";
  auto add = [&material](const std::string& part) {
    material.push_back('\0');
    material += part;
  };
  if (const char* v = envValue("BRAID_COMM_SECRET")) {
    *source = "BRAID_COMM_SECRET";
    add(*source);
    add(v);
  } else if (const char* job = envValue("SLURM_JOB_ID")) {
    const char* step = envValue("SLURM_STEP_ID");
    *source = "SLURM_JOB_ID/SLURM_STEP_ID";
    add(*source);
    add(job);
    add(step ? step : "");
  } else if (const char* run = envValue("TORCHELASTIC_RUN_ID")) {
    *source = "TORCHELASTIC_RUN_ID";
    add(*source);
    add(run);
  } else if (const char* ompi = envValue("OMPI_MCA_ess_base_jobid")) {
    *source = "OMPI_MCA_ess_base_jobid";
    add(*source);
    add(ompi);
  } else if (const char* ns = envValue("PMIX_NAMESPACE")) {
    *source = "PMIX_NAMESPACE";
    add(*source);
    add(ns);
  } else {
    *source = "the rendezvous address alone (set BRAID_COMM_SECRET)";
    add("address");
  }
  add(rendezvous);
  sha256(material.data(), material.size(), secret);
}

braidResult_t detectRendezvous(EnvLaunch* out) {
  if (const char* text = envValue("BRAID_UNIQUE_ID")) {
    out->rendezvous = "BRAID_UNIQUE_ID";
    if (braidUniqueIdFromString(text, &out->id) != braidSuccess)
      return failVerbatim(braidInvalidArgument,
                          std::string("BRAID_UNIQUE_ID=") + std::string(text).substr(0, 16) +
                              "...: " + lastError() +
                              " (braidrun sets it; a copy from another run is refused)");
    UniqueIdData data;
    if (decodeUniqueId(out->id, &data) != braidSuccess)
      return failVerbatim(braidInvalidArgument, std::string("BRAID_UNIQUE_ID: ") + lastError());
    return braidSuccess;
  }
  std::string host, origin;
  int port = 0;
  if (const char* commId = envValue("BRAID_COMM_ID")) {
    BRAID_TRY(parseHostPort("BRAID_COMM_ID", commId, &host, &port));
    origin = setting("BRAID_COMM_ID", commId);
  } else if (const char* addr = envValue("MASTER_ADDR")) {
    const char* portText = envValue("MASTER_PORT");
    long long p = 0;
    if (!portText)
      return fail(braidInvalidArgument,
                  "%s is set but MASTER_PORT is not: torchrun sets both (Braid's root listens "
                  "on MASTER_PORT + 1)",
                  setting("MASTER_ADDR", addr).c_str());
    if (!parseInt(portText, 1, 65534, &p))
      return fail(braidInvalidArgument,
                  "%s is not a port in [1, 65534] (Braid's root listens on MASTER_PORT + 1)",
                  setting("MASTER_PORT", portText).c_str());
    if (std::strchr(addr, ':') != nullptr)
      return fail(braidInvalidArgument,
                  "%s: IPv6 addresses are not supported; give an IPv4 address or a host name",
                  setting("MASTER_ADDR", addr).c_str());
    host = addr;
    port = static_cast<int>(p) + 1;
    origin = setting("MASTER_ADDR", addr) + " MASTER_PORT=" + portText + " (Braid's root: port " +
             std::to_string(port) + ")";
  } else if (const char* portText = envValue("MASTER_PORT")) {
    return fail(braidInvalidArgument,
                "%s is set but MASTER_ADDR is not: torchrun sets both; set MASTER_ADDR to rank "
                "0's host",
                setting("MASTER_PORT", portText).c_str());
  } else if (out->nranks == 1) {
    // A one-rank job needs nobody to find it: a private root, as braidGetUniqueId makes.
    out->rendezvous = "a private root (one rank)";
    return createUniqueId(&out->id);
  } else {
    return fail(braidInvalidArgument,
                "%s says %d ranks but no rendezvous variable is set: set BRAID_COMM_ID=host:port "
                "(rank 0's host and a free port), or MASTER_ADDR and MASTER_PORT (torchrun), or "
                "launch with braidrun (BRAID_UNIQUE_ID)",
                out->rankSource.c_str(), out->nranks);
  }
  out->rendezvous = origin;
  sockaddr_in root{};
  BRAID_TRY(resolve(host, port, origin, &root));
  uint8_t secret[32];
  std::string source;
  deriveSecret(origin, secret, &source);
  BRAID_INFO("BOOTSTRAP", "rank %d of %d from %s; root at %s from %s; secret from %s", out->rank,
             out->nranks, out->rankSource.c_str(), addressString(root).c_str(), origin.c_str(),
             source.c_str());
  if (out->rank == 0) return createRootAt(root, secret, origin, &out->id);
  makeUniqueId(root, secret, &out->id);
  return braidSuccess;
}

}  // namespace

braidResult_t launchFromEnv(EnvLaunch* out) {
  *out = EnvLaunch();
  BRAID_TRY(detectRank(out));
  LogRankScope scope(out->rank);
  return detectRendezvous(out);
}

}  // namespace braid

extern "C" {

braidResult_t braidUniqueIdFromEnv(braidUniqueId* id, int* rank, int* nranks, int* localRank) {
  return braid::guardApi("braidUniqueIdFromEnv", [&]() -> braidResult_t {
    if (!id) return braid::fail(braidInvalidArgument, "braidUniqueIdFromEnv: id is NULL");
    braid::EnvLaunch l;
    BRAID_TRY(braid::launchFromEnv(&l));
    *id = l.id;
    if (rank) *rank = l.rank;
    if (nranks) *nranks = l.nranks;
    if (localRank) *localRank = l.localRank;
    return braidSuccess;
  });
}

braidResult_t braidCommInitFromEnv(braidComm_t* comm) {
  return braid::guardApi("braidCommInitFromEnv", [&]() -> braidResult_t {
    if (!comm) return braid::fail(braidInvalidArgument, "braidCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    braid::EnvLaunch l;
    BRAID_TRY(braid::launchFromEnv(&l));
    braidResult_t res = braidCommInitRank(comm, l.nranks, l.id, l.rank);
    if (res != braidSuccess)
      return braid::failVerbatim(res, "braidCommInitFromEnv (rank from " + l.rankSource +
                                          ", rendezvous " + l.rendezvous +
                                          "): " + braid::lastError());
    return braidSuccess;
  });
}

}  // extern "C"
