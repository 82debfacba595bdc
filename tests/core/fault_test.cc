// Surviving a lost rank (braid_fault.h): braidCommRevoke ends waiting and later calls on every
// rank; braidCommShrink forms the survivors' communicator, with or without an exclude list,
// also after a rank's communicator is gone or its process killed (kill -9 at a random point
// of a random collective, over many seeds), and a second death during the shrink; every
// survivor agrees on the same set, and collectives on the new communicator are exact;
// braidCommGrow joins new ranks through the id braidCommGetUniqueId makes. Ranks as threads
// and as processes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "core/comm.h"
#include "test_scale.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr double kTimeoutSec = 4;  // every communicator's bound here (BRAID_TIMEOUT, main)

std::string err(const char* what, braidResult_t r, braidComm_t comm) {
  return std::string(what) + ": " + braidGetErrorString(r) + ": " + braidGetLastError(comm);
}

// An all-reduce of `count` floats where rank r gives (tag + r + 1) * (i % 7 + 1): exact in
// float for small counts; "" when every element is the closed form over `contributors`.
std::string exactAllReduce(braidComm_t comm, int rank, const std::vector<int>& contributors,
                           size_t count = 1024) {
  std::vector<float> buf(count);
  const int tag = contributors.empty() ? 0 : contributors[static_cast<size_t>(rank)];
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((tag + 1) * (i % 7 + 1));
  const braidResult_t r =
      braidAllReduce(buf.data(), buf.data(), count, braidFloat32, braidSum, comm, nullptr);
  if (r != braidSuccess) return err("all-reduce", r, comm);
  double sum = 0;
  for (int t : contributors) sum += t + 1;
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != static_cast<float>(sum * (i % 7 + 1)))
      return "all-reduce: element " + std::to_string(i) + " is " + std::to_string(buf[i]) +
             ", expected " + std::to_string(sum * (i % 7 + 1));
  return "";
}

std::vector<int> parentRanks(braidComm_t comm) {
  int n = 0;
  braidCommCount(comm, &n);
  std::vector<int> p(static_cast<size_t>(n), -2);
  if (braidCommParentRanks(comm, p.data()) != braidSuccess) return {};
  return p;
}

// Runs fn(comm, rank) on nranks threads, each with its own communicator (timeout kTimeoutSec),
// which fn owns (destroys or aborts). Returns the ranks' failures, "rank R: ...".
std::vector<std::string> onThreads(int nranks,
                                   const std::function<std::string(braidComm_t, int)>& fn) {
  braidUniqueId id;
  if (braidGetUniqueId(&id) != braidSuccess) return {"braidGetUniqueId failed"};
  std::vector<std::string> out(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      braidConfig_t cfg = BRAID_CONFIG_INITIALIZER;
      cfg.timeoutSec = kTimeoutSec;
      braidComm_t comm = nullptr;
      const braidResult_t res = braidCommInitRankConfig(&comm, nranks, id, r, &cfg);
      out[r] = res != braidSuccess ? err("init", res, nullptr) : fn(comm, r);
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> errors;
  for (int r = 0; r < nranks; ++r)
    if (!out[r].empty()) errors.push_back("rank " + std::to_string(r) + ": " + out[r]);
  return errors;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& e : v) s += e + "\n";
  return s;
}

TEST(Revoke, EndsWaitingAndLaterCallsOnEveryRank) {
  // Ranks 1..3 wait in an all-reduce that rank 0 never joins; rank 0 revokes. Each waiting
  // call ends with braidInvalidUsage naming rank 0 (not the timeout), every later call too.
  const auto errors = onThreads(4, [](braidComm_t comm, int rank) -> std::string {
    std::string out;
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (braidResult_t r = braidCommRevoke(comm, BRAID_REVOKE_DEFAULT))
        out = err("revoke", r, comm);
      if (braidCommRevoke(comm, 0) != braidSuccess) out = "a second revoke failed";
    } else {
      float x = 1;
      const braidResult_t r = braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr);
      const std::string msg = braidGetLastError(comm);
      if (r != braidInvalidUsage || msg.find("revoked") == std::string::npos ||
          msg.find("rank 0") == std::string::npos)
        out = "the waiting all-reduce ended with " + err("", r, comm);
    }
    int revoked = 0, by = -2;
    for (int i = 0; i < 2000 && !revoked; ++i) {  // the message may still be on its way
      braidCommIsRevoked(comm, &revoked, &by);
      if (!revoked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!revoked || by != 0)
      out += " braidCommIsRevoked says " + std::to_string(revoked) + " by " + std::to_string(by);
    float y = 1;
    if (braidAllReduce(&y, &y, 1, braidFloat32, braidSum, comm, nullptr) != braidInvalidUsage)
      out += " a later call was not refused";
    braidCommDestroy(comm);
    return out;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

// Strangers that connect to a rank's control port and send nothing hold up no revocation:
// it arrives while their connections are still open (the control thread waits for their
// headers side by side, and gives up on them after 2 s).
TEST(Revoke, ArrivesPastSilentStrangers) {
  std::vector<braidComm_t> comms(2);
  ASSERT_EQ(braidCommInitAll(comms.data(), 2, nullptr), braidSuccess);
  sockaddr_in sa{};
  const std::string addr = comms[1]->control->address();
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::atoi(addr.c_str() + addr.rfind(':') + 1)));
  ASSERT_EQ(inet_pton(AF_INET, addr.substr(0, addr.rfind(':')).c_str(), &sa.sin_addr), 1);
  std::vector<int> strangers;
  for (int i = 0; i < 5; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    strangers.push_back(fd);
  }
  ASSERT_EQ(braidCommRevoke(comms[0], 0), braidSuccess);
  int revoked = 0;
  bool closed = false;
  while (!revoked && !closed) {
    braidCommIsRevoked(comms[1], &revoked, nullptr);
    for (int fd : strangers) {
      char c;
      closed |= recv(fd, &c, 1, MSG_DONTWAIT) == 0;  // the control thread gave up on it
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(revoked) << "the revocation waited for the strangers to time out";
  for (int fd : strangers) close(fd);
  for (braidComm_t c : comms) braidCommDestroy(c);
}

TEST(Revoke, RefusesBadArguments) {
  const auto errors = onThreads(2, [](braidComm_t comm, int) -> std::string {
    std::string out;
    if (braidCommRevoke(comm, 1) != braidInvalidArgument) out += "flag 1 accepted; ";
    if (braidCommRevoke(nullptr, 0) != braidInvalidArgument) out += "NULL comm accepted; ";
    if (braidCommIsRevoked(comm, nullptr, nullptr) != braidInvalidArgument)
      out += "NULL revoked accepted; ";
    int revoked = 1;
    if (braidCommIsRevoked(comm, &revoked, nullptr) != braidSuccess || revoked)
      out += "a fresh communicator reads as revoked; ";
    braidCommDestroy(comm);
    return out;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(Shrink, ExcludesListedRanksAndRenumbers) {
  // Rank 2 is excluded and does not call shrink (NCCL's usage); it stays alive meanwhile.
  const auto errors = onThreads(4, [](braidComm_t comm, int rank) -> std::string {
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      braidCommDestroy(comm);
      return "";
    }
    const int ex[] = {2};
    braidComm_t nc = nullptr;
    const braidResult_t r = braidCommShrink(comm, ex, 1, &nc, nullptr, BRAID_SHRINK_DEFAULT);
    if (r != braidSuccess || !nc) return err("shrink", r, comm);
    std::string out;
    const std::vector<int> want{0, 1, 3};
    if (parentRanks(nc) != want) out += "parent ranks are not 0,1,3; ";
    int newRank = -1;
    braidCommUserRank(nc, &newRank);
    if (newRank != (rank == 3 ? 2 : rank)) out += "rank " + std::to_string(newRank) + "; ";
    out += exactAllReduce(nc, newRank, want);
    // The parent is untouched by a default shrink: still good without rank 2? No: it has 4
    // ranks and rank 2 left, so it is only destroyed.
    braidCommDestroy(nc);
    braidCommDestroy(comm);
    return out;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(Shrink, FindsAGoneRankWithoutAListAndEndsStuckCalls) {
  // Rank 3's communicator is aborted (its control plane gone, as a dead process's) while the
  // others are inside an all-reduce; each survivor shrinks with BRAID_SHRINK_ABORT and no list.
  const auto errors = onThreads(4, [](braidComm_t comm, int rank) -> std::string {
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      braidCommAbort(comm);
      return "";
    }
    std::vector<float> big(1 << 16, 1.0f);
    braidAllReduce(big.data(), big.data(), big.size(), braidFloat32, braidSum, comm, nullptr);
    braidComm_t nc = nullptr;
    const braidResult_t r = braidCommShrink(comm, nullptr, 0, &nc, nullptr, BRAID_SHRINK_ABORT);
    if (r != braidSuccess || !nc) return err("shrink", r, comm);
    std::string out;
    const std::vector<int> want{0, 1, 2};
    if (parentRanks(nc) != want) out += "parent ranks are not 0,1,2; ";
    out += exactAllReduce(nc, rank, want);
    braidCommDestroy(nc);
    braidCommDestroy(comm);
    return out;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

// Ranks whose excludeRanks differ while the rank in question lives (NCCL's contract says an
// excluded rank does not call shrink): never two communicators. Rank 2 excludes the live rank
// 0, which coordinates: rank 1 (waiting on 0) redirects rank 2 there and all three agree.
TEST(Shrink, DifferentListsEndInOneCommunicatorOrNone) {
  auto run = [](const std::vector<std::vector<int>>& lists) {
    std::vector<std::string> parents(lists.size());
    std::vector<braidResult_t> res(lists.size());
    // Every rank keeps comm until all have returned from shrink: a rank that destroyed it has
    // left, and a coordinator still waiting for it would rightly leave it out (under a slow
    // sanitizer the verdicts' order varies).
    std::barrier allReturned(static_cast<std::ptrdiff_t>(lists.size()));
    const auto errors =
        onThreads(static_cast<int>(lists.size()), [&](braidComm_t comm, int rank) -> std::string {
          braidComm_t nc = nullptr;
          const std::vector<int>& l = lists[static_cast<size_t>(rank)];
          res[rank] = braidCommShrink(comm, l.data(), static_cast<int>(l.size()), &nc, nullptr, 0);
          allReturned.arrive_and_wait();
          if (nc) {
            for (int p : parentRanks(nc)) parents[rank] += std::to_string(p) + ",";
            braidCommDestroy(nc);
          }
          braidCommDestroy(comm);
          return "";
        });
    std::string out;
    for (size_t r = 0; r < lists.size(); ++r)
      out += std::to_string(res[r]) + ":" + parents[r] + " ";
    return out;
  };
  EXPECT_EQ(run({{}, {}, {0}}), "0:0,1,2, 0:0,1,2, 0:0,1,2, ");
  // Rank 1 excludes the live rank 0 and waits as a coordinator; rank 0 coordinates ranks 0
  // and 2: neither agreement completes, and every rank fails (invalid usage, 5), none with a
  // communicator.
  EXPECT_EQ(run({{}, {0}, {}}), "5: 5: 5: ");
}

TEST(Shrink, RefusesBadArguments) {
  const auto errors = onThreads(2, [](braidComm_t comm, int rank) -> std::string {
    std::string out;
    braidComm_t nc = nullptr;
    const int self[] = {rank}, outOfRange[] = {2}, negative[] = {-1};
    if (braidCommShrink(comm, self, 1, &nc, nullptr, 0) != braidInvalidArgument)
      out += "excluding itself accepted; ";
    if (braidCommShrink(comm, outOfRange, 1, &nc, nullptr, 0) != braidInvalidArgument)
      out += "rank 2 of 2 accepted; ";
    if (braidCommShrink(comm, negative, 1, &nc, nullptr, 0) != braidInvalidArgument)
      out += "rank -1 accepted; ";
    if (braidCommShrink(comm, nullptr, 1, &nc, nullptr, 0) != braidInvalidArgument)
      out += "NULL list of 1 accepted; ";
    if (braidCommShrink(comm, nullptr, -1, &nc, nullptr, 0) != braidInvalidArgument)
      out += "count -1 accepted; ";
    if (braidCommShrink(comm, nullptr, 0, nullptr, nullptr, 0) != braidInvalidArgument)
      out += "NULL newcomm accepted; ";
    if (braidCommShrink(comm, nullptr, 0, &nc, nullptr, 2) != braidInvalidArgument)
      out += "flag 2 accepted; ";
    braidConfig_t bad = BRAID_CONFIG_INITIALIZER;
    bad.magic = 0;
    if (braidCommShrink(comm, nullptr, 0, &nc, &bad, 0) != braidInvalidArgument)
      out += "a bad config accepted; ";
    if (std::string(braidGetLastError(nullptr)).find("config") == std::string::npos)
      out += "the message does not name the config; ";
    // Nothing was done: the communicator still works.
    out += exactAllReduce(comm, rank, {0, 1});
    braidCommDestroy(comm);
    return out;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

// Grows an nOld-rank communicator by nNew threads; the grown one runs an exact all-reduce.
std::string growBy(std::vector<braidComm_t> comms, int nNew) {
  const int nOld = static_cast<int>(comms.size()), n = nOld + nNew;
  braidUniqueId id;
  if (braidResult_t r = braidCommGetUniqueId(comms[0], &id)) return err("getUniqueId", r, comms[0]);
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      braidComm_t grown = nullptr;
      const braidResult_t res =
          r < nOld ? braidCommGrow(comms[r], n, r == 0 ? &id : nullptr, -1, &grown, nullptr)
                   : braidCommGrow(nullptr, n, &id, r, &grown, nullptr);
      if (res != braidSuccess) {
        out[r] = err("grow", res, nullptr);
        return;
      }
      std::vector<int> want(static_cast<size_t>(n), -1);
      std::iota(want.begin(), want.begin() + nOld, 0);
      if (parentRanks(grown) != want) out[r] = "parent ranks are wrong; ";
      std::vector<int> tags(static_cast<size_t>(n));
      std::iota(tags.begin(), tags.end(), 0);
      out[r] += exactAllReduce(grown, r, tags);
      braidCommDestroy(grown);
    });
  for (auto& t : threads) t.join();
  std::string all;
  for (int r = 0; r < n; ++r)
    if (!out[r].empty()) all += "rank " + std::to_string(r) + ": " + out[r] + "\n";
  return all;
}

TEST(Grow, JoinsNewRanksAfterTheOldOnes) {
  std::vector<braidComm_t> comms(2);
  ASSERT_EQ(braidCommInitAll(comms.data(), 2, nullptr), braidSuccess);
  EXPECT_EQ(growBy(comms, 2), "");
  // The old communicator stays usable.
  const auto errors = std::vector<std::string>{};
  std::vector<std::thread> t;
  std::vector<std::string> out(2);
  for (int r = 0; r < 2; ++r)
    t.emplace_back([&, r] { out[r] = exactAllReduce(comms[r], r, {0, 1}); });
  for (auto& th : t) th.join();
  EXPECT_EQ(out[0] + out[1], "");
  for (braidComm_t c : comms) braidCommDestroy(c);
}

TEST(Grow, AfterShrink) {
  // 3 ranks, rank 1 leaves; the two survivors shrink, then grow back to 3 with a newcomer.
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  std::vector<braidComm_t> shrunk(3, nullptr);
  std::vector<std::string> out(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      braidComm_t comm = nullptr;
      if (braidCommInitRank(&comm, 3, id, r) != braidSuccess) {
        out[r] = "init failed";
        return;
      }
      if (r == 1) {
        braidCommDestroy(comm);
        return;
      }
      const int ex[] = {1};
      if (braidResult_t res = braidCommShrink(comm, ex, 1, &shrunk[r], nullptr, 0))
        out[r] = err("shrink", res, comm);
      braidCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(out[0] + out[2], "");
  EXPECT_EQ(growBy({shrunk[0], shrunk[2]}, 1), "");
  braidCommDestroy(shrunk[0]);
  braidCommDestroy(shrunk[2]);
}

TEST(Grow, RefusesBadArguments) {
  std::vector<braidComm_t> comms(2);
  ASSERT_EQ(braidCommInitAll(comms.data(), 2, nullptr), braidSuccess);
  braidUniqueId id;
  ASSERT_EQ(braidCommGetUniqueId(comms[0], &id), braidSuccess);
  braidComm_t g = nullptr;
  EXPECT_EQ(braidCommGetUniqueId(comms[0], nullptr), braidInvalidArgument);
  EXPECT_EQ(braidCommGrow(nullptr, 3, nullptr, 2, &g, nullptr), braidInvalidArgument);
  EXPECT_EQ(braidCommGrow(nullptr, 3, &id, 3, &g, nullptr), braidInvalidArgument);
  EXPECT_EQ(braidCommGrow(comms[0], 1, &id, -1, &g, nullptr), braidInvalidArgument);
  EXPECT_EQ(braidCommGrow(comms[0], 3, &id, 0, &g, nullptr), braidInvalidArgument);
  EXPECT_EQ(braidCommGrow(comms[0], 3, &id, -1, nullptr, nullptr), braidInvalidArgument);
  // Both ranks pass an id: every rank of comm refuses, naming the count.
  std::vector<braidResult_t> res(2);
  std::vector<braidComm_t> outs(2);
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r)
    t.emplace_back([&, r] { res[r] = braidCommGrow(comms[r], 2, &id, -1, &outs[r], nullptr); });
  for (auto& th : t) th.join();
  EXPECT_EQ(res[0], braidInvalidUsage);
  EXPECT_EQ(res[1], braidInvalidUsage);
  for (braidComm_t c : comms) braidCommDestroy(c);
}

// ---- processes: kill -9 at a random point, the survivors carry on ----

// The survivors' loop, as an elastic job runs it: a call on the current communicator; when it
// fails, shrink with BRAID_SHRINK_ABORT and no list (the dead are found), and go on with the
// new one. BRAID_TEST_SEED picks the victim, the collective and the moment; BRAID_TEST_SECOND
// (a rank, optional) dies too, inside its shrink. Prints "FINAL <original ranks>" and
// "RECOVERY <s>".
int survivorChild(int rank, int nranks) {
  const unsigned seed = static_cast<unsigned>(std::atoi(std::getenv("BRAID_TEST_SEED")));
  std::mt19937 rng(seed);
  const int victim = static_cast<int>(rng() % static_cast<unsigned>(nranks));
  const int calls = static_cast<int>(rng() % 4);  // calls before the death
  const bool inside = rng() % 2;                  // during the next call, or between
  const int delayUs = static_cast<int>(rng() % 3000);
  const int coll = static_cast<int>(rng() % 4);
  const char* second = std::getenv("BRAID_TEST_SECOND");
  const int secondRank = second ? std::atoi(second) : -1;
  // BRAID_TEST_CUT (an emulated cluster of 2 hosts): nobody dies; the first rank of the second
  // host takes its host's link down after its first call, cutting that host off.
  const bool cut = std::getenv("BRAID_TEST_CUT") != nullptr;
  braidUniqueId id;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess) return 2;
  braidComm_t comm = nullptr;
  if (braidCommInitRank(&comm, nranks, id, rank) != braidSuccess) return 3;
  std::vector<int> orig(static_cast<size_t>(nranks));
  std::iota(orig.begin(), orig.end(), 0);
  int me = rank;
  std::vector<float> buf(size_t{1} << 16), out(buf.size());
  auto call = [&](int k) -> braidResult_t {
    std::fill(buf.begin(), buf.end(), 1.0f);
    const size_t n = buf.size() / orig.size();
    const braidDataType_t f = braidFloat32;
    switch ((coll + k) % 4) {
      case 0:
        return braidAllReduce(buf.data(), out.data(), buf.size(), f, braidSum, comm, nullptr);
      case 1:
        return braidBroadcast(buf.data(), out.data(), buf.size(), f, 0, comm, nullptr);
      case 2:
        return braidAllGather(buf.data(), out.data(), n, f, comm, nullptr);
      default:
        return braidReduceScatter(buf.data(), out.data(), n, f, braidSum, comm, nullptr);
    }
  };
  double recovery = 0;
  std::chrono::steady_clock::time_point failedAt{};
  bool failed = false;
  for (int k = 0, round = 0; k < 40 && round <= 3; ++k) {
    if (cut && rank == nranks / 2 && k == 1 && std::system("ip link set eth0 down") != 0)
      std::printf("could not take eth0 down\n");
    if (!cut && rank == victim && k == calls) {
      if (!inside) raise(SIGKILL);
      std::thread([delayUs] {
        std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
        raise(SIGKILL);
      }).detach();
    }
    const braidResult_t r = call(k);
    if (r == braidSuccess) {
      if (failed) {
        recovery =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - failedAt).count();
        failed = false;
      }
      if (k >= calls + 2 && recovery > 0) break;
      continue;
    }
    if (!failed) failedAt = std::chrono::steady_clock::now();
    failed = true;
    ++round;
    // The second rank dies 5 ms into its peers' shrink, before it joins it: from a thread of
    // its own it could outlive a quick shrink and die in a later call instead.
    if (rank == secondRank && round == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      raise(SIGKILL);
    }
    braidComm_t nc = nullptr;
    const braidResult_t s = braidCommShrink(comm, nullptr, 0, &nc, nullptr, BRAID_SHRINK_ABORT);
    if (s != braidSuccess || !nc) {
      std::printf("shrink: %s: %s\n", braidGetErrorString(s), braidGetLastError(comm));
      return 4;
    }
    const std::vector<int> parents = parentRanks(nc);
    std::vector<int> next;
    for (int p : parents) next.push_back(orig[static_cast<size_t>(p)]);
    orig = next;
    braidCommUserRank(nc, &me);
    braidCommDestroy(comm);
    comm = nc;
    // Survivors may have finished different numbers of calls (one's call completed before the
    // death, another's did not): they go on from the furthest, so their calls match again.
    int32_t furthest = k;
    if (braidAllReduce(&furthest, &furthest, 1, braidInt32, braidMax, comm, nullptr) == 0)
      k = furthest;
  }
  std::string survivors;
  for (int o : orig) survivors += std::to_string(o) + ",";
  // The new communicator gives exact results.
  const std::string exact = exactAllReduce(comm, me, orig);
  std::printf("FINAL %s\nRECOVERY %.4f\n%s\n", survivors.c_str(), recovery, exact.c_str());
  braidCommDestroy(comm);
  return exact.empty() && recovery > 0 ? 0 : 5;
}

// Runs one seed on nranks processes; "" when every survivor agrees on the same set, which
// lacks exactly the dead, and exits 0.
std::string runSeed(int nranks, unsigned seed, int second, std::vector<double>* recoveries) {
  std::vector<std::string> env{"BRAID_TEST_SEED=" + std::to_string(seed)};
  if (second >= 0) env.push_back("BRAID_TEST_SECOND=" + std::to_string(second));
  const auto results = runProcesses(nranks, "survive", env);
  std::mt19937 rng(seed);
  const int victim = static_cast<int>(rng() % static_cast<unsigned>(nranks));
  std::string finals, bad;
  for (int r = 0; r < nranks; ++r) {
    const bool dies = r == victim || r == second;
    if (dies) {
      if (results[r].status != 128 + SIGKILL && r == victim)
        bad += "rank " + std::to_string(r) + " was to die, status " +
               std::to_string(results[r].status) + ":\n" + results[r].output;
      continue;
    }
    if (results[r].status != 0) {
      bad += "rank " + std::to_string(r) + " status " + std::to_string(results[r].status) + ":\n" +
             results[r].output;
      continue;
    }
    const std::string& o = results[r].output;
    const size_t at = o.find("FINAL ");
    const std::string fin = o.substr(at + 6, o.find('\n', at) - at - 6);
    if (finals.empty()) finals = fin;
    if (fin != finals) bad += "survivors disagree: " + finals + " vs " + fin + "\n";
    const size_t rec = o.find("RECOVERY ");
    if (recoveries && rec != std::string::npos)
      recoveries->push_back(std::atof(o.c_str() + rec + 9));
  }
  std::string want;
  for (int r = 0; r < nranks; ++r)
    if (r != victim && r != second) want += std::to_string(r) + ",";
  if (bad.empty() && finals != want)
    bad += "the survivors are " + finals + ", expected " + want + "\n";
  for (const std::string& name : shmLeftovers(results)) bad += "left in /dev/shm: " + name + "\n";
  if (!bad.empty() && std::getenv("BRAID_TEST_VERBOSE"))
    for (int r = 0; r < nranks; ++r)
      bad += "--- rank " + std::to_string(r) + " (pid " + std::to_string(results[r].pid) + "):\n" +
             results[r].output;
  return bad.empty() ? "" : "seed " + std::to_string(seed) + ": " + bad;
}

int seedCount() {
  const char* v = std::getenv("BRAID_TEST_FAULT_SEEDS");
  return v ? std::max(1, std::atoi(v)) : (reducedSizes() ? 2 : 6);
}

class RandomKill : public ::testing::TestWithParam<int> {};

TEST_P(RandomKill, SurvivorsAgreeAndCarryOn) {
  const int nranks = GetParam();
  std::vector<double> rec;
  for (int s = 0; s < seedCount(); ++s) {
    const unsigned seed = static_cast<unsigned>(1000 * nranks + s);
    EXPECT_EQ(runSeed(nranks, seed, -1, &rec), "");
  }
  if (!rec.empty()) {
    std::sort(rec.begin(), rec.end());
    std::printf("RECOVERY ranks %d seeds %d survivors %zu median_s %.4f p90_s %.4f max_s %.4f\n",
                nranks, seedCount(), rec.size(), rec[rec.size() / 2], rec[rec.size() * 9 / 10],
                rec.back());
  }
}

// BRAID_TEST_FAULT_RANKS="4,8,16" (perf/recovery.sh) replaces the default rank counts.
std::vector<int> rankCounts() {
  if (const char* v = std::getenv("BRAID_TEST_FAULT_RANKS")) {
    std::vector<int> out;
    for (const char* p = v; *p;) {
      out.push_back(std::max(2, std::atoi(p)));
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
    return out;
  }
  return reducedSizes() ? std::vector<int>{2, 4} : std::vector<int>{2, 3, 4, 8};
}

INSTANTIATE_TEST_SUITE_P(Ranks, RandomKill, ::testing::ValuesIn(rankCounts()));

TEST(RandomKill, ASecondDeathDuringTheShrink) {
  for (unsigned seed : {7u, 8u}) {
    std::mt19937 rng(seed);
    const int victim = static_cast<int>(rng() % 5u);
    EXPECT_EQ(runSeed(5, seed, (victim + 2) % 5, nullptr), "");
  }
}

// A whole emulated host cut off (its link down) in a 2 x 2 cluster: nothing hangs; each side
// times the other out (BRAID_TIMEOUT, 4 s: a cut-off peer is neither alive nor refused) and
// its ranks agree on their own side, then carry on with exact results. Both sides go on
// (a split brain, as with any agreement without a quorum: docs/fault-tolerance.md).
TEST(HostCutOff, EachSideAgreesOnItselfAndCarriesOn) {
  const ClusterResult res =
      runInCluster(2, 2, "survive", {"BRAID_TEST_CUT=1", "BRAID_TEST_SEED=1"});
  if (!res.skipReason.empty()) GTEST_SKIP() << res.skipReason;
  const std::string want[4] = {"0,1,", "0,1,", "2,3,", "2,3,"};
  for (int r = 0; r < 4; ++r) {
    const std::string& out = res.ranks[r].output;
    EXPECT_EQ(res.ranks[r].status, 0) << "rank " << r << ":\n" << out;
    const size_t at = out.find("FINAL ");
    EXPECT_NE(at, std::string::npos) << out;
    if (at != std::string::npos)
      EXPECT_EQ(out.substr(at + 6, out.find('\n', at) - at - 6), want[r]) << "rank " << r << out;
  }
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_TRUE(clusterLeftovers().empty());
}

TEST(RandomKill, TheCoordinatorDiesDuringTheShrink) {
  // The lowest survivor coordinates the agreement (and starts the new bootstrap root): it
  // dies 5 ms into its shrink; the others turn to the next rank.
  for (unsigned seed : {11u, 12u}) {
    std::mt19937 rng(seed);
    const int victim = static_cast<int>(rng() % 5u);
    EXPECT_EQ(runSeed(5, seed, victim == 0 ? 1 : 0, nullptr), "");
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  setenv("BRAID_TIMEOUT", "4", 1);
  braid::test::registerRawChildRole("survive", braid::test::survivorChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
