// Where ranks sit and the ring they form: CPU lists, the NUMA node of a thread, the
// communicator's ring (grouped by host, then NUMA node), BRAID_RING's syntax and errors, and
// end to end, processes on interleaved logical hosts whose communicator takes the grouped ring
// and still computes exact results.
#include "topology/placement.h"

#include <gtest/gtest.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/comm.h"
#include "test_util.h"

namespace braid {
namespace {

using topo::commRing;
using topo::numaNodeOfCpus;
using topo::parseCpuList;
using topo::parseRingSpec;

TEST(CpuList, ParsesSysfsSyntax) {
  std::vector<int> c;
  ASSERT_TRUE(parseCpuList("0-3,8,10-11\n", &c));
  EXPECT_EQ(c, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  ASSERT_TRUE(parseCpuList("", &c));
  EXPECT_TRUE(c.empty());
  for (const char* bad : {"a", "3-1", "1-", "-1", "1,,2", "1 2", "0-99999999"})
    EXPECT_FALSE(parseCpuList(bad, &c)) << bad;
}

TEST(CpuList, NodeOfCpus) {
  const std::vector<std::vector<int>> nodes = {{0, 1}, {2, 3}};
  EXPECT_EQ(numaNodeOfCpus({0, 1}, nodes), 0);
  EXPECT_EQ(numaNodeOfCpus({3}, nodes), 1);
  EXPECT_EQ(numaNodeOfCpus({1, 2}, nodes), -1);  // spans two nodes
  EXPECT_EQ(numaNodeOfCpus({7}, nodes), -1);     // in none
  EXPECT_EQ(numaNodeOfCpus({}, nodes), -1);
}

// A fake sysfs root with nodes listing CPUs: one node holding every CPU of this thread gives
// that node; nodes that split the thread's CPUs give -1; no node directory gives -1.
TEST(CpuList, CurrentNumaNodeUnderAFsroot) {
  char tmpl[] = "/tmp/braid-placement-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto writeNode = [&](int id, const std::string& cpus) {
    const std::string dir = root + "/sys/devices/system/node/node" + std::to_string(id);
    ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
    std::ofstream(dir + "/cpulist") << cpus << "\n";
  };
  EXPECT_EQ(topo::currentNumaNode(root), -1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  writeNode(0, "0-" + std::to_string(CPU_SETSIZE - 1));
  EXPECT_EQ(topo::currentNumaNode(root), 0);
  if (mine.size() > 1) {
    writeNode(0, std::to_string(mine[0]));
    std::string rest;
    for (size_t k = 1; k < mine.size(); ++k) rest += (k > 1 ? "," : "") + std::to_string(mine[k]);
    writeNode(1, rest);
    EXPECT_EQ(topo::currentNumaNode(root), -1);
  }
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

TEST(CommRing, GroupsByHostThenNuma) {
  // Rank order already grouped: the identity.
  EXPECT_EQ(commRing({0, 0, 1, 1}, {}), (std::vector<int>{0, 1, 2, 3}));
  // Round-robin over two hosts: each host's ranks together, hosts in order of first rank.
  EXPECT_EQ(commRing({0, 1, 0, 1}, {}), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(commRing({0, 1, 2, 0, 1, 2}, {}), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  // One host, NUMA nodes alternating: nodes grouped, in order of first rank.
  EXPECT_EQ(commRing({0, 0, 0, 0}, {1, 0, 1, 0}), (std::vector<int>{0, 2, 1, 3}));
  // Hosts first, then NUMA within each; unknown NUMA (-1) is a group of its own.
  EXPECT_EQ(commRing({0, 1, 0, 1, 0, 1}, {0, 0, 1, 1, 0, -1}),
            (std::vector<int>{0, 4, 2, 1, 3, 5}));
  EXPECT_EQ(commRing({0}, {}), (std::vector<int>{0}));
  EXPECT_TRUE(commRing({}, {}).empty());
}

TEST(RingSpec, ParsesAndRestrictsToTheCommunicator) {
  std::vector<int> ring;
  ASSERT_EQ(parseRingSpec("0 2 1 3", 4, &ring), braidSuccess);
  EXPECT_EQ(ring, (std::vector<int>{0, 2, 1, 3}));
  ASSERT_EQ(parseRingSpec("7,5,3,1, 6 4 2 0", 3, &ring), braidSuccess);
  EXPECT_EQ(ring, (std::vector<int>{1, 2, 0}));
  ASSERT_EQ(parseRingSpec("0", 1, &ring), braidSuccess);
  EXPECT_EQ(ring, (std::vector<int>{0}));
}

TEST(RingSpec, ErrorsNameTheVariableAndTheProblem) {
  struct Bad {
    const char* spec;
    int n;
    const char* says;
  } bad[] = {
      {"0 1 1", 2, "rank 1 appears twice"},
      {"0 1 5 5", 2, "rank 5 appears twice"},
      {"0 2", 3, "rank 1 of this 3-rank communicator is missing"},
      {"0 x 1", 2, "'x' at offset 2 is not a rank"},
      {"0 -1", 2, "'-' at offset 2"},
      {"", 2, "rank 0 of this 2-rank communicator is missing"},
      {"0 99999999999999999999", 1, "too large"},
  };
  for (const Bad& b : bad) {
    std::vector<int> ring;
    EXPECT_EQ(parseRingSpec(b.spec, b.n, &ring), braidInvalidArgument) << b.spec;
    const std::string msg = lastError();
    EXPECT_NE(msg.find("BRAID_RING"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.says), std::string::npos) << msg;
  }
}

// Four processes on two logical hosts placed round-robin (rank r on host r % 2, as
// `mpirun --map-by node` places them): the communicator's ring is 0 2 1 3, so the ring
// crosses the network twice instead of four times, and every collective the ring and tree
// algorithms run still gives exact results.
int interleavedChild(int rank, int nranks) {
  setenv("BRAID_HOST_ID", rank % 2 ? "placement-h1" : "placement-h0", 1);
  braidComm_t comm = nullptr;
  if (braidCommInitFromEnv(&comm) != braidSuccess) {
    std::fprintf(stderr, "init: %s\n", braidGetLastError(nullptr));
    return 1;
  }
  const std::vector<int> want = {0, 2, 1, 3};
  if (comm->ring != want) {
    std::fprintf(stderr, "rank %d: ring is not 0 2 1 3\n", rank);
    return 1;
  }
  int bad = 0;
  for (const char* algo : {"ring", "tree"})
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
      std::vector<float> in(count), out(count, -1);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank + 1 + i % 7);
      if (braidCommSetAlgorithm(comm, "allreduce", algo) != braidSuccess ||
          braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, comm, nullptr) !=
              braidSuccess) {
        std::fprintf(stderr, "allreduce %s: %s\n", algo, braidGetLastError(comm));
        return 1;
      }
      for (size_t i = 0; i < count; ++i) {
        const float sum = static_cast<float>(nranks * (nranks + 1) / 2 + nranks * (i % 7));
        bad += out[i] != sum;
      }
    }
  // Reduce-scatter and all-gather on the ring: block r still belongs to rank r.
  const size_t count = 5000;
  std::vector<float> in(count * nranks), out(count, -1), all(count * nranks, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank * 10 + i % 3);
  braidCommSetAlgorithm(comm, "reducescatter", "ring");
  braidCommSetAlgorithm(comm, "allgather", "ring");
  if (braidReduceScatter(in.data(), out.data(), count, braidFloat32, braidSum, comm, nullptr) ||
      braidAllGather(out.data(), all.data(), count, braidFloat32, comm, nullptr)) {
    std::fprintf(stderr, "rs/ag: %s\n", braidGetLastError(comm));
    return 1;
  }
  // Element i of the gathered vector is element i of the reduced input: sum of rank * 10 + n * (i %
  // 3).
  for (size_t i = 0; i < all.size(); ++i)
    bad += all[i] != static_cast<float>(60 + nranks * (i % 3));
  braidCommDestroy(comm);
  if (bad) std::fprintf(stderr, "rank %d: %d wrong elements\n", rank, bad);
  return bad ? 1 : 0;
}

TEST(CommRing, InterleavedHostsGetTheGroupedRing) {
  auto results = test::runProcesses(4, "interleaved", {"BRAID_DEBUG=INFO"});
  bool logged = false;
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
    logged = logged ||
             results[r].output.find("ring: 0 2 1 3 (ranks grouped by host") != std::string::npos;
  }
  EXPECT_TRUE(logged) << "rank 0 logs the ring at BRAID_DEBUG=INFO";
  EXPECT_TRUE(test::shmLeftovers(results).empty());
}

// A rank's inbound FIFOs (its segment, which its peers write first) are placed on its own
// NUMA node: the segment carries an MPOL_PREFERRED policy for that node, and the pages the
// peer's pieces faulted in lie there. On a machine of one node this checks the plumbing
// (policy set, pages resident where the rank runs); a rank whose CPUs span nodes sets none.
int segmentNumaChild(int rank, int nranks) {
  braidComm_t comm = nullptr;
  if (braidCommInitFromEnv(&comm) != braidSuccess) {
    std::fprintf(stderr, "init: %s\n", braidGetLastError(nullptr));
    return 1;
  }
  std::vector<float> v(256 << 10, 1.0f);
  if (braidAllReduce(v.data(), v.data(), v.size(), braidFloat32, braidSum, comm, nullptr) !=
          braidSuccess ||
      v.back() != static_cast<float>(nranks)) {
    std::fprintf(stderr, "rank %d: all-reduce: %s\n", rank, braidGetLastError(comm));
    return 1;
  }
  const int node = topo::currentNumaNode();
  const int peer = 1 - rank;
  // Braid only logs when mbind is refused (a cpuset without this node's memory, a memoryless
  // node): ask the machine directly, on a page of our own, whether it would take the policy.
  if (node >= 0) {
    void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned long want[16] = {};
    want[static_cast<size_t>(node) / (8 * sizeof(unsigned long))] |=
        1ul << (static_cast<size_t>(node) % (8 * sizeof(unsigned long)));
    const bool refused =
        probe == MAP_FAILED || syscall(SYS_mbind, probe, 4096, MPOL_PREFERRED, want,
                                       16 * 8 * sizeof(unsigned long) + 1, 0) != 0;
    const int e = errno;
    if (probe != MAP_FAILED) munmap(probe, 4096);
    if (refused) {
      std::fprintf(stderr, "rank %d: mbind to node %d refused here: %s\n", rank, node, strerror(e));
      braidCommDestroy(comm);
      return 77;
    }
  }
  char* fifo = static_cast<char*>(comm->segment->fifo(peer));
  int mode = -1;
  unsigned long mask[16] = {};
  if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(unsigned long), fifo, MPOL_F_ADDR) !=
      0) {
    // Containers' seccomp profiles refuse the NUMA calls without CAP_SYS_NICE (EPERM), and
    // kernels without NUMA lack them (ENOSYS): Braid then leaves placement to first touch.
    const bool refused = errno == EPERM || errno == ENOSYS;
    std::fprintf(stderr, "rank %d: get_mempolicy: %s\n", rank, strerror(errno));
    braidCommDestroy(comm);
    return refused ? 77 : 1;
  }
  int bad = 0;
  if (node < 0) {
    if (mode != MPOL_DEFAULT) std::fprintf(stderr, "rank %d: a policy without a node\n", rank);
    bad += mode != MPOL_DEFAULT;
  } else {
    const size_t bits = 8 * sizeof(unsigned long);
    const bool inMask =
        (mask[static_cast<size_t>(node) / bits] >> (static_cast<size_t>(node) % bits)) & 1;
    if (mode != MPOL_PREFERRED || !inMask) {
      std::fprintf(stderr, "rank %d on node %d: policy %d, node %s in the mask\n", rank, node, mode,
                   inMask ? "" : "not");
      ++bad;
    }
    // The first page of the FIFO's cells: written by the peer's pieces.
    void* page =
        reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(fifo + 4096) & ~uintptr_t{4095});
    int status = -1;
    if (syscall(SYS_move_pages, 0, 1, &page, nullptr, &status, 0) != 0 || status != node) {
      std::fprintf(stderr, "rank %d: a FIFO page is on node %d, not %d\n", rank, status, node);
      ++bad;
    }
  }
  braidCommDestroy(comm);
  return bad ? 1 : 0;
}

TEST(NumaPlacement, InboundFifosLieOnTheReceiversNode) {
  auto results = test::runProcesses(2, "segment-numa");
  if (results[0].status == 77 && results[1].status == 77)
    GTEST_SKIP() << "this machine refuses get_mempolicy or mbind:\n" << results[0].output;
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(test::shmLeftovers(results).empty());
}

// Only rank 0 sets BRAID_RING: every rank follows it (rank 0's applies, as with the other
// job-wide settings), instead of rings that differ and wait on each other forever.
int ringFromRankZero(int rank, int) {
  if (rank == 0) setenv("BRAID_RING", "0 2 1 3", 1);
  braidComm_t comm = nullptr;
  if (braidCommInitFromEnv(&comm) != braidSuccess) {
    std::fprintf(stderr, "init: %s\n", braidGetLastError(nullptr));
    return 1;
  }
  const bool ok = comm->ring == std::vector<int>{0, 2, 1, 3};
  std::vector<float> v(1000, 1.0f);
  braidCommSetAlgorithm(comm, "allreduce", "ring");
  const bool ran = braidAllReduce(v.data(), v.data(), v.size(), braidFloat32, braidSum, comm,
                                  nullptr) == braidSuccess &&
                   v[999] == 4.0f;
  braidCommDestroy(comm);
  if (!ok) std::fprintf(stderr, "rank %d: ring is not rank 0's\n", rank);
  return ok && ran ? 0 : 1;
}

TEST(CommRing, RankZerosRingApplies) {
  auto results = test::runProcesses(4, "ring-from-rank-0");
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
}

// Rank 0's tuning file that it cannot use fails every rank, with its message, instead of
// leaving the others waiting for a rank 0 that gave up.
int badTuneFile(int rank, int) {
  braidComm_t comm = nullptr;
  const braidResult_t rc = braidCommInitFromEnv(&comm);
  const std::string msg = braidGetLastError(nullptr);
  if (rc == braidSuccess) {
    braidCommDestroy(comm);
    std::fprintf(stderr, "rank %d: init succeeded with a bad BRAID_TUNE_FILE\n", rank);
    return 1;
  }
  if (msg.find("BRAID_TUNE_FILE=\"/dev/zero\"") == std::string::npos ||
      msg.find("not a calibration file") == std::string::npos) {
    std::fprintf(stderr, "rank %d: unexpected message: %s\n", rank, msg.c_str());
    return 1;
  }
  return 0;
}

TEST(CommRing, RankZerosBadTuningFileFailsEveryRank) {
  auto results = test::runProcesses(3, "bad-tune-file", {"BRAID_TUNE_FILE=/dev/zero"});
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(test::shmLeftovers(results).empty());
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::test::registerRawChildRole("interleaved", braid::interleavedChild);
  braid::test::registerRawChildRole("ring-from-rank-0", braid::ringFromRankZero);
  braid::test::registerRawChildRole("bad-tune-file", braid::badTuneFile);
  braid::test::registerRawChildRole("segment-numa", braid::segmentNumaChild);
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
