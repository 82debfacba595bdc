// Tests for the schedule simulator (tuning/simulate.h).
//
// The timed tests assert the exact time the simulator's model (simulate.cc's header) gives
// for schedules simple enough to derive by hand: each derivation is written above its test,
// with L a hop's latency, X = bytes / bandwidth a transfer, o the step overhead, R = bytes /
// reduce_gbs a reduction and C = bytes / copy_gbs + o a copy. Then every row of the
// algorithm table is played on several layouts (one host, several hosts, a ring that is not
// rank order) and must finish without deadlock, moving at least the bytes its collective
// must move; and a hand-made deadlock and the refusals are reported.
#include "tuning/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "tuning/fabric.h"

namespace braid::tuning {
namespace {

constexpr size_t kFloat = 4;  // float32

// Microseconds for `bytes` at `gbs` GB/s.
double us(double bytes, double gbs) { return bytes / (gbs * 1e3); }

void expectTime(double got, double want) { EXPECT_NEAR(got, want, 1e-9 * want) << got; }

// A fabric with round numbers: intra 1.5 us, 10 GB/s; inter 5 us, 12.5 GB/s.
Fabric fabric(int hosts, int perHost) {
  Fabric f = uniformFabric(hosts, perHost, {1.5, 10}, {5, 12.5});
  f.reduce_gbs = 8;
  f.copy_gbs = 20;
  f.step_overhead_us = 0.5;
  return f;
}

SimResult play(Collective coll, const char* name, size_t count, const Fabric& f, int root = 0) {
  const AlgorithmInfo* algo = findAlgorithm(coll, name);
  EXPECT_NE(algo, nullptr) << name;
  if (!algo) return {};
  CollArgs a;
  a.coll = coll;
  a.count = count;
  a.root = root;
  SimResult r = simulateSchedules(*algo, a, kFloat, f);
  EXPECT_TRUE(r.ok) << r.error;
  return r;
}

// Ring all-reduce, one piece per chunk of B = S / n bytes. Every rank does the same at the
// same time and no port is shared (a rank's send port carries only its sends, its receive
// port only its left neighbour's). Reduce-scatter round s: the send starts when the
// recv-reduce of round s-1 finished, the message arrives L + X later and the recv-reduce
// finishes o + R after that: a round is L + X + o + R. All-gather rounds likewise without
// the reduction: L + X + o. The last receive ends the call:
//   time = (n - 1) (2L + 2X + 2o + R).
double ringAllReduce(int n, double bytes, const LinkCost& link, const Fabric& f) {
  const double chunk = bytes / n;
  const double x = us(chunk, link.bw_gbs), o = f.step_overhead_us;
  return (n - 1) * (2 * link.latency_us + 2 * x + 2 * o + us(chunk, f.reduce_gbs));
}

TEST(SimulateClosedForm, TwoRanksAllReduce) {
  const size_t count = 1 << 18;  // S = 1 MiB
  const double bytes = static_cast<double>(count * kFloat);
  Fabric one = fabric(1, 2);
  one.chunk_bytes = count * kFloat;  // one piece per chunk
  SimResult r = play(Collective::kAllReduce, "ring", count, one);
  expectTime(r.time_us, ringAllReduce(2, bytes, one.intra, one));
  EXPECT_EQ(r.steps, 8u);
  EXPECT_EQ(r.messages, 4u);
  EXPECT_EQ(r.net_bytes, 0);
  EXPECT_EQ(r.intra_bytes, 2 * bytes);

  Fabric two = fabric(2, 1);
  two.chunk_bytes = count * kFloat;
  r = play(Collective::kAllReduce, "ring", count, two);
  expectTime(r.time_us, ringAllReduce(2, bytes, two.inter, two));
  EXPECT_EQ(r.net_bytes, 2 * bytes);
  EXPECT_EQ(r.intra_bytes, 0);
}

TEST(SimulateClosedForm, RingAllReduceRounds) {
  for (int n : {4, 8}) {
    const size_t count = 1 << 18;
    Fabric f = fabric(1, n);
    f.chunk_bytes = count * kFloat;
    const SimResult r = play(Collective::kAllReduce, "ring", count, f);
    expectTime(r.time_us, ringAllReduce(n, static_cast<double>(count * kFloat), f.intra, f));
    EXPECT_EQ(r.messages, static_cast<size_t>(2 * n * (n - 1)));
  }
}

// Ring broadcast of p pieces of P bytes (X = P / bw) along the chain root, root+1, ...
// Each rank's engine runs its steps one at a time, and within a host a send holds it for
// X + o (the sending thread copies into the FIFO). The root copies piece k into its own
// receive buffer once piece k is sent; that copy and the send of piece k+1 become ready
// together, the copy first, so the root's engine posts a piece every T = X + o + C: piece k
// at k T. Rank j of the chain finishes receiving piece k at F(j, k) = k T + j (L + X + o):
// by induction, it forwards piece k at F(j, k) (its engine is free: the send of piece k-1
// ended at F(j, k-1) + X + o <= F(j, k) - L), the piece arrives at F(j, k) + L + X, after
// rank j+1's engine ended the send of piece k-1 (C >= o), and the receive takes o more.
// The root's last copy ends at p T, before the last rank is done (n >= 3, C <= X + o + 2L).
//   time = F(n-1, p-1) = (n - 1)(L + X + o) + (p - 1)(X + o + C),
// which is (n - 1) hops X + o and p - 1 root periods when L = 0.
TEST(SimulateClosedForm, RingBroadcastPipelines) {
  const size_t pieceElems = 16384;  // P = 64 KiB
  for (double latency : {0.0, 1.5})
    for (int n : {3, 5, 8})
      for (int p : {1, 4, 9})
        for (int root : {0, n - 1}) {
          Fabric f = fabric(1, n);
          f.intra.latency_us = latency;
          f.chunk_bytes = pieceElems * kFloat;
          const SimResult r = play(Collective::kBroadcast, "ring", pieceElems * p, f, root);
          const double x = us(static_cast<double>(f.chunk_bytes), f.intra.bw_gbs);
          const double o = f.step_overhead_us;
          const double c = us(static_cast<double>(f.chunk_bytes), f.copy_gbs) + o;
          expectTime(r.time_us, (n - 1) * (latency + x + o) + (p - 1) * (x + o + c));
          if (latency == 0) expectTime(r.time_us, (n - 1) * (x + o) + (p - 1) * (x + o + c));
          EXPECT_EQ(r.messages, static_cast<size_t>((n - 1) * p));
        }
}

// Direct gather on one host: n-1 senders post at once and each holds its own send port, but
// all hold the root's receive port, so they go one after another (in rank order, the order
// they became ready): sender j starts at (j-1) X and its message arrives at j X + L. The
// root's receives sit in separate queues (one per peer), so the last ends at
//   time = (n - 1) X + L + o,
// later than the root's own copy C: linear in the number of senders.
TEST(SimulateClosedForm, GatherSerialisesAtRootPort) {
  const size_t count = 1 << 16;  // 256 KiB per rank
  const double bytes = static_cast<double>(count * kFloat);
  for (int n = 2; n <= 9; ++n) {
    const Fabric f = fabric(1, n);
    const SimResult r = play(Collective::kGather, "direct", count, f);
    const double x = us(bytes, f.intra.bw_gbs);
    expectTime(r.time_us, (n - 1) * x + f.intra.latency_us + f.step_overhead_us);
    EXPECT_EQ(r.intra_bytes, (n - 1) * bytes);
    EXPECT_EQ(r.messages, static_cast<size_t>(n - 1));
  }
}

// Rank 0 sends count elements to each other rank in rank order; each of them receives one.
void buildFanOut(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  if (a.rank != 0) {
    out->add(recvStep(0, BufRef{BufferId::kRecv, 0}, a.count));
    return;
  }
  for (int p = 1; p < a.nranks; ++p) out->add(sendStep(p, BufRef{BufferId::kSend, 0}, a.count));
}

// A rank's steps share its one progress engine (the executor's thread), so a root sending to
// k = n - 1 peers pays k step overheads one after another, however many ports or NICs it
// could use at once. The k sends are ready at once, each in its own queue.
// Between hosts (one rank each, so each peer has its own NIC) the engine holds a send for o
// (the proxy moves the bytes): with X < o, send j starts at (j - 1) o, arrives L + X later,
// and its receive takes o:
//   time = (k - 1) o + L + X + o = k o + L + X.
// Within a host the sending thread copies into the FIFO, so a send holds the engine for
// X + o (its port only for X): send j starts at (j - 1)(X + o), and
//   time = (k - 1)(X + o) + L + X + o = k (X + o) + L.
TEST(SimulateClosedForm, RootPaysEveryStepOverhead) {
  const AlgorithmInfo fanOut{"fan-out", Collective::kBroadcast, "root sends to each", buildFanOut,
                             nullptr};
  for (int n = 2; n <= 9; ++n) {
    const int k = n - 1;
    CollArgs a;
    a.coll = Collective::kBroadcast;
    a.count = 16;  // 64 bytes: X well under o between hosts
    const Fabric hosts = fabric(n, 1);
    const double xs = us(64, hosts.inter.bw_gbs), o = hosts.step_overhead_us;
    ASSERT_LT(xs, o);
    SimResult r = simulateSchedules(fanOut, a, kFloat, hosts);
    ASSERT_TRUE(r.ok) << r.error;
    expectTime(r.time_us, k * o + hosts.inter.latency_us + xs);
    EXPECT_EQ(r.messages, static_cast<size_t>(k));

    a.count = 1 << 16;  // 256 KiB
    const Fabric one = fabric(1, n);
    const double x = us(static_cast<double>(a.count * kFloat), one.intra.bw_gbs);
    r = simulateSchedules(fanOut, a, kFloat, one);
    ASSERT_TRUE(r.ok) << r.error;
    expectTime(r.time_us, k * (x + o) + one.intra.latency_us);

    // Waking each receiver (intra_send_overhead_us = W) holds the sending engine too, and
    // the send finishes W later: the last send ends at k (X + o + W), its receive at
    // k (X + o + W) - W + L, so with W > L the root ends the call:
    //   time = k (X + o + W).
    Fabric waking = one;
    waking.intra_send_overhead_us = 2.25;
    r = simulateSchedules(fanOut, a, kFloat, waking);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_GT(2.25, one.intra.latency_us);
    expectTime(r.time_us, k * (x + o + 2.25));

    // A GPU kernel's warps move the data (engine_moves_data false): a send holds the engine
    // for o only and the root's port for X > o, so send j starts at (j - 1) X:
    //   time = (k - 1) X + L + X + o = k X + L + o.
    Fabric gpu = one;
    gpu.engine_moves_data = false;
    ASSERT_GT(x, o);
    r = simulateSchedules(fanOut, a, kFloat, gpu);
    ASSERT_TRUE(r.ok) << r.error;
    expectTime(r.time_us, k * x + gpu.intra.latency_us + o);

    // The network proxy's work per message (inter_step_overhead_us = N > o) holds the root's
    // NIC besides the bytes, but is not in the latency: send j starts at (j - 1)(X + N),
    //   time = (k - 1)(X + N) + L + X + o.
    a.count = 16;
    Fabric proxy = hosts;
    proxy.inter_step_overhead_us = 3 * o;
    proxy.nicsPerHost = 1;
    // One host with the root, one with the k receivers: the root's one NIC carries them all.
    proxy.hostOf.assign(n, 1);
    proxy.hostOf[0] = 0;
    const double n3 = proxy.inter_step_overhead_us;
    r = simulateSchedules(fanOut, a, kFloat, proxy);
    ASSERT_TRUE(r.ok) << r.error;
    expectTime(r.time_us, (k - 1) * (xs + n3) + proxy.inter.latency_us + xs + o);
  }
}

// Ranks 0 and 1 on host 0, 2 and 3 on host 1. Rank 0 sends 8 messages of count elements to
// rank 2; rank 1 sends one to rank 3, which then copies count * 4096 elements locally.
void buildTwoSenders(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const BufRef at{BufferId::kRecv, 0};
  if (a.rank == 0)
    for (int i = 0; i < 8; ++i) out->add(sendStep(2, BufRef{BufferId::kSend, 0}, a.count));
  if (a.rank == 2)
    for (int i = 0; i < 8; ++i) out->add(recvStep(0, at, a.count));
  if (a.rank == 1) out->add(sendStep(3, BufRef{BufferId::kSend, 0}, a.count));
  if (a.rank == 3) {
    const int got = out->add(recvStep(1, at, a.count));
    out->add(copyStep(BufRef{BufferId::kSend, 0}, at, a.count * 4096, got));
  }
}

// A shared NIC serves the send that asked first: rank 1's one send, asking at 0 with rank
// 0's first, goes second (ties by step id), not after all of rank 0's, which ask only as
// their predecessors finish. With the NIC held X + N a message (N: the proxy's work):
// rank 1's send starts at X + N, arrives L + X later, its receive takes o and the copy
// C (4096 times its bytes at copy speed, plus o) after it, which outlasts rank 0's 8 sends:
//   time = (X + N) + L + X + o + C.
TEST(SimulateClosedForm, SharedNicIsFirstComeFirstServed) {
  const AlgorithmInfo two{"two-senders", Collective::kBroadcast, "", buildTwoSenders, nullptr};
  Fabric f = fabric(2, 2);
  f.nicsPerHost = 1;
  f.inter_step_overhead_us = 4;
  CollArgs a;
  a.coll = Collective::kBroadcast;
  a.count = 256;  // 1 KiB
  const double x = us(1024, f.inter.bw_gbs), n = 4, o = f.step_overhead_us;
  const double c = us(4096.0 * 1024, f.copy_gbs) + o;
  ASSERT_GT(c, 8 * (x + n));
  const SimResult r = simulateSchedules(two, a, kFloat, f);
  ASSERT_TRUE(r.ok) << r.error;
  expectTime(r.time_us, (x + n) + f.inter.latency_us + x + o + c);
}

// The host's memory system as a shared resource: the same gather with host_bw_gbs equal to
// a port's bandwidth changes nothing (the root's port serialises the senders already); with
// every rank exchanging at once (ring all-gather, 4 ranks, one piece) and host_bw_gbs at a
// port's bandwidth, the 12 copies (4 per round) go one after the other through the host: the
// call takes at least 12X (instead of the unshared time below), and at most 3 (L + 4X + o)
// plus the own-block copy C, each round waiting for all four.
// Unshared, every rank sends its block (its engine busy X + o), then copies its own block
// into place (C) while the left neighbour's block arrives (at L + X): the receive runs once
// the copy is done, so round 1 ends at X + o + C + o, and rounds 2 and 3 take L + X + o.
TEST(SimulateClosedForm, HostMemoryIsShared) {
  const size_t count = 1 << 16;
  const double bytes = static_cast<double>(count * kFloat);
  Fabric f = fabric(1, 4);
  f.chunk_bytes = size_t{1} << 30;
  const double x = us(bytes, f.intra.bw_gbs), o = f.step_overhead_us, l = f.intra.latency_us;
  const double c = us(bytes, f.copy_gbs) + o;
  ASSERT_GT(c, l - o);  // the copy outlasts the wait for the first block
  expectTime(play(Collective::kAllGather, "ring", count, f).time_us,
             (x + o + c + o) + 2 * (l + x + o));
  f.host_bw_gbs = f.intra.bw_gbs;
  const double shared = play(Collective::kAllGather, "ring", count, f).time_us;
  EXPECT_GE(shared, 12 * x);
  EXPECT_LE(shared, 3 * (l + 4 * x + o) + c + 1e-6);
  const double gx = us(bytes, f.intra.bw_gbs);
  expectTime(play(Collective::kGather, "direct", count, f).time_us, 3 * gx + l + o);
}

// Pairwise all-to-all on 2 hosts x 4 ranks, blocks of B bytes, intra and inter hops alike
// (latency L, X = B / bw), u = L + X + o. Step k sends to rank + k and receives from rank - k;
// each send waits for the previous step's receive, and each send and receive is alone in its
// queue (one message per peer). Every rank first copies its own block (C = B / copy_gbs + o)
// on its engine, so every step starts C later; within a step a rank's send holds its engine
// for at most X + o, over before the step's message arrives (L >= o).
// With 4 NICs per host every rank has its own NIC, so nothing is shared: every step is a
// round of u for every rank, time = C + 7u.
// With one NIC per host the host's m_k = min(k, 8-k) crossing flows of step k share it
// (first come, first served, ties by rank) and stagger the ranks. For X < (L + o) / 3 each
// NIC drains before the next step needs it, and the receive of step k on ranks 0..7
// finishes at k u plus (in X):
//   k = 1, 2: 0 0 0 0 0 0 0 0 except k = 2: ranks 1 and 5 +1 (second on the NIC);
//   k = 3: 2 0 1 0 2 0 1 0;   k = 4: 3 0 2 1 3 0 2 1;   k = 5: 1 3 0 2 1 3 0 2;
//   k = 6: 0 2 1 3 0 2 1 3;   k = 7: 2 1 3 0 2 1 3 0,
// so time = C + 7u + 3X.
TEST(SimulateClosedForm, NicSharingPairwiseAllToAll) {
  const size_t count = 2500;  // B = 10000 bytes: X = 1 us at 10 GB/s
  const double bytes = static_cast<double>(count * kFloat);
  const double x = us(bytes, 10), o = 1, c = us(bytes, 100) + o;
  // X < (L + o) / 3 (at equality a NIC frees just as a later step asks for it, and the
  // send that has waited longer goes first, which staggers the ranks otherwise).
  for (double lat : {2.5, 3.0, 10.0}) {
    const double u = lat + x + o;
    double t[2] = {0, 0};
    for (int nics : {1, 4}) {
      Fabric f = uniformFabric(2, 4, {lat, 10}, {lat, 10});
      f.nicsPerHost = nics;
      f.step_overhead_us = o;
      f.copy_gbs = 100;
      const SimResult r = play(Collective::kAllToAll, "pairwise", count, f);
      EXPECT_EQ(r.net_bytes, 2 * 4 * 4 * bytes);
      EXPECT_EQ(r.intra_bytes, 2 * 4 * 3 * bytes);
      EXPECT_EQ(r.messages, 56u);
      t[nics == 4] = r.time_us;
    }
    expectTime(t[1], c + 7 * u);
    expectTime(t[0], c + 7 * u + 3 * x);
    expectTime(t[0] / t[1], (c + 7 * u + 3 * x) / (c + 7 * u));
  }
}

// The fewest bytes a collective must move between ranks: each rank's input must leave it
// (in some form) where another rank needs it, and every output not held at the start must
// arrive.
double minBytes(Collective c, int n, size_t count) {
  const double nb = static_cast<double>(count * kFloat), nn = n;
  switch (c) {
    case Collective::kAllReduce:
      return nn * nb;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
      return nn * (nn - 1) * nb;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kGather:
    case Collective::kScatter:
      return (nn - 1) * nb;
    case Collective::kBarrier:
      return 0;
  }
  return 0;
}

struct Layout {
  const char* name;
  Fabric fabric;
};

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (int n : {1, 2, 3, 4, 5, 8}) out.push_back({"one host", fabric(1, n)});
  out.push_back({"2 hosts x 2", fabric(2, 2)});
  out.push_back({"4 hosts x 2", fabric(4, 2)});
  Fabric ring5 = fabric(1, 5);
  ring5.ring = {3, 1, 4, 0, 2};
  out.push_back({"one host, ring 3 1 4 0 2", ring5});
  Fabric ring4 = fabric(2, 2);
  ring4.ring = {1, 0, 3, 2};
  ring4.nicsPerHost = 2;
  out.push_back({"2 hosts x 2, ring 1 0 3 2, 2 NICs", ring4});
  return out;
}

// Every row of the algorithm table, on every layout, a count that does not divide by the
// rank counts, pieces of 64 elements (several per block) and roots 0 and n-1.
TEST(SimulateTable, EveryRowFinishes) {
  const size_t count = 1000;
  int played = 0;
  for (const AlgorithmInfo& algo : algorithms()) {
    int rowPlayed = 0;
    for (Layout& l : layouts()) {
      Fabric& f = l.fabric;
      f.chunk_bytes = 64 * kFloat;
      const int n = f.nranks();
      std::vector<size_t> counts(n, count), displs(n);
      for (int j = 0; j < n; ++j) displs[j] = j * count;
      for (int root : {0, n - 1}) {
        CollArgs a;
        a.coll = algo.coll;
        a.count = count;
        a.root = root;
        a.sendCounts = a.recvCounts = counts.data();
        a.sendDispls = a.recvDispls = displs.data();
        const SimResult r = simulateSchedules(algo, a, kFloat, f);
        const std::string what = std::string(algo.name) + " " + collectiveName(algo.coll) + " on " +
                                 l.name + " (" + std::to_string(n) + " ranks), root " +
                                 std::to_string(root);
        if (!r.ok && r.error.find("not supported") != std::string::npos) continue;
        ++rowPlayed;
        ASSERT_TRUE(r.ok) << what << ": " << r.error;
        if (n > 1 || algo.coll != Collective::kBarrier) {  // a barrier of one rank does nothing
          EXPECT_GT(r.time_us, 0) << what;
          EXPECT_GT(r.steps, 0u) << what;
        }
        if (n > 1) {
          EXPECT_GT(r.messages, 0u) << what;
          EXPECT_GE(r.net_bytes + r.intra_bytes, minBytes(algo.coll, n, count)) << what;
        } else {
          EXPECT_EQ(r.messages, 0u) << what;
        }
        if (f.nhosts() == 1) {
          EXPECT_EQ(r.net_bytes, 0) << what;
        } else if (algo.coll != Collective::kBarrier) {
          EXPECT_GT(r.net_bytes, 0) << what;
        }
        if (!isRooted(algo.coll)) break;
      }
    }
    EXPECT_GT(rowPlayed, 0) << algo.name << " " << collectiveName(algo.coll)
                            << " was not supported on any layout";
    played += rowPlayed;
  }
  std::printf("played %d calls over %zu rows\n", played, algorithms().size());
}

// Rank 0 receives from rank 1 and rank 1 from rank 0; nobody sends.
void buildDeadlock(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  out->add(recvStep(1 - a.rank, BufRef{BufferId::kRecv, 0}, a.count));
}

TEST(SimulateErrors, Deadlock) {
  const AlgorithmInfo fake{"fake", Collective::kAllReduce, "two receives", buildDeadlock, nullptr};
  CollArgs a;
  a.count = 16;
  const SimResult r = simulateSchedules(fake, a, kFloat, fabric(1, 2));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("deadlock"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank 0 waits at step 0 (recv from rank 1)"), std::string::npos)
      << r.error;
  EXPECT_EQ(r.steps, 0u);
}

// Rank 0 sends to rank 1, which never receives.
void buildLostSend(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  if (a.rank == 0) out->add(sendStep(1, BufRef{BufferId::kSend, 0}, a.count));
}

// Rank 0 sends count elements to rank 1, which receives count + 1.
void buildSizeMismatch(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  if (a.rank == 0) out->add(sendStep(1, BufRef{BufferId::kSend, 0}, a.count));
  if (a.rank == 1) out->add(recvStep(0, BufRef{BufferId::kRecv, 0}, a.count + 1));
}

TEST(SimulateErrors, Refusals) {
  CollArgs a;
  a.count = 16;
  const AlgorithmInfo lost{"lost", Collective::kAllReduce, "a send nobody receives", buildLostSend,
                           nullptr};
  SimResult r = simulateSchedules(lost, a, kFloat, fabric(1, 2));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("never received"), std::string::npos) << r.error;

  const AlgorithmInfo mismatch{"mismatch", Collective::kAllReduce, "sizes differ",
                               buildSizeMismatch, nullptr};
  r = simulateSchedules(mismatch, a, kFloat, fabric(2, 1));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("sizes differ"), std::string::npos) << r.error;

  const AlgorithmInfo* ring = findAlgorithm(Collective::kAllReduce, "ring");
  ASSERT_NE(ring, nullptr);
  r = simulateSchedules(*ring, a, kFloat, fabric(1, 8), 4);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("maxRanks"), std::string::npos) << r.error;

  Fabric badRing = fabric(1, 3);
  badRing.ring = {0, 1, 1};
  r = simulateSchedules(*ring, a, kFloat, badRing);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("ring"), std::string::npos) << r.error;

  // Pairwise all-to-all-v needs the count arrays: its refusal comes back as the error.
  const AlgorithmInfo* v = findAlgorithm(Collective::kAllToAllv, "pairwise");
  ASSERT_NE(v, nullptr);
  CollArgs noArrays;
  noArrays.coll = Collective::kAllToAllv;
  r = simulateSchedules(*v, noArrays, kFloat, fabric(1, 2));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("counts and displacements"), std::string::npos) << r.error;
}

// Ring all-reduce of 64 MiB of float32 on 256 ranks (4 hosts x 64): about a million steps.
// No timing assertion; it prints the predicted time and how long the simulation took.
TEST(SimulateScale, RingAllReduce256Ranks) {
  Fabric f = uniformFabric(4, 64, {1, 10}, {5, 12.5});
  const size_t count = (size_t{64} << 20) / kFloat;
  const auto t0 = std::chrono::steady_clock::now();
  const SimResult r = play(Collective::kAllReduce, "ring", count, f);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok) << r.error;
  // The bandwidth bound: 2 (n-1)/n of the vector through the slowest link.
  EXPECT_GT(r.time_us, us(2.0 * 255 / 256 * count * kFloat, 10));
  EXPECT_EQ(r.net_bytes, 4 * 2 * 255 * (count / 256) * static_cast<double>(kFloat));
  std::printf(
      "ring all-reduce 64 MiB, %s: %.1f us predicted, %zu steps, %zu messages, "
      "simulated in %.3f s\n",
      f.describe().c_str(), r.time_us, r.steps, r.messages, secs);
}

}  // namespace
}  // namespace braid::tuning
