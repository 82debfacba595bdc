// braid-tune --calibrate: the cost model's link figures measured on this job (BRAID_TUNE_FILE).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "tune.h"

namespace braid::perf::tune {
namespace {

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

}  // namespace

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

}  // namespace braid::perf::tune
