// braid-sim --what-if: one job under two algorithm sets, or on two topologies, side by side,
// with where each side's time goes (braidModelExplain).
#include "what_if.h"

#include <strings.h>

#include <cmath>
#include <cstdio>
#include <sstream>

namespace braid_sim {

int makeModel(const std::string& topoFile, const braidModelConfig& config, braidModel_t* model) {
  braidTopology_t topo = nullptr;
  if (braidTopologyLoad(&topo, topoFile.c_str(), nullptr) != braidSuccess) {
    std::fprintf(stderr, "braid-sim: %s\n", braidGetLastError(nullptr));
    return 1;
  }
  const braidResult_t made = braidModelCreate(model, topo, &config);
  braidTopologyDestroy(topo);
  if (made != braidSuccess) {
    std::fprintf(stderr, "braid-sim: %s\n", braidGetLastError(nullptr));
    return made == braidInvalidUsage ? 2 : 1;  // too many ranks: the flags' fault
  }
  return 0;
}

int checkSizes(braidModel_t model, const std::vector<const char*>& colls, const Dtype& dtype,
               size_t minBytes, size_t maxBytes) {
  for (const char* coll : colls) {
    size_t div = 0;
    int n = 0;
    if (braidModelPredict(model, coll, 1, dtype.type, 0, nullptr, 0, &n, nullptr, nullptr, &div,
                          nullptr) != braidSuccess ||
        div == 0)
      continue;  // the table says why
    const size_t count = maxBytes / div;
    if (count == 0) continue;
    if (braidModelPredict(model, coll, count, dtype.type, 0, nullptr, 0, &n, nullptr, nullptr,
                          nullptr, nullptr) != braidSuccess) {
      braidModelInfo info;
      braidModelGetInfo(model, &info);
      std::fprintf(stderr,
                   "braid-sim: %s %zu: %s of %zu bytes on %d ranks is more than 2^48 bytes in "
                   "all (the largest size here: %zu)\n",
                   minBytes > maxBytes / 2 ? "-b/-e" : "-e", maxBytes, coll, maxBytes, info.nranks,
                   (size_t{1} << 48) / dtype.size / static_cast<size_t>(info.nranks) * div);
      return 2;
    }
  }
  return 0;
}

namespace {

// One side of the comparison: a model and the algorithms it may pick (empty: all).
struct Side {
  const char* label;
  braidModel_t model;
  std::vector<std::string> algos;
  std::string text;  // as given, for the header
};

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

bool allowed(const Side& side, const char* algo) {
  if (side.algos.empty()) return true;
  for (const std::string& a : side.algos)
    if (!strcasecmp(a.c_str(), algo)) return true;
  return false;
}

// The side's pick for the call (least predicted time among its algorithms), or false with
// *why saying why none runs.
bool pick(const Side& side, const char* coll, size_t count, const Dtype& dtype, std::string* algo,
          braidModelTimeSplit* split, size_t* bytes, double* factorBus, std::string* why) {
  int n = 0;
  braidModelPredict(side.model, coll, count, dtype.type, 0, nullptr, 0, &n, nullptr, nullptr,
                    nullptr, nullptr);
  std::vector<braidModelEstimate> est(n);
  if (braidModelPredict(side.model, coll, count, dtype.type, 0, est.data(), n, &n, nullptr, nullptr,
                        bytes, factorBus) != braidSuccess)
    return false;
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (est[i].supported && allowed(side, est[i].algorithm) && std::isfinite(est[i].predictedUs) &&
        (best < 0 || est[i].predictedUs < est[best].predictedUs))
      best = i;
  if (best < 0) {
    // Say why: each of the side's algorithms the call lists, and why it cannot run here.
    for (int i = 0; i < n; ++i) {
      if (!allowed(side, est[i].algorithm)) continue;
      braidModelTimeSplit ignored{};
      if (braidModelExplain(side.model, coll, count, dtype.type, est[i].algorithm, &ignored) !=
          braidSuccess)
        *why += std::string(why->empty() ? "" : "; ") + braidGetLastError(nullptr);
    }
    if (why->empty()) *why = std::string("none of its algorithms runs ") + coll + " on this job";
    return false;
  }
  *algo = est[best].algorithm;
  return braidModelExplain(side.model, coll, count, dtype.type, est[best].algorithm, split) ==
         braidSuccess;
}

// Every algorithm name the side lists must exist for at least one of the collectives.
bool checkNames(const Side& side, const std::vector<const char*>& colls, const Dtype& dtype) {
  for (const std::string& a : side.algos) {
    bool found = false;
    for (const char* coll : colls) {
      int n = 0;
      braidModelPredict(side.model, coll, 1, dtype.type, 0, nullptr, 0, &n, nullptr, nullptr,
                        nullptr, nullptr);
      std::vector<braidModelEstimate> est(n);
      braidModelPredict(side.model, coll, 1, dtype.type, 0, est.data(), n, &n, nullptr, nullptr,
                        nullptr, nullptr);
      for (const braidModelEstimate& e : est) found = found || !strcasecmp(e.algorithm, a.c_str());
    }
    if (!found) {
      std::fprintf(stderr,
                   "braid-sim: --what-if: side %s names \"%s\", which is no algorithm of %s%s\n",
                   side.label, a.c_str(), colls.size() == 1 ? "" : "any of ",
                   colls.size() == 1 ? colls[0] : "the collectives asked");
      return false;
    }
  }
  return true;
}

}  // namespace

int runWhatIf(braidModel_t model, const std::string& spec, const std::string& topoFile,
              const braidModelConfig& config, const std::vector<const char*>& colls,
              const Dtype& dtype, size_t minBytes, size_t maxBytes, size_t factor) {
  Side a{"A", model, {}, topoFile}, b{"B", model, {}, topoFile};
  braidModel_t other = nullptr;
  const std::string kind = spec.substr(0, 5), value = spec.substr(5);
  if (kind == "algo=") {
    const std::vector<std::string> sides = splitOn(value, ',');
    if (sides.size() != 2) {
      std::fprintf(stderr,
                   "braid-sim: --what-if algo=%s: give two sets, A,B (each an algorithm, several "
                   "joined by '+', or 'all')\n",
                   value.c_str());
      return 2;
    }
    Side* both[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
      both[i]->text = sides[i];
      if (sides[i] == "all") continue;
      if (sides[i].empty()) {
        std::fprintf(stderr, "braid-sim: --what-if algo=%s: side %s is empty\n", value.c_str(),
                     both[i]->label);
        return 2;
      }
      for (const std::string& name : splitOn(sides[i], '+')) {
        if (name.empty()) {
          std::fprintf(stderr, "braid-sim: --what-if algo=%s: side %s has an empty name\n",
                       value.c_str(), both[i]->label);
          return 2;
        }
        both[i]->algos.push_back(name);
      }
      if (!checkNames(*both[i], colls, dtype)) return 2;
      bool onlyNvls = config.nvlsDisable != 0;
      for (const std::string& name : both[i]->algos)
        onlyNvls = onlyNvls &&
                   (!strcasecmp(name.c_str(), "nvls") || !strcasecmp(name.c_str(), "nvlstree"));
      if (onlyNvls) {
        std::fprintf(stderr,
                     "braid-sim: --what-if algo=%s: side %s is NVLS only, but --nvls off takes "
                     "NVLS out of the job\n",
                     value.c_str(), both[i]->label);
        return 2;
      }
    }
  } else {
    if (makeModel(value, config, &other) != 0) {
      std::fprintf(stderr, "braid-sim: --what-if topo=%s: no job on that file (above)\n",
                   value.c_str());
      return 2;
    }
    b.model = other;
    b.text = value;
    if (const int rc = checkSizes(other, colls, dtype, minBytes, maxBytes)) {
      braidModelDestroy(other);
      return rc;
    }
  }
  std::printf("# braid-sim --what-if %s\n#   A: %s\n#   B: %s\n", spec.c_str(), a.text.c_str(),
              b.text.c_str());
  for (const Side* s : {&a, &b}) {
    braidModelInfo info;
    braidModelGetInfo(s->model, &info);
    std::printf("#   %s's job: %s\n", s->label, info.fabric);
  }
  std::printf(
      "# per side: the algorithm picked, time (us), busbw (GB/s); where the time goes (us): "
      "nvlink, network and reduce are each resource's busy time on the busiest rank (they "
      "overlap: their sum may exceed time), latency = time - max(nvlink, network, reduce) "
      "(latencies, pipeline fill, waits); both sides at the same size, each side's count per "
      "rank from its own ranks\n");
  for (const char* coll : colls) {
    std::printf("\n# %s, %s\n#%11s %2s %-14s %11s %9s %10s %10s %10s %10s %8s\n", coll, dtype.name,
                "size", "", "algorithm", "time", "busbw", "nvlink", "network", "reduce", "latency",
                "B/A");
    // Bytes of one element's call per side (nccl-tests' size column per count): the sides
    // may have different ranks, so each derives its own count from the same size.
    size_t div[2] = {0, 0};
    const Side* sides[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
      int ignored = 0;
      braidModelPredict(sides[i]->model, coll, 1, dtype.type, 0, nullptr, 0, &ignored, nullptr,
                        nullptr, &div[i], nullptr);
    }
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
      if (bytes / div[0] > 0 || bytes / div[1] > 0) {
        double tA = -1;
        for (int i = 0; i < 2; ++i) {
          const Side* s = sides[i];
          const size_t count = bytes / div[i];
          if (count == 0) {
            std::printf("%12zu %2s %-14s %11s  # below one %s element per rank\n", bytes, s->label,
                        "none", "n/a", dtype.name);
            continue;
          }
          std::string algo, why;
          braidModelTimeSplit t{};
          size_t realBytes = 0;
          double fb = 0;
          if (!pick(*s, coll, count, dtype, &algo, &t, &realBytes, &fb, &why)) {
            std::printf("%12zu %2s %-14s %11s  # %s\n", bytes, s->label, "none", "n/a",
                        why.c_str());
            continue;
          }
          const double busbw = realBytes / (t.totalUs * 1e3) * fb;
          std::printf("%12zu %2s %-14s %11.1f %9.2f %10.1f %10.1f %10.1f %10.1f", realBytes,
                      s->label, algo.c_str(), t.totalUs, busbw, t.nvlinkUs, t.networkUs, t.reduceUs,
                      t.latencyUs);
          if (i == 0)
            tA = t.totalUs;
          else if (tA > 0)
            std::printf(" %8.3f", t.totalUs / tA);
          std::printf("\n");
        }
      }
      if (bytes > SIZE_MAX / factor) break;
    }
  }
  braidModelDestroy(other);
  return 0;
}

}  // namespace braid_sim
