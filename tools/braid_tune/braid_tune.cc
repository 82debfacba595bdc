// braid-tune: on the live communicator, measures every algorithm of each collective at each
// size, prints measured and predicted time per algorithm, the selector's choice, the best
// measured and the regret (the choice's measured time / the best measured time), and writes
// the table as JSON (--json FILE) and a plot of time against size per algorithm (--png FILE,
// through gnuplot; without gnuplot the script and data are left beside FILE).
//
//   braid-tune [--collective NAME|all] [--rounds N] [--json FILE] [--png FILE]
//              [nccl-tests flags]
//   braid-tune --calibrate FILE [-t N]   link figures for BRAID_TUNE_FILE (see calibrate())
//
// Launched like the perf binaries (-t threads, braidrun, mpirun). Sizes are nccl-tests'
// size column, -b 8 -e 256M -f 2 unless given. The algorithms of one size are measured in
// N interleaved rounds (default 5; see measureSize()), and each one's time is its median
// over the rounds, so a burst of noise on a shared or oversubscribed machine touches one
// round of every algorithm rather than all of one. --collective all means all-reduce,
// all-gather, reduce-scatter, broadcast, reduce and all-to-all; the default is the four the
// selector is judged on (allreduce, allgather, reducescatter, broadcast).
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "common.h"
#include "launch.h"
#include "options.h"

namespace braid::perf {
namespace {

struct Tuned {
  const char* name;  // braidListAlgorithms' collective name
  CollCounts (*counts)(size_t count, int nranks);
  braidResult_t (*run)(const void* send, void* recv, const CollCounts& c, braidDataType_t t,
                       braidComm_t comm);
};

const Tuned kTuned[] = {
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

struct Cell {
  std::string algo;
  double measured_us = -1, predicted_us = -1;  // -1: cannot run this call
};
struct Row {
  const char* collective;
  size_t bytes = 0, count = 0;
  std::vector<Cell> cells;
  std::string chosen, best;
  double regret = 0;
};

struct Flags {
  std::vector<const Tuned*> colls;
  std::string json, png;
  int rounds = 5;  // --rounds
};

void check(braidResult_t rc, const char* what, braidComm_t comm, const Launch& l) {
  if (rc == braidSuccess) return;
  std::fprintf(stderr, "braid-tune: %s: %s\n", what, braidGetLastError(comm));
  Abort(l);
}

// The time of one call of t forced to `algo`, the slowest rank's mean over iters calls after
// `warmup` more, in us (every rank calls it).
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

// One rank's sweep; rank 0 fills *rows.
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

// This process's host identity, as the communicator forms it (BRAID_HOST_ID, else hostname
// plus boot id).
std::string hostIdentity() {
  if (const char* h = std::getenv("BRAID_HOST_ID")) return h;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[64] = {0};
    if (std::fgets(buf, sizeof(buf), f)) boot = buf;
    std::fclose(f);
  }
  return std::string(host) + "/" + boot;
}

// Half the round trip of `bytes` between rank 0 and peer, mean over iters, in us; every
// rank calls it (the others only wait at the barriers).
double pingPong(braidComm_t comm, int rank, int peer, size_t bytes, int iters, int burst,
                const Launch& l) {
  std::vector<char> buf(std::max<size_t>(bytes, 1) * burst);
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  double us = 0;
  if (rank == 0 || rank == peer) {
    const int other = rank == 0 ? peer : 0;
    auto sendBurst = [&] {
      braidGroupStart();
      for (int b = 0; b < burst; ++b)
        braidSend(buf.data() + b * bytes, bytes, braidUint8, other, comm, nullptr);
      check(braidGroupEnd(), "braidSend", comm, l);
    };
    auto recvOne = [&] {
      check(braidRecv(buf.data(), bytes, braidUint8, other, comm, nullptr), "braidRecv", comm, l);
    };
    for (int i = -2; i < iters; ++i) {  // two warm-up round trips
      const auto t0 = std::chrono::steady_clock::now();
      if (rank == 0) {
        sendBurst();
        recvOne();
      } else {
        for (int b = 0; b < burst; ++b) recvOne();
        check(braidSend(buf.data(), bytes, braidUint8, 0, comm, nullptr), "braidSend", comm, l);
      }
      if (i >= 0)
        us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count();
    }
    us /= iters;
  }
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  return us / 2;
}

// Rank 0 sends 8 bytes to each other rank of its host (`peers`), iters times back to back
// (one group each), and they receive them: the time per message at rank 0, in us. Receivers
// that have nothing else to do sleep between messages, as a broadcast's leaves do, so this is
// what a send costs when it must wake its receiver. Every rank calls it.
double fanOut(braidComm_t comm, int rank, const std::vector<int>& peers, int iters,
              const Launch& l) {
  char buf[8] = {0};
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  double us = 0;
  const bool mine = std::find(peers.begin(), peers.end(), rank) != peers.end();
  if (rank == 0 && !peers.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      braidGroupStart();
      for (int p : peers) braidSend(buf, sizeof(buf), braidUint8, p, comm, nullptr);
      check(braidGroupEnd(), "fan-out", comm, l);
    }
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         (static_cast<double>(iters) * peers.size());
  } else if (mine) {
    for (int i = 0; i < iters; ++i)
      check(braidRecv(buf, sizeof(buf), braidUint8, 0, comm, nullptr), "fan-out", comm, l);
  }
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  return us;
}

// A core's L2 cache in bytes (sysfs), 0 if unknown.
size_t l2Bytes() {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    FILE* lv = std::fopen((dir + "/level").c_str(), "r");
    if (!lv) break;
    int level = 0;
    const bool ok = std::fscanf(lv, "%d", &level) == 1;
    std::fclose(lv);
    if (!ok || level != 2) continue;
    FILE* sz = std::fopen((dir + "/size").c_str(), "r");
    if (!sz) return 0;
    size_t kib = 0;
    const bool got = std::fscanf(sz, "%zuK", &kib) == 1;
    std::fclose(sz);
    return got ? kib << 10 : 0;
  }
  return 0;
}

// Every rank at once sends `bytes` to `next` and receives from `prev` (a shift: around each
// host, or across hosts), iters times: the time of one shift, the slowest rank's, in us.
// Collectives keep every rank busy, so on a host with fewer cores than ranks or a shared
// memory bus or NIC this is what a step costs, not an idle ping-pong. A rank with no next
// (-1) only receives, one with no prev only sends; one with neither (alone on its host)
// takes part in the max only.
double hostShift(braidComm_t comm, int next, int prev, size_t bytes, int iters, const Launch& l) {
  std::vector<char> out(std::max<size_t>(bytes, 1), 1), in(std::max<size_t>(bytes, 1));
  check(braidBarrier(comm, nullptr), "braidBarrier", comm, l);
  double us = 0;
  if (next >= 0 || prev >= 0) {
    for (int i = -2; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      braidGroupStart();
      if (next >= 0) braidSend(out.data(), bytes, braidUint8, next, comm, nullptr);
      if (prev >= 0) braidRecv(in.data(), bytes, braidUint8, prev, comm, nullptr);
      check(braidGroupEnd(), "shift", comm, l);
      if (i >= 0)
        us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count();
    }
    us /= iters;
  }
  check(braidAllReduce(&us, &us, 1, braidFloat64, braidMax, comm, nullptr), "max", comm, l);
  return us;
}

// braid-tune --calibrate FILE: the figures of the cost model's fabric, measured on this job:
// within a host, latency (8 bytes) and bandwidth (16 MiB) of a shift in which every rank sends
// to the next rank of its host at once (hostShift); between hosts, the latency of a shift of
// 8 bytes in which every rank sends to its counterpart (same place among its host's ranks) on
// the next host at once, as a collective's rounds across hosts do (an idle ping-pong between
// two ranks finds the other ranks' cores and network proxies idle: on 2 emulated hosts x 2
// ranks of one 2-core machine one run measured 53 us idle and 76 us in the shift; the file
// keeps the idle figure as a comment), and the bandwidth from half the round trip of 16 MiB
// between rank 0 and a rank of another host; the step overhead (a burst of 64 small
// messages within a host), a send's cost when it wakes its receiver (rank 0 to every other
// rank of its host, fanOut; intra_send_overhead_us) and the network proxy's per message (the same
// across hosts, inter_step_overhead_us); this core's reduction and copy speeds. A latency measured
// as a whole round (a shift, or a round of recursive doubling) is written less one step overhead,
// as the model adds that to each round. Rank 0 writes them; the job that sets BRAID_TUNE_FILE=FILE
// selects with them.
int calibrate(const Options& o, const Launch& l, int thread, const std::string& path) {
  const int nranks = l.nprocs * o.nthreads, rank = l.proc * o.nthreads + thread;
  braidComm_t comm = nullptr;
  check(braidCommInitRank(&comm, nranks, l.id, rank), "braidCommInitRank", comm, l);
  char mine[128] = {0};
  std::snprintf(mine, sizeof(mine), "%s", hostIdentity().c_str());
  std::vector<char> all(128 * static_cast<size_t>(nranks));
  check(braidAllGather(mine, all.data(), 128, braidUint8, comm, nullptr), "host ids", comm, l);
  int intraPeer = -1, interPeer = -1;
  for (int r = 1; r < nranks; ++r) {
    const bool same = std::strncmp(all.data(), all.data() + 128 * r, 128) == 0;
    if (same && intraPeer < 0) intraPeer = r;
    if (!same && interPeer < 0) interPeer = r;
  }
  if (rank == 0 && intraPeer < 0 && interPeer < 0)
    std::fprintf(stderr,
                 "braid-tune: one rank measures no link; only this core's reduction and copy "
                 "speeds are written\n");
  const size_t big = 16u << 20;
  // [0] intra latency, [1] intra bandwidth, [2] inter latency, [3] inter bandwidth, [4] step
  // overhead, [5] reduction speed fitted from collectives (0: use the local loop's)
  double values[6] = {0, 0, 0, 0, 0, 0};
  double cacheBw = 0, hostBw = 0, idleNet = 0, interOverhead = 0, wake = 0;
  // This rank's neighbours around its host (-1 when it is alone there).
  std::vector<int> mates;
  for (int r = 0; r < nranks; ++r)
    if (std::strncmp(all.data() + 128 * rank, all.data() + 128 * r, 128) == 0) mates.push_back(r);
  const size_t me = std::find(mates.begin(), mates.end(), rank) - mates.begin();
  const int next = mates.size() > 1 ? mates[(me + 1) % mates.size()] : -1;
  const int prev = mates.size() > 1 ? mates[(me + mates.size() - 1) % mates.size()] : -1;
  // This rank's counterparts on the next and the previous host (-1 where that host has fewer
  // ranks, or there is one host): hosts by first appearance, places in rank order.
  std::vector<int> hostOf(nranks), placeOf(nranks);
  std::vector<std::vector<int>> hosts;
  for (int r = 0; r < nranks; ++r) {
    size_t h = 0;
    while (h < hosts.size() &&
           std::strncmp(all.data() + 128 * hosts[h][0], all.data() + 128 * r, 128) != 0)
      ++h;
    if (h == hosts.size()) hosts.emplace_back();
    hostOf[r] = static_cast<int>(h);
    placeOf[r] = static_cast<int>(hosts[h].size());
    hosts[h].push_back(r);
  }
  auto counterpart = [&](int step) {
    const int nh = static_cast<int>(hosts.size());
    if (nh < 2) return -1;
    const std::vector<int>& there = hosts[(hostOf[rank] + step + nh) % nh];
    return placeOf[rank] < static_cast<int>(there.size()) ? there[placeOf[rank]] : -1;
  };
  const int nextNet = counterpart(1), prevNet = counterpart(-1);
  if (intraPeer > 0 && interPeer < 0) {
    // One host: fitted to the executor's own collectives, every rank busy as in real calls.
    // Recursive doubling all-reduce of 8 bytes: log2(n) rounds (plus two to fold a
    // remainder) of latency and overhead. Ring all-gather of 16 MiB blocks: n-1 rounds of a
    // block at the link's bandwidth. Ring reduce-scatter of the same: the difference is the
    // reductions.
    const Tuned* ar = &kTuned[0];
    const Tuned* ag = &kTuned[1];
    const Tuned* rs = &kTuned[2];
    int p2 = 1, rounds = 0;
    while (p2 * 2 <= nranks) p2 *= 2, ++rounds;
    rounds += p2 == nranks ? 0 : 2;
    const size_t block = big / 4;  // floats per rank
    std::vector<char> sendb(big * nranks), recvb(big * nranks);
    const double tiny = timeCall(comm, *ar, "recursive_doubling", sendb.data(), recvb.data(),
                                 WholeCounts(2, nranks), braidFloat32, 200, 5, l);
    values[0] = tiny / std::max(rounds, 1);
    const double agUs = timeCall(comm, *ag, "ring", sendb.data(), recvb.data(),
                                 GatherCounts(block * nranks, nranks), braidFloat32, 3, 1, l);
    const double moved = static_cast<double>(big) * (nranks - 1);
    values[1] = moved / std::max(agUs - (nranks - 1) * values[0], 1.0) / 1e3;
    const double rsUs = timeCall(comm, *rs, "ring", sendb.data(), recvb.data(),
                                 ScatterCounts(block * nranks, nranks), braidFloat32, 3, 1, l);
    values[5] = rsUs > agUs ? moved / (rsUs - agUs) / 1e3 : 0;  // 0: keep the local figure
    // The same all-gather with blocks small enough that a rank's data stays in a core's L2
    // (at most 64 KiB): cache speed. Capped at twice this core's copy speed, since the fit
    // divides by what is left after the latencies.
    const size_t l2 = l2Bytes();
    const size_t small = std::clamp<size_t>(
        l2 / (2 * static_cast<size_t>(nranks + 1)) / 4096 * 4096, 4096, 64u << 10);
    const double agSmall =
        timeCall(comm, *ag, "ring", sendb.data(), recvb.data(),
                 GatherCounts(small / 4 * nranks, nranks), braidFloat32, 50, 5, l);
    cacheBw = static_cast<double>(small) * (nranks - 1) /
              std::max(agSmall - (nranks - 1) * values[0], 1.0) / 1e3;
  } else if (intraPeer > 0) {
    values[0] = hostShift(comm, next, prev, 8, 200, l);
    const double t = hostShift(comm, next, prev, big, 5, l);
    values[1] = big / std::max(t - values[0], 1e-3) / 1e3;
  }
  if (intraPeer > 0) {
    const double single = pingPong(comm, rank, intraPeer, 8, 100, 1, l);
    const double burst = pingPong(comm, rank, intraPeer, 8, 50, 64, l);
    values[4] = std::max(0.0, (2 * burst - 2 * single) / 63);
    // Sends that must wake their receiver: rank 0 to every other rank of its host.
    std::vector<int> rootMates;
    for (int r = 1; r < nranks; ++r)
      if (std::strncmp(all.data(), all.data() + 128 * r, 128) == 0) rootMates.push_back(r);
    wake = std::max(0.0, fanOut(comm, rank, rootMates, 300, l) - values[4]);
    // The model's round is latency + one step overhead (a send's overhead overlaps the flight;
    // the receive's follows it), and the latency above was a whole round.
    values[0] = std::max(0.0, values[0] - values[4]);
    // The bandwidth above was every rank of the host copying at once: their sum is what the
    // host's memory system gives (host_bw_gbs). One pair alone gets more (intra_bw_gbs).
    hostBw = values[1] * static_cast<double>(mates.size());
    const double alone = pingPong(comm, rank, intraPeer, big, 3, 1, l);
    values[1] = std::max(values[1], big / std::max(alone - single, 1e-3) / 1e3);
  }
  if (interPeer > 0) {
    values[2] = std::max(0.0, hostShift(comm, nextNet, prevNet, 8, 100, l) - values[4]);
    idleNet = pingPong(comm, rank, interPeer, 8, 100, 1, l);
    const double t = pingPong(comm, rank, interPeer, big, 3, 1, l);
    values[3] = big / std::max(t - idleNet, 1e-3) / 1e3;
    // The network proxy's work per message: a burst of 64 small messages across hosts
    // against one.
    const double burst = pingPong(comm, rank, interPeer, 8, 30, 64, l);
    interOverhead = std::max(0.0, (2 * burst - 2 * idleNet) / 63);
  }
  if (rank == 0) {
    // This core's reduction (a += b over floats) and copy speeds, 32 MiB.
    const size_t n = 8u << 20;
    std::vector<float> a(n, 1.0f), b(n, 2.0f);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 4; ++k)
      for (size_t i = 0; i < n; ++i) a[i] += b[i];
    const double red =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        4;
    t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 4; ++k) std::memcpy(a.data(), b.data(), n * sizeof(float));
    const double cp =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        4;
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "braid-tune: cannot write --calibrate %s: %s\n", path.c_str(),
                   strerror(errno));
      Abort(l);
    }
    std::fprintf(f, "# braid-tune --calibrate: %d ranks, %s\n", nranks,
                 interPeer > 0 ? "several hosts" : "one host");
    std::string text;
    char line[160];
    if (intraPeer > 0) {
      std::snprintf(line, sizeof(line),
                    "intra_latency_us = %.3f\nintra_bw_gbs = %.3f\nhost_bw_gbs = %.3f\n"
                    "step_overhead_us = %.3f\nintra_send_overhead_us = %.3f\n",
                    values[0], values[1], hostBw, values[4], wake);
      text += line;
    }
    if (interPeer > 0) {
      std::snprintf(line, sizeof(line),
                    "inter_latency_us = %.3f\ninter_bw_gbs = %.4f\ninter_step_overhead_us = %.3f\n",
                    values[2], values[3], interOverhead);
      text += line;
      // For the record: the idle figure it replaces.
      std::snprintf(line, sizeof(line), "# an idle ping-pong between hosts: %.3f us\n", idleNet);
      text += line;
    }
    cacheBw = std::min(cacheBw, 2 * n * sizeof(float) / cp / 1e3);
    const size_t l2 = l2Bytes();
    if (cacheBw > values[1] && l2 > 0) {
      std::snprintf(line, sizeof(line), "intra_cache_bw_gbs = %.3f\ncache_bytes = %zu\n", cacheBw,
                    l2);
      text += line;
    }
    // The fitted reduction speed is a difference of two timings: kept within [1/4, 2] of this
    // core's own loop, which it should not be far from.
    const double loop = n * sizeof(float) / red / 1e3;
    const double reduce = values[5] > 0 ? std::clamp(values[5], loop / 4, loop * 2) : loop;
    std::snprintf(line, sizeof(line), "reduce_gbs = %.3f\ncopy_gbs = %.3f\n", reduce,
                  n * sizeof(float) / cp / 1e3);
    text += line;
    std::fputs(text.c_str(), f);
    std::fclose(f);
    std::printf("# calibration written to %s:\n%s", path.c_str(), text.c_str());
  }
  check(braidCommDestroy(comm), "braidCommDestroy", nullptr, l);
  return 0;
}

bool writeJson(const std::string& path, const std::vector<Row>& rows, int nranks) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "braid-tune: cannot write --json %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  std::fprintf(f, "[");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n  {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"ranks\": %d, "
                 "\"chosen\": \"%s\", \"best\": \"%s\", \"regret\": %.4f, \"algorithms\": {",
                 i ? "," : "", r.collective, r.bytes, r.count, nranks, r.chosen.c_str(),
                 r.best.c_str(), r.regret);
    bool first = true;
    for (const Cell& c : r.cells) {
      std::fprintf(f, "%s\"%s\": ", first ? "" : ", ", c.algo.c_str());
      if (c.measured_us < 0)
        std::fprintf(f, "{\"unsupported\": true}");
      else
        std::fprintf(f, "{\"measured_us\": %.3f, \"predicted_us\": %.3f}", c.measured_us,
                     c.predicted_us);
      first = false;
    }
    std::fprintf(f, "}}");
  }
  std::fprintf(f, "\n]\n");
  return std::fclose(f) == 0;
}

// One panel per collective: measured time (points) and predicted time (lines) per
// algorithm against size, log-log. gnuplot draws it; the data and script stay beside FILE.
bool writePlot(const std::string& png, const std::vector<Row>& rows) {
  const std::string base =
      png.size() > 4 && png.substr(png.size() - 4) == ".png" ? png.substr(0, png.size() - 4) : png;
  std::vector<std::string> colls;
  for (const Row& r : rows)
    if (std::find(colls.begin(), colls.end(), r.collective) == colls.end())
      colls.push_back(r.collective);
  const std::string gp = base + ".gp";
  FILE* s = std::fopen(gp.c_str(), "w");
  if (!s) {
    std::fprintf(stderr, "braid-tune: cannot write %s: %s\n", gp.c_str(), strerror(errno));
    return false;
  }
  const int cols = colls.size() > 1 ? 2 : 1;
  const int panelRows = static_cast<int>((colls.size() + cols - 1) / cols);
  std::fprintf(s,
               "set terminal pngcairo size %d,%d noenhanced\nset output '%s'\n"
               "set multiplot layout %d,%d\nset logscale xy\nset key left top font ',8'\n"
               "set xlabel 'bytes'\nset ylabel 'time (us)'\nset grid\n",
               700 * cols, 480 * panelRows, png.c_str(), panelRows, cols);
  for (const std::string& coll : colls) {
    const std::string dat = base + "-" + coll + ".dat";
    FILE* d = std::fopen(dat.c_str(), "w");
    if (!d) continue;
    std::vector<std::string> algos;
    for (const Row& r : rows)
      if (r.collective == coll)
        for (const Cell& c : r.cells)
          if (std::find(algos.begin(), algos.end(), c.algo) == algos.end()) algos.push_back(c.algo);
    // One block per algorithm: bytes measured predicted (NaN where it cannot run).
    for (const std::string& a : algos) {
      std::fprintf(d, "# %s\n", a.c_str());
      for (const Row& r : rows) {
        if (r.collective != coll) continue;
        for (const Cell& c : r.cells)
          if (c.algo == a && c.measured_us >= 0)
            std::fprintf(d, "%zu %.3f %.3f\n", r.bytes, c.measured_us, c.predicted_us);
      }
      std::fprintf(d, "\n\n");
    }
    std::fclose(d);
    std::fprintf(s, "set title '%s: points measured, lines predicted'\nplot ", coll.c_str());
    for (size_t i = 0; i < algos.size(); ++i)
      std::fprintf(s,
                   "%s'%s' index %zu using 1:2 with points pt 7 lc %zu title '%s', "
                   "'%s' index %zu using 1:3 with lines lc %zu notitle",
                   i ? ", " : "", dat.c_str(), i, i + 1, algos[i].c_str(), dat.c_str(), i, i + 1);
    std::fprintf(s, "\n");
  }
  std::fprintf(s, "unset multiplot\n");
  std::fclose(s);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr,
                 "braid-tune: gnuplot not found (apt-get install gnuplot-nox); the plot's script "
                 "is %s\n",
                 gp.c_str());
    return true;  // the data and script are written; drawing is up to the user
  }
  // gnuplot run directly (no shell), so no path can inject a command.
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", gp.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
    std::fprintf(stderr, "braid-tune: gnuplot %s failed (status %d)\n", gp.c_str(), status);
    return false;
  }
  std::printf("# plot: %s\n", png.c_str());
  return true;
}

}  // namespace
}  // namespace braid::perf

int main(int argc, char** argv) {
  using namespace braid::perf;
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
          "    of about 20 ms / N each, and report each one's median round (default 5)\n");
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
    for (const Tuned* t : f.colls) {
      int n = 0, good = 0;
      for (const Row& r : rows)
        if (r.collective == t->name && r.regret > 0) {
          ++n;
          good += r.regret <= 1.10;
        }
      if (n)
        std::printf("# %s: regret <= 1.10 at %d of %d sizes (%.0f%%)\n", t->name, good, n,
                    100.0 * good / n);
    }
    // How far the predictions are from the measurements, per algorithm: the median of
    // |predicted / measured - 1| over the sizes of at least 64 KiB.
    for (const Tuned* t : f.colls) {
      std::vector<std::string> algos;
      for (const Row& r : rows)
        if (r.collective == t->name)
          for (const Cell& c : r.cells)
            if (std::find(algos.begin(), algos.end(), c.algo) == algos.end())
              algos.push_back(c.algo);
      std::string line;
      for (const std::string& a : algos) {
        std::vector<double> err;
        for (const Row& r : rows)
          if (r.collective == t->name && r.bytes >= (64u << 10))
            for (const Cell& c : r.cells)
              if (c.algo == a && c.measured_us > 0)
                err.push_back(std::fabs(c.predicted_us / c.measured_us - 1));
        if (err.empty()) continue;
        std::sort(err.begin(), err.end());
        const double med = err.size() % 2 ? err[err.size() / 2]
                                          : (err[err.size() / 2 - 1] + err[err.size() / 2]) / 2;
        char buf[96];
        std::snprintf(buf, sizeof(buf), " %s %.0f%%", a.c_str(), 100 * med);
        line += buf;
      }
      if (!line.empty())
        std::printf("# %s: median |predicted/measured - 1| at >= 64 KiB:%s\n", t->name,
                    line.c_str());
    }
    if (!f.json.empty() && !writeJson(f.json, rows, nranks)) status = 1;
    if (!f.png.empty() && !writePlot(f.png, rows)) status = 1;
  }
  FinishLaunch(l);
  return status;
}
