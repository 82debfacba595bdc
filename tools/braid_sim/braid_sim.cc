// braid-sim: predicts, without running anything, every algorithm's time and bus bandwidth
// for each collective and size on a machine built from a topology file replicated over
// hosts, and prints the selector's choice and its pipelining step (`piece`: the chunk, or
// the smaller step the selector picks for the call). A thin program over braid/braid_model.h.
//   braid-sim --topo FILE --hosts H [--ranks-per-host R] [--nic-gbps G] [--nvswitch LINKS]
//   [--mnnvl]
//             [--calibration FILE]
//             [--collective NAME|all]
//             [-b MIN] [-e MAX] [-f FACTOR] [-d DTYPE] [--json] [--simulate]
//             [--mnnvl-domain K] [--nvls on|off] [--nvls-channels C]
//             [--what-if algo=A,B | --what-if topo=FILE]
// Sizes are nccl-tests' size column (-b 8 -e 256M -f 2 by default). --simulate also plays the
// schedules (simulate.h) where the job has at most 1024 ranks, next to the closed forms.
// NCCL's device algorithms (NVLS, NVLSTree, PAT: algorithms/device_schedule.h) are columns too,
// starred; --what-if compares two algorithm sets or two topologies (what_if.cc).
// Exit status: 0 success, 1 failure (message on stderr), 2 usage error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "braid/braid_model.h"
#include "what_if.h"

namespace {

using braid_sim::checkSizes;
using braid_sim::makeModel;
using braid_sim::runWhatIf;

// The largest call braidModelPredict prices (count x element x ranks), as any buffer.
constexpr size_t kMaxBytes = size_t{1} << 48;

// The collectives braid-sim predicts, as braidListAlgorithms names them.
const char* const kCollectives[] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                    "reduce",    "alltoall",      "gather",    "scatter"};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: braid-sim --topo FILE --hosts H [--ranks-per-host R] [--collective NAME|all]\n"
      "                 [-b MIN] [-e MAX] [-f FACTOR] [-d DTYPE] [--json] [--simulate]\n"
      "  --topo FILE          a topology file braid-topo reads (NCCL or hwloc XML, ...)\n"
      "  --hosts H            copies of that host, joined by its NICs\n"
      "  --ranks-per-host R   default: one per GPU (per core without GPUs)\n"
      "  --nic-gbps G         speed of NICs the file lists without one (default 100)\n"
      "  --mnnvl              the hosts are one NVLink domain (GB200/GB300 NVL72 racks): GPUs\n"
      "                       reach each other over NVLink, not the NICs\n"
      "  --nvswitch LINKS     GPUs sit on NVSwitches with LINKS NVLinks each (files that leave\n"
      "                       NVLink to NCCL's detection)\n"
      "  --calibration FILE   link figures measured by braid-tune --calibrate (override the\n"
      "                       topology's)\n"
      "  --collective NAME    allreduce, reducescatter, allgather, broadcast, reduce, alltoall,\n"
      "                       gather, scatter, or all (default allreduce)\n"
      "  -b, -e, -f           sizes MIN..MAX bytes (K, M, G, T suffixes; 1..2^48, and the call\n"
      "                       on all ranks at most 2^48 bytes), times FACTOR (an integer >= 2)\n"
      "                       each step (default 8, 256M, 2), as nccl-tests'\n"
      "  -d DTYPE             float (default), half, bfloat16, double, int32, int8\n"
      "  --json               one JSON array of {collective, bytes, chosen, piece_bytes,\n"
      "                       algorithms} (NCCL's device algorithms: device_only true)\n"
      "  --simulate           also play the schedules (at most 1024 ranks)\n"
      "  --mnnvl-domain K     with --mnnvl: K hosts per NVLink domain (an NVL72 rack: 18), the\n"
      "                       domains joined by the NICs (default: all hosts one domain); K must\n"
      "                       be 1..H and divide H (whole domains): otherwise a usage error\n"
      "  --nvls on|off        NVLink SHARP on GPUs that have it (NCCL_NVLS_ENABLE; default on)\n"
      "  --nvls-channels C    NVLS channels, 1..64 (NCCL_NVLS_NCHANNELS; default 16)\n"
      "  --what-if algo=A,B   compare two algorithm sets on this job: each of A and B is an\n"
      "                       algorithm or several joined by '+' (nvls+nvlstree), or 'all';\n"
      "                       per size, each set's pick, time and busbw, where its time goes\n"
      "                       and B/A; one --what-if per run\n"
      "  --what-if topo=FILE  compare the job on --topo (A) with the same job on FILE (B), at\n"
      "                       the same sizes (each side's count per rank from its own ranks)\n"
      "  where the time goes: nvlink, network and reduce are each resource's busy time (us) on\n"
      "                       the busiest rank; they overlap, so their sum may exceed time;\n"
      "                       latency = time - max(nvlink, network, reduce)\n"
      "Columns of nvls, nvlstree and pat are NCCL's GPU-kernel algorithms (marked *): priced\n"
      "from their device schedules, chosen where they are fastest, but not run by Braid.\n");
}

using braid_sim::Dtype;
const Dtype kDtypes[] = {{"float", braidFloat32, 4},     {"half", braidFloat16, 2},
                         {"bfloat16", braidBfloat16, 2}, {"double", braidFloat64, 8},
                         {"int32", braidInt32, 4},       {"int8", braidInt8, 1}};

}  // namespace

int main(int argc, char** argv) {
  setenv("BRAID_DEBUG", "NONE", 0);  // errors are printed once, by this program
  std::string topoFile, collName = "allreduce", dtypeName = "float", calibration;
  int hosts = 0, perHost = 0, nvswitch = 0;
  double nicGbps = 100;
  size_t minBytes = 8, maxBytes = 256u << 20, factor = 2;
  bool json = false, simulate = false, mnnvl = false, nvlsOff = false;
  int domainHosts = 0, nvlsChannels = 0;
  std::string whatIf;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    auto intArg = [&](int* v) {
      char* end = nullptr;
      const long x = std::strtol(argv[++i], &end, 10);
      if (*end || x < 1 || x > (1 << 24)) return false;
      *v = static_cast<int>(x);
      return true;
    };
    bool ok = true;
    if (a == "--topo" && hasValue) {
      topoFile = argv[++i];
    } else if (a == "--hosts" && hasValue) {
      ok = intArg(&hosts);
    } else if (a == "--ranks-per-host" && hasValue) {
      ok = intArg(&perHost);
    } else if (a == "--nic-gbps" && hasValue) {
      char* end = nullptr;
      nicGbps = std::strtod(argv[++i], &end);
      ok = *end == '\0' && std::isfinite(nicGbps) && nicGbps > 0 && nicGbps < 1e6;
    } else if (a == "--nvswitch" && hasValue) {
      ok = intArg(&nvswitch) && nvswitch <= 64;
    } else if (a == "--calibration" && hasValue) {
      calibration = argv[++i];
    } else if (a == "--collective" && hasValue) {
      collName = argv[++i];
    } else if ((a == "-b" || a == "--minbytes") && hasValue) {
      ok = braidParseSize(argv[++i], &minBytes) == braidSuccess;
    } else if ((a == "-e" || a == "--maxbytes") && hasValue) {
      ok = braidParseSize(argv[++i], &maxBytes) == braidSuccess;
    } else if ((a == "-f" || a == "--stepfactor") && hasValue) {
      // A plain integer, as nccl-tests' -f (not a byte count: "2K" is refused).
      const char* v = argv[++i];
      ok = *v != '\0' && std::strspn(v, "0123456789") == std::strlen(v) && std::strlen(v) < 10;
      if (ok) factor = std::strtoull(v, nullptr, 10);
      ok = ok && factor >= 2;
    } else if ((a == "-d" || a == "--datatype") && hasValue) {
      dtypeName = argv[++i];
    } else if (a == "--mnnvl-domain" && hasValue) {
      if (!intArg(&domainHosts)) {
        std::fprintf(stderr,
                     "braid-sim: bad value '%s' for --mnnvl-domain: K hosts per NVLink domain, "
                     "1..H (--hosts) and dividing H\n",
                     argv[i]);
        return 2;
      }
    } else if (a == "--nvls" && hasValue) {
      const std::string v = argv[++i];
      ok = v == "on" || v == "off";
      nvlsOff = v == "off";
    } else if (a == "--nvls-channels" && hasValue) {
      ok = intArg(&nvlsChannels) && nvlsChannels <= 64;
    } else if (a == "--what-if" && hasValue) {
      if (!whatIf.empty()) {
        std::fprintf(stderr, "braid-sim: --what-if given twice (%s, then %s): give one\n",
                     whatIf.c_str(), argv[i + 1]);
        return 2;
      }
      whatIf = argv[++i];
      ok = (whatIf.rfind("algo=", 0) == 0 && whatIf.size() > 5) ||
           (whatIf.rfind("topo=", 0) == 0 && whatIf.size() > 5);
    } else if (a == "--mnnvl") {
      mnnvl = true;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--simulate") {
      simulate = true;
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "braid-sim: unknown or incomplete argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "braid-sim: bad value '%s' for %s\n", argv[i], a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (topoFile.empty() || hosts < 1) {
    std::fprintf(stderr, "braid-sim: --topo FILE and --hosts H are required\n");
    usage(stderr);
    return 2;
  }
  if (domainHosts > 0 && !mnnvl) {
    std::fprintf(stderr, "braid-sim: --mnnvl-domain needs --mnnvl (NVLink domains of hosts)\n");
    return 2;
  }
  if (domainHosts > 0 && (domainHosts > hosts || hosts % domainHosts != 0)) {
    std::fprintf(stderr,
                 "braid-sim: --mnnvl-domain %d: must be 1..%d (--hosts) and divide --hosts %d "
                 "(whole NVLink domains)\n",
                 domainHosts, hosts, hosts);
    return 2;
  }
  if (!whatIf.empty() && (json || simulate)) {
    std::fprintf(stderr, "braid-sim: --what-if prints its own table: no --json or --simulate\n");
    return 2;
  }
  if (minBytes == 0) {
    std::fprintf(stderr, "braid-sim: -b must be at least 1 byte\n");
    return 2;
  }
  if (minBytes > kMaxBytes || maxBytes > kMaxBytes) {
    std::fprintf(stderr, "braid-sim: %s %zu is more than 2^48 bytes (256T), the largest call\n",
                 maxBytes > kMaxBytes ? "-e" : "-b", maxBytes > kMaxBytes ? maxBytes : minBytes);
    return 2;
  }
  if (minBytes > maxBytes) {
    std::fprintf(stderr, "braid-sim: -b %zu is larger than -e %zu\n", minBytes, maxBytes);
    return 2;
  }
  const Dtype* dtype = nullptr;
  for (const Dtype& d : kDtypes)
    if (dtypeName == d.name) dtype = &d;
  if (!dtype) {
    std::fprintf(stderr, "braid-sim: unknown -d %s (float, half, bfloat16, double, int32, int8)\n",
                 dtypeName.c_str());
    return 2;
  }
  std::vector<const char*> colls;
  for (const char* c : kCollectives)
    if (collName == "all" || collName == c) colls.push_back(c);
  if (colls.empty()) {
    std::fprintf(stderr,
                 "braid-sim: unknown --collective %s (allreduce, reducescatter, allgather, "
                 "broadcast, reduce, alltoall, gather, scatter, all)\n",
                 collName.c_str());
    return 2;
  }
  braidModelConfig config = {};
  config.hosts = hosts;
  config.ranksPerHost = perHost;
  config.nicGbps = nicGbps;
  config.nvswitchLinks = nvswitch;
  config.mnnvl = mnnvl;
  config.calibration = calibration.c_str();
  config.nvlsDisable = nvlsOff;
  config.nvlsChannels = nvlsChannels;
  config.mnnvlDomainHosts = domainHosts;
  braidModel_t model = nullptr;
  if (int rc = makeModel(topoFile, config, &model)) return rc;
  if (int rc = checkSizes(model, colls, *dtype, minBytes, maxBytes)) {
    braidModelDestroy(model);
    return rc;
  }
  if (!whatIf.empty()) {
    const int rc =
        runWhatIf(model, whatIf, topoFile, config, colls, *dtype, minBytes, maxBytes, factor);
    braidModelDestroy(model);
    return rc;
  }
  braidModelInfo info;
  braidModelGetInfo(model, &info);
  const int n = info.nranks;
  const auto start = std::chrono::steady_clock::now();
  if (!json) {
    std::printf("# braid-sim: %s x %d host(s) = %d ranks\n# %s\n", topoFile.c_str(), hosts, n,
                info.fabric);
    std::printf("# predictions: %s\n",
                info.simulates ? "the schedules played by the simulator (32 ranks or fewer; the "
                                 "closed forms for calls too large to play)"
                               : "closed forms of the schedules (cost_model.cc)");
    const std::string why = info.notes;
    for (size_t p = 0, q; p < why.size(); p = q + 1) {
      q = std::min(why.find('\n', p), why.size());  // a last line without its newline ends it
      std::printf("#   %s\n", why.substr(p, q - p).c_str());
    }
  } else {
    std::printf("[");
  }
  bool firstJson = true;
  std::vector<braidModelEstimate> est;
  for (const char* coll : colls) {
    // The columns: the table's algorithms, then NCCL's device algorithms (starred).
    int nalgos = 0;
    braidModelPredict(model, coll, 1, dtype->type, 0, nullptr, 0, &nalgos, nullptr, nullptr,
                      nullptr, nullptr);
    est.resize(nalgos);
    braidModelPredict(model, coll, 1, dtype->type, 0, est.data(), nalgos, &nalgos, nullptr, nullptr,
                      nullptr, nullptr);
    std::vector<std::string> rows;
    for (const braidModelEstimate& e : est)
      rows.push_back(std::string(e.algorithm) + (e.deviceOnly ? "*" : ""));
    if (!json) {
      std::printf(
          "\n# %s, %s: predicted time (us) and busbw (GB/s) per algorithm%s; piece: the chosen "
          "algorithm's pipelining grain in bytes\n",
          coll, dtype->name, simulate ? "; sim: the schedules played" : "");
      std::printf("#%11s %12s", "size", "count");
      for (const std::string& a : rows) std::printf(" %*s", simulate ? 30 : 19, a.c_str());
      std::printf(" %10s  %s\n", "piece", "chosen");
    }
    // Bytes of one element's call (nccl-tests' size column per count).
    size_t div = 0;
    int ignored = 0;
    braidModelPredict(model, coll, 1, dtype->type, 0, nullptr, 0, &ignored, nullptr, nullptr, &div,
                      nullptr);
    int rowsPrinted = 0;
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
      const size_t count = bytes / div;
      if (count == 0) {  // less than one element per rank: nothing to predict
        if (bytes > SIZE_MAX / factor) break;
        continue;
      }
      ++rowsPrinted;
      int nest = 0, best = -1;
      size_t piece = 0, realBytes = 0;
      double factorBus = 0;
      if (braidModelPredict(model, coll, count, dtype->type, simulate, est.data(), nalgos, &nest,
                            &best, &piece, &realBytes, &factorBus) != braidSuccess) {
        std::fprintf(stderr, "braid-sim: %s\n", braidGetLastError(nullptr));
        braidModelDestroy(model);
        return 1;
      }
      if (json) {
        std::printf(
            "%s\n  {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"ranks\": %d, "
            "\"hosts\": %d, \"chosen\": \"%s\", \"piece_bytes\": %zu, \"algorithms\": {",
            firstJson ? "" : ",", coll, realBytes, count, n, hosts,
            best >= 0 ? est[best].algorithm : "", piece);
        firstJson = false;
      } else {
        std::printf("%12zu %12zu", realBytes, count);
      }
      bool firstAlgo = true;
      for (int i = 0; i < nest; ++i) {
        const braidModelEstimate& c = est[i];
        const double t = c.predictedUs;
        const double busbw = t > 0 ? realBytes / (t * 1e3) * factorBus : 0;
        const double sim = c.simulatedUs;
        if (json) {
          std::printf("%s\"%s\": {%s", firstAlgo ? "" : ", ", c.algorithm,
                      c.deviceOnly ? "\"device_only\": true, " : "");
          if (!c.supported)
            std::printf("\"unsupported\": true}");
          else if (!std::isfinite(t) || !std::isfinite(busbw))
            std::printf("\"predicted_us\": null, \"busbw\": null}");
          else if (sim >= 0)
            std::printf("\"predicted_us\": %.3f, \"busbw\": %.3f, \"simulated_us\": %.3f}", t,
                        busbw, sim);
          else
            std::printf("\"predicted_us\": %.3f, \"busbw\": %.3f}", t, busbw);
          firstAlgo = false;
        } else if (!c.supported) {
          std::printf(" %*s", simulate ? 30 : 19, "n/a");
        } else if (simulate) {
          char cell[64];
          if (sim >= 0)
            std::snprintf(cell, sizeof(cell), "%.1f %.2f sim %.1f", t, busbw, sim);
          else  // over 1024 ranks, or too large to play
            std::snprintf(cell, sizeof(cell), "%.1f %.2f sim n/a", t, busbw);
          std::printf(" %30s", cell);
        } else {
          char cell[48];
          std::snprintf(cell, sizeof(cell), "%.1f %.2f", t, busbw);
          std::printf(" %19s", cell);
        }
      }
      if (json)
        std::printf("}}");
      else
        std::printf(" %10zu  %s\n", piece, best >= 0 ? est[best].algorithm : "none");
      if (bytes > SIZE_MAX / factor) break;
    }
    if (rowsPrinted == 0 && !json)
      std::printf(
          "# %s: no size from -b %zu to -e %zu holds one %s element per rank (the smallest "
          "call is %zu bytes on %d ranks)\n",
          coll, minBytes, maxBytes, dtype->name, div, n);
  }
  braidModelDestroy(model);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json)
    std::printf("\n]\n");
  else
    std::printf("# predicted in %.2f s\n", sec);
  return 0;
}
