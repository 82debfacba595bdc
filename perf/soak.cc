// soak: CALLS random collectives (default 10,000) on one communicator, every result checked
// exactly: the collective (all-reduce, reduce-scatter, all-gather, broadcast, reduce,
// all-to-all), count (mostly small, up to --max-count elements), datatype, op, root, in place
// or not, and algorithm (any of the collective's that can run the call, or the selector's)
// are drawn from one seeded generator every rank runs alike. Inputs come from
// perf/verifiable.h, whose reductions are exact in any order, so a result is compared value
// for value (reductions) or bit for bit (data movement). Launched like the perf binaries:
// braidrun, mpirun, or -t N threads.
//
// Usage: soak [--calls N] [--seed S] [--max-count N] [-t THREADS]
// Exit status 0 when every call succeeded with the right result; 1 at the first wrong one,
// naming the call; 2 for bad flags.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "launch.h"
#include "options.h"
#include "verifiable.h"

namespace braid::perf {
namespace {

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
constexpr const char* kCollName[] = {"allreduce", "reducescatter", "allgather",
                                     "broadcast", "reduce",        "alltoall"};
constexpr int kColls = 6;

struct Flags {
  long calls = 10000;
  uint64_t seed = 1;
  size_t maxCount = 65536;
};

// The generator every rank runs alike (splitmix64 through Mix).
struct Draw {
  uint64_t seed;
  uint64_t n = 0;
  uint64_t next() { return Mix(seed, n++, 0x50a4); }
  size_t below(size_t k) { return static_cast<size_t>(next() % k); }
};

struct Call {
  Coll coll;
  size_t count;  // per rank block (reduce-scatter's and all-to-all's), else the vector
  braidDataType_t dtype;
  braidRedOp_t op;
  int root;
  bool inPlace;
  std::string algo;  // "" for the selector's
};

std::string describe(const Call& c, long i) {
  return "call " + std::to_string(i) + ": " + kCollName[static_cast<int>(c.coll)] + " count " +
         std::to_string(c.count) + " " + TypeName(c.dtype) + " " + OpName(c.op) + " root " +
         std::to_string(c.root) + (c.inPlace ? " in place" : " out of place") + " algorithm " +
         (c.algo.empty() ? "auto" : c.algo);
}

// Counts: half below 64 elements, most of the rest below 4096, a few up to maxCount.
size_t drawCount(Draw* d, size_t maxCount) {
  const size_t k = d->below(10);
  const size_t cap = k < 5 ? 64 : k < 9 ? 4096 : maxCount;
  return d->below(std::max<size_t>(cap, 1)) + (d->below(20) == 0 ? 0 : 1);  // zero sometimes
}

Call drawCall(Draw* d, const Flags& f, int nranks, braidComm_t comm) {
  Call c;
  c.coll = static_cast<Coll>(d->below(kColls));
  c.count = drawCount(d, f.maxCount);
  const std::vector<braidDataType_t> types = AllTypes();
  c.dtype = types[d->below(types.size())];
  const braidRedOp_t ops[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};
  c.op = ops[d->below(5)];
  c.root = static_cast<int>(d->below(static_cast<size_t>(nranks)));
  c.inPlace = d->below(2) == 1;
  const char* names[32];
  int n = 0;
  braidListAlgorithms(kCollName[static_cast<int>(c.coll)], names, 32, &n);
  const size_t pick = d->below(static_cast<size_t>(n) + 1);
  if (pick < static_cast<size_t>(n)) {
    double us = 0;
    // An algorithm that cannot run the call is replaced by the selector's (every rank asks
    // the same question and gets the same answer).
    if (braidCommPredict(comm, kCollName[static_cast<int>(c.coll)], c.count, c.dtype, names[pick],
                         &us, nullptr) == braidSuccess)
      c.algo = names[pick];
  }
  return c;
}

// Runs one call on this rank and checks it; "" when right.
std::string runCall(braidComm_t comm, const Call& c, int rank, int nranks, uint64_t seed) {
  const size_t es = ElementSize(c.dtype), n = static_cast<size_t>(nranks), k = c.count;
  CheckArgs args{c.dtype, c.op, c.root, rank, nranks, seed};
  std::vector<char> send, recv, want;
  braidResult_t res = braidSuccess;
  size_t wrong = 0;
  if (braidCommSetAlgorithm(comm, kCollName[static_cast<int>(c.coll)],
                            c.algo.empty() ? nullptr : c.algo.c_str()) != braidSuccess)
    return std::string("braidCommSetAlgorithm: ") + braidGetLastError(comm);
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: {
      recv.assign(k * es + 1, 0);
      send.assign(k * es + 1, 0);
      char* in = c.inPlace ? recv.data() : send.data();
      FillInput(in, k, 0, args, rank);
      want.assign(k * es + 1, 0);
      FillReduced(want.data(), k, 0, args);
      res = c.coll == Coll::kAllReduce
                ? braidAllReduce(in, recv.data(), k, c.dtype, c.op, comm, nullptr)
                : braidReduce(in, recv.data(), k, c.dtype, c.op, c.root, comm, nullptr);
      if (res == braidSuccess && (c.coll == Coll::kAllReduce || rank == c.root))
        wrong = CountMismatches(recv.data(), want.data(), k, c.dtype);
      break;
    }
    case Coll::kReduceScatter: {
      recv.assign(n * k * es + 1, 0);
      send.assign(n * k * es + 1, 0);
      char* in = c.inPlace ? recv.data() : send.data();
      FillInput(in, n * k, 0, args, rank);
      char* out = c.inPlace ? recv.data() + rank * k * es : recv.data();
      want.assign(k * es + 1, 0);
      FillReduced(want.data(), k, rank * k, args);
      res = braidReduceScatter(in, out, k, c.dtype, c.op, comm, nullptr);
      if (res == braidSuccess) wrong = CountMismatches(out, want.data(), k, c.dtype);
      break;
    }
    case Coll::kAllGather: {
      recv.assign(n * k * es + 1, 0);
      send.assign(k * es + 1, 0);
      char* in = c.inPlace ? recv.data() + rank * k * es : send.data();
      FillPattern(in, k, 0, args, rank);
      want.assign(n * k * es + 1, 0);
      for (int r = 0; r < nranks; ++r) FillPattern(want.data() + r * k * es, k, 0, args, r);
      res = braidAllGather(in, recv.data(), k, c.dtype, comm, nullptr);
      if (res == braidSuccess) wrong = CountBitMismatches(recv.data(), want.data(), n * k, es);
      break;
    }
    case Coll::kBroadcast: {
      recv.assign(k * es + 1, 0);
      send.assign(k * es + 1, 0);
      char* in = c.inPlace ? recv.data() : send.data();
      if (rank == c.root) FillPattern(in, k, 0, args, c.root);
      want.assign(k * es + 1, 0);
      FillPattern(want.data(), k, 0, args, c.root);
      res = braidBroadcast(in, recv.data(), k, c.dtype, c.root, comm, nullptr);
      if (res == braidSuccess) wrong = CountBitMismatches(recv.data(), want.data(), k, es);
      break;
    }
    case Coll::kAllToAll: {
      // Block j of rank r's input goes to rank j: pattern (r, offset j * k).
      recv.assign(n * k * es + 1, 0);
      send.assign(n * k * es + 1, 0);
      for (int j = 0; j < nranks; ++j) FillPattern(send.data() + j * k * es, k, j * k, args, rank);
      want.assign(n * k * es + 1, 0);
      for (int j = 0; j < nranks; ++j) FillPattern(want.data() + j * k * es, k, rank * k, args, j);
      res = braidAllToAll(send.data(), recv.data(), k, c.dtype, comm, nullptr);
      if (res == braidSuccess) wrong = CountBitMismatches(recv.data(), want.data(), n * k, es);
      break;
    }
  }
  if (res != braidSuccess) return braidGetLastError(comm);
  if (wrong) return std::to_string(wrong) + " wrong elements";
  return "";
}

int soakRank(const Flags& f, const Options& o, const Launch& l, int thread, long* done) {
  const int nranks = l.nprocs * o.nthreads, rank = l.proc * o.nthreads + thread;
  braidComm_t comm = nullptr;
  if (braidCommInitRank(&comm, nranks, l.id, rank) != braidSuccess) {
    std::fprintf(stderr, "soak: rank %d: init: %s\n", rank, braidGetLastError(nullptr));
    return 1;
  }
  Draw d{f.seed};
  int status = 0;
  long i = 0;
  for (; i < f.calls; ++i) {
    const Call c = drawCall(&d, f, nranks, comm);
    const std::string e = runCall(comm, c, rank, nranks, Mix(f.seed, static_cast<uint64_t>(i), 7));
    // Every rank learns whether any failed, so all stop at the same call.
    int bad = e.empty() ? 0 : 1;
    if (braidAllReduce(&bad, &bad, 1, braidInt32, braidMax, comm, nullptr) != braidSuccess) bad = 1;
    if (!e.empty())
      std::fprintf(stderr, "soak: rank %d: %s: %s\n", rank, describe(c, i).c_str(), e.c_str());
    if (bad) {
      status = 1;
      break;
    }
  }
  if (rank == 0) *done = i;
  braidCommDestroy(comm);
  return status;
}

}  // namespace
}  // namespace braid::perf

int main(int argc, char** argv) {
  using namespace braid::perf;
  setlinebuf(stdout);
  Flags f;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: soak [--calls N] [--seed S] [--max-count N] [-t THREADS]\n"
          "  N random collectives (default 10000), each result checked; counts up to "
          "--max-count elements (default 65536)\n");
      return 0;
    }
    if (a == "--calls" || a == "--seed" || a == "--max-count") {
      char* end = nullptr;
      const unsigned long long v = i + 1 < argc ? std::strtoull(argv[i + 1], &end, 10) : 0;
      if (i + 1 >= argc || *end != '\0' || argv[i + 1][0] == '-' ||
          (a != "--seed" && (v < 1 || v > (1ull << 30)))) {
        std::fprintf(stderr, "soak: %s needs a whole number%s\n", a.c_str(),
                     a == "--seed" ? "" : " from 1 to 2^30");
        return 2;
      }
      ++i;
      if (a == "--calls") f.calls = static_cast<long>(v);
      if (a == "--seed") f.seed = v;
      if (a == "--max-count") f.maxCount = static_cast<size_t>(v);
      continue;
    }
    rest.push_back(argv[i]);
  }
  Options o;
  o.prog = "soak";
  int rargc = static_cast<int>(rest.size());
  char** rargv = rest.data();
  if (const int status = ParseOptions(rargc, rargv, &o); status >= 0) return status;
  const Launch l = DetectLaunch(o, &rargc, &rargv);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> status(o.nthreads, 0);
  long done = 0;
  std::vector<std::thread> threads;
  for (int t = 1; t < o.nthreads; ++t)
    threads.emplace_back([&, t] { status[t] = soakRank(f, o, l, t, &done); });
  status[0] = soakRank(f, o, l, 0, &done);
  for (auto& t : threads) t.join();
  int rc = 0;
  for (int s : status) rc |= s;
  if (l.proc == 0)
    std::printf("soak: %ld of %ld calls right on %d ranks (seed %llu) in %.1f s\n", done, f.calls,
                l.nprocs * o.nthreads, static_cast<unsigned long long>(f.seed),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  FinishLaunch(l);
  return rc;
}
