// braid-tune: on the live communicator, measures every algorithm of each collective at each
// size, prints measured and predicted time per algorithm, the selector's choice, the best
// measured and the regret (the choice's measured time / the best measured time), and writes
// the table as JSON (--json FILE) and a plot of time against size per algorithm (--png FILE,
// through gnuplot; without gnuplot the script and data are left beside FILE).
//
//   braid-tune [--collective NAME|all] [--rounds N] [--json FILE] [--png FILE]
//              [nccl-tests flags]
//   braid-tune --calibrate FILE [-t N]   link figures for BRAID_TUNE_FILE (see calibrate.cc)
//
// Launched like the perf binaries (-t threads, braidrun, mpirun). Sizes are nccl-tests'
// size column, -b 8 -e 256M -f 2 unless given. The algorithms of one size are measured in
// N interleaved rounds (default 5; see measureSize() in sweep.cc), and each one's time is its
// median over the rounds, so a burst of noise on a shared or oversubscribed machine touches
// one round of every algorithm rather than all of one. --collective all means all-reduce,
// all-gather, reduce-scatter, broadcast, reduce and all-to-all; the default is the four the
// selector is judged on (allreduce, allgather, reducescatter, broadcast).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "perf/common.h"
#include "perf/launch.h"
#include "perf/options.h"
#include "tune.h"

int main(int argc, char** argv) {
  using namespace braid::perf;
  using namespace braid::perf::tune;
  setlinebuf(stdout);
  Flags f;
  std::string collName, calibrateTo;
  // braid-tune's own flags; the rest are nccl-tests' (ParseOptions).
  std::vector<char*> rest = {argv[0]};
  bool sizeGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool ours = a == "--collective" || a == "--json" || a == "--png" || a == "--calibrate" ||
                      a == "--rounds";
    if (ours && i + 1 >= argc) {
      std::fprintf(stderr, "braid-tune: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--rounds") {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000) {
        std::fprintf(stderr, "braid-tune: --rounds %s: give a whole number from 1 to 1000\n",
                     argv[i]);
        return 2;
      }
      f.rounds = static_cast<int>(n);
      continue;
    }
    if (ours) {
      (a == "--collective" ? collName
       : a == "--json"     ? f.json
       : a == "--png"      ? f.png
                           : calibrateTo) = argv[++i];
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: braid-tune [--collective NAME|all] [--rounds N] [--json FILE] [--png FILE] "
          "[-t N] [-b MIN] [-e MAX] [-f FACTOR] [-d TYPE] [-n ITERS] [-w WARMUP]\n"
          "       braid-tune --calibrate FILE [-t N]   measure the link figures; then run jobs "
          "with BRAID_TUNE_FILE=FILE\n"
          "  NAME: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, all\n"
          "  (default: allreduce, allgather, reducescatter, broadcast); sizes default 8..256M "
          "x2\n"
          "  --rounds N: time every algorithm of a size in N interleaved rounds (A B C, A B C, "
          "...)\n"
          "    of about 20 ms / N each, and report each one's median round (default 5)\n"
          "  -X DIR: per collective, at the first size where the fastest algorithm is not the "
          "chosen one,\n"
          "    10 calls of each (after 5 warm-up calls) recorded step by step in "
          "DIR/tune-COLLECTIVE-BYTES (braid-trace "
          "reads it)\n");
      return 0;
    }
    if (a == "-b" || a == "-e" || a == "--minbytes" || a == "--maxbytes") sizeGiven = true;
    rest.push_back(argv[i]);
  }
  if (collName.empty()) {
    for (const char* n : {"allreduce", "allgather", "reducescatter", "broadcast"})
      for (const Tuned& t : kTuned)
        if (!strcmp(t.name, n)) f.colls.push_back(&t);
  } else {
    for (const Tuned& t : kTuned)
      if (collName == "all" || collName == t.name) f.colls.push_back(&t);
  }
  if (f.colls.empty()) {
    std::fprintf(stderr,
                 "braid-tune: unknown --collective %s (allreduce, allgather, reducescatter, "
                 "broadcast, reduce, alltoall, all)\n",
                 collName.c_str());
    return 2;
  }
  Options o;
  o.prog = "braid-tune";
  int rargc = static_cast<int>(rest.size());
  char** rargv = rest.data();
  if (const int status = ParseOptions(rargc, rargv, &o); status >= 0) return status;
  if (o.types.size() != 1) {
    std::fprintf(stderr, "braid-tune: give one -d type (it tunes one data type at a time)\n");
    return 2;
  }
  // The outputs are checked before minutes of measuring, not after.
  for (const std::string* path : {&f.json, &f.png, &calibrateTo}) {
    if (path->empty()) continue;
    FILE* probe = std::fopen(path->c_str(), "a");
    if (!probe) {
      std::fprintf(stderr, "braid-tune: cannot write %s: %s\n", path->c_str(), strerror(errno));
      return 2;
    }
    std::fclose(probe);
  }
  if (!sizeGiven) {
    o.min_bytes = 8;
    o.max_bytes = 256u << 20;
    o.step_factor = 2;
  }
  // -X DIR: the sweep itself is not recorded; the comparison traced after it is (sweep.cc).
  if (!o.trace_dir.empty()) setenv("BRAID_TRACE", "off", 1);
  const Launch l = DetectLaunch(o, &rargc, &rargv);
  const int nranks = l.nprocs * o.nthreads;
  if (!calibrateTo.empty()) {
    std::vector<std::thread> threads;
    for (int t = 1; t < o.nthreads; ++t)
      threads.emplace_back([&, t] { calibrate(o, l, t, calibrateTo); });
    calibrate(o, l, 0, calibrateTo);
    for (std::thread& t : threads) t.join();
    FinishLaunch(l);
    return 0;
  }
  if (l.proc == 0) {
    std::printf(
        "# braid-tune: %d ranks, %s, sizes %zu..%zu; cells: algorithm measured/predicted "
        "us\n",
        nranks, TypeName(o.types.front()), o.min_bytes, o.max_bytes);
    std::printf("# collective         bytes        count\n");
  }
  int status = 0;
  std::vector<Row> rows;
  std::vector<std::thread> threads;
  for (int t = 1; t < o.nthreads; ++t)
    threads.emplace_back([&, t] { tuneRank(o, f, l, t, nullptr); });
  tuneRank(o, f, l, 0, l.proc == 0 ? &rows : nullptr);
  for (std::thread& t : threads) t.join();
  if (l.proc == 0) {
    printSummary(f, rows);
    if (!f.json.empty() && !writeJson(f.json, rows, nranks)) status = 1;
    if (!f.png.empty() && !writePlot(f.png, rows)) status = 1;
  }
  FinishLaunch(l);
  return status;
}
