// braid-tune's measured sweep: every algorithm of each collective at each size, timed in
// interleaved rounds, beside the cost model's prediction and the selector's choice.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "tune.h"

namespace braid::perf::tune {

const Tuned kTuned[kNumTuned] = {
    {"allreduce", WholeCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidAllReduce(s, r, c.param_count, t, braidSum, comm, nullptr);
     }},
    {"allgather", GatherCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidAllGather(s, r, c.param_count, t, comm, nullptr);
     }},
    {"reducescatter", ScatterCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidReduceScatter(s, r, c.param_count, t, braidSum, comm, nullptr);
     }},
    {"broadcast", WholeCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidBroadcast(s, r, c.param_count, t, 0, comm, nullptr);
     }},
    {"reduce", WholeCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidReduce(s, r, c.param_count, t, braidSum, 0, comm, nullptr);
     }},
    {"alltoall", AllToAllCounts,
     [](const void* s, void* r, const CollCounts& c, braidDataType_t t, braidComm_t comm) {
       return braidAllToAll(s, r, c.param_count, t, comm, nullptr);
     }},
};

void check(braidResult_t rc, const char* what, braidComm_t comm, const Launch& l) {
  if (rc == braidSuccess) return;
  std::fprintf(stderr, "braid-tune: %s: %s\n", what, braidGetLastError(comm));
  Abort(l);
}

double timeCall(braidComm_t comm, const Tuned& t, const char* algo, const void* send, void* recv,
                const CollCounts& c, braidDataType_t dtype, int iters, int warmup,
                const Launch& l) {
  check(braidCommSetAlgorithm(comm, t.name, algo), "braidCommSetAlgorithm", comm, l);
  for (int w = 0; w < warmup; ++w) check(t.run(send, recv, c, dtype, comm), algo, comm, l);
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) check(t.run(send, recv, c, dtype, comm), algo, comm, l);
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      iters;
  check(braidCommSetAlgorithm(comm, t.name, nullptr), "braidCommSetAlgorithm", comm, l);
  check(braidAllReduce(&us, &us, 1, braidFloat64, braidMax, comm, nullptr), "max", comm, l);
  return us;
}

namespace {

// The median of v (not empty).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Measures the cells of one call (those with a prediction) in `rounds` interleaved rounds:
// round 1 times algorithm A, B, C, ..., round 2 A, B, C again, and so on. Each round times a
// block of calls of about 20 ms / rounds by the prediction (at least 1, at most o.iters * 50),
// after o.warmup_iters warm-up calls in the first round and one in later rounds (selecting
// an algorithm drops the compiled plan, whose compilation must not be timed). An algorithm
// whose call is predicted longer than a round's share of the 20 ms takes part in the first
// 3 rounds only (when rounds > 3): 3 warm-up and 3 timed calls, near the 1 + 3 calls one
// block of such calls took before rounds, so that the long sizes keep their run time. A
// round's time is the slowest rank's mean over its block (timeCall); an algorithm's is its
// median over its rounds. The block sizes come from the predictions, which every rank
// computes alike, so every rank makes the same calls.
void measureSize(braidComm_t comm, const Tuned& t, const void* send, void* recv,
                 const CollCounts& c, braidDataType_t dtype, const Options& o, int rounds,
                 const Launch& l, std::vector<Cell>* cells) {
  constexpr double kBudgetUs = 20000;
  std::vector<int> iters(cells->size(), 0), taking(cells->size(), rounds);
  for (size_t a = 0; a < cells->size(); ++a) {
    const double pred = (*cells)[a].predicted_us;
    if (pred < 0) continue;
    if (pred > kBudgetUs / rounds) taking[a] = std::min(rounds, 3);
    iters[a] = static_cast<int>(
        std::clamp(kBudgetUs / rounds / std::max(pred, 1.0), 1.0, std::max(1.0, o.iters * 50.0)));
  }
  std::vector<std::vector<double>> times(cells->size());
  for (int r = 0; r < rounds; ++r)
    for (size_t a = 0; a < cells->size(); ++a) {
      if (iters[a] == 0 || r >= taking[a]) continue;
      const int warmup = r == 0 ? std::max(o.warmup_iters, 1) : 1;
      times[a].push_back(
          timeCall(comm, t, (*cells)[a].algo.c_str(), send, recv, c, dtype, iters[a], warmup, l));
    }
  for (size_t a = 0; a < cells->size(); ++a)
    if (!times[a].empty()) (*cells)[a].measured_us = median(times[a]);
}

// -X DIR: the row's chosen and fastest algorithms, 10 calls each after 5 warm-up ones, on a
// communicator of their own recorded step by step (BRAID_TRACE=steps), dumped to
// DIR/tune-COLLECTIVE-BYTES, so that braid-trace shows both on one timeline and says where
// each one's time went. The sweep's communicator records nothing (braid_tune.cc sets
// BRAID_TRACE=off): the recorder reads BRAID_TRACE when a communicator is made, and
// BRAID_TRACE_JOB at its first dump; one thread per process sets them, between barriers.
void traceRow(braidComm_t comm, const Tuned& t, const Row& row, const void* send, void* recv,
              const CollCounts& c, braidDataType_t dtype, int rank, int nranks, int thread,
              const Launch& l) {
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  const std::string job = std::string("tune-") + t.name + "-" + std::to_string(row.bytes);
  if (thread == 0) {
    setenv("BRAID_TRACE", "steps", 1);
    setenv("BRAID_TRACE_JOB", job.c_str(), 1);
  }
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  braidUniqueId id{};
  if (rank == 0) check(braidGetUniqueId(&id), "braidGetUniqueId", comm, l);
  check(braidBroadcast(&id, &id, sizeof id, braidUint8, 0, comm, nullptr), "id", comm, l);
  braidComm_t traced = nullptr;
  check(braidCommInitRank(&traced, nranks, id, rank), "braidCommInitRank (-X)", comm, l);
  for (const std::string& algo : {row.chosen, row.best})
    timeCall(traced, t, algo.c_str(), send, recv, c, dtype, 10, 5, l);
  char path[4096] = "";
  check(braidCommDumpTrace(traced, path, sizeof path), "braidCommDumpTrace (-X)", traced, l);
  check(braidCommDestroy(traced), "braidCommDestroy", nullptr, l);
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  if (thread == 0) setenv("BRAID_TRACE", "off", 1);
  if (rank == 0)
    std::printf("# trace: %s vs %s at %zu bytes: braid-trace %.*s\n", row.chosen.c_str(),
                row.best.c_str(), row.bytes, static_cast<int>(std::string(path).rfind('/')), path);
}

}  // namespace

void tuneRank(const Options& o, const Flags& f, const Launch& l, int thread,
              std::vector<Row>* rows) {
  const int nranks = l.nprocs * o.nthreads, rank = l.proc * o.nthreads + thread;
  braidComm_t comm = nullptr;
  check(braidCommInitRank(&comm, nranks, l.id, rank), "braidCommInitRank", comm, l);
  const braidDataType_t dtype = o.types.front();
  const size_t esize = braidTypeSize(dtype);
  const std::vector<size_t> sizes = Sizes(o);
  for (const Tuned* t : f.colls) {
    const char* names[32];
    int nalgos = 0;
    check(braidListAlgorithms(t->name, names, 32, &nalgos), "braidListAlgorithms", comm, l);
    nalgos = std::min(nalgos, 32);
    bool traced = false;
    for (size_t bytes : sizes) {
      const size_t count = bytes / esize;
      const CollCounts c = t->counts(count, nranks);
      if (c.param_count == 0) continue;  // under one element per rank: no call to time
      std::vector<char> send(std::max<size_t>(c.send_count * esize, 1), 1),
          recv(std::max<size_t>(c.recv_count * esize, 1), 0);
      Row row;
      row.collective = t->name;
      row.bytes = std::max(c.send_count, c.recv_count) * esize;
      row.count = c.param_count;
      const char* chosen = nullptr;
      double ignored = 0;
      check(braidCommPredict(comm, t->name, c.param_count, dtype, nullptr, &ignored, &chosen),
            "braidCommPredict", comm, l);
      row.chosen = chosen ? chosen : "";
      for (int a = 0; a < nalgos; ++a) {
        Cell cell;
        cell.algo = names[a];
        double pred = 0;
        if (braidCommPredict(comm, t->name, c.param_count, dtype, names[a], &pred, nullptr) !=
            braidSuccess) {
          row.cells.push_back(cell);  // cannot run this call: every rank agrees
          continue;
        }
        cell.predicted_us = pred;
        row.cells.push_back(cell);
      }
      measureSize(comm, *t, send.data(), recv.data(), c, dtype, o, f.rounds, l, &row.cells);
      double best = -1, chosenUs = -1;
      for (const Cell& cell : row.cells) {
        if (cell.measured_us < 0) continue;
        if (best < 0 || cell.measured_us < best) {
          best = cell.measured_us;
          row.best = cell.algo;
        }
        if (cell.algo == row.chosen) chosenUs = cell.measured_us;
      }
      row.regret = best > 0 && chosenUs > 0 ? chosenUs / best : 0;
      // -X: the first size of this collective where another algorithm beat the choice.
      if (!o.trace_dir.empty() && !traced && !row.best.empty() && row.best != row.chosen &&
          chosenUs > 0) {
        traceRow(comm, *t, row, send.data(), recv.data(), c, dtype, rank, nranks, thread, l);
        traced = true;
      }
      if (rank == 0) {
        std::printf("%-13s %12zu %12zu", t->name, row.bytes, row.count);
        for (const Cell& cell : row.cells) {
          char buf[64];
          if (cell.measured_us < 0)
            std::snprintf(buf, sizeof(buf), "%s n/a", cell.algo.c_str());
          else
            std::snprintf(buf, sizeof(buf), "%s %.1f/%.1f", cell.algo.c_str(), cell.measured_us,
                          cell.predicted_us);
          std::printf("  %-28s", buf);
        }
        std::printf("  chosen %s best %s regret %.2f\n", row.chosen.c_str(), row.best.c_str(),
                    row.regret);
        std::fflush(stdout);
        rows->push_back(row);
      }
    }
  }
  check(braidCommDestroy(comm), "braidCommDestroy", nullptr, l);
}

}  // namespace braid::perf::tune
