// Misuse is named on every rank, and never gives a wrong answer (issue 38). One rank's call
// differs from its peers' (count 0, another count, datatype, op or root, a skipped call, the
// same on a split communicator): no rank may return success with data that differs from the
// single-rank reference, and every rank must fail. Ranks as threads and as processes; the
// meson file runs the binary over shm and again over tcp, and each case runs under every
// all-reduce algorithm (the schedule decides which ranks meet the odd one first).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr int kOdd = 1;  // the rank whose call differs

// What one rank's two calls returned: call A (where the odd rank differs), then call B.
struct Outcome {
  braidResult_t first = braidSuccess, second = braidSuccess;
  long long a = 0, b = 0;  // the first element of each call's result
  bool aChecked = false;   // a holds a result that has a reference (not a non-root's)
  std::string error;       // the first failed call's text
};

// algo: the odd rank set another algorithm (braidCommSetAlgorithm) than its peers. (A call
// refused on one rank before it starts is not a case: as in NCCL it did not happen, and the
// rank's next call, a retry or not, pairs with its peers' call; diagnosis_test pins that.)
const char* const kCases[] = {"count0", "count", "dtype", "op",  "root",
                              "skip",   "split", "same0", "algo"};

long long triangle(int n) { return static_cast<long long>(n) * (n + 1) / 2; }

// All-reduces of x = (rank + 1) * k, k = 1 for call A and 10 for call B, so that a call
// paired with its peers' other call has a sum unlike either reference.
Outcome playOn(braidComm_t comm, const std::string& kind, const std::string& algo) {
  int rank = 0, n = 0;
  braidCommUserRank(comm, &rank);
  braidCommCount(comm, &n);
  Outcome o;
  const bool odd = rank == kOdd;
  std::string mine = algo;
  if (kind == "algo") {  // the peers' algorithm (the first where none is given), and the next
    const char* list[32];
    int count = 0;
    braidListAlgorithms("allreduce", list, 32, &count);
    int at = 0;
    while (at < count && algo != list[at]) ++at;
    at %= count;
    mine = list[odd ? (at + 1) % count : at];
  }
  if (!mine.empty()) braidCommSetAlgorithm(comm, "allreduce", mine.c_str());
  auto note = [&](braidResult_t r) {
    if (r != braidSuccess && o.error.empty()) o.error = braidGetLastError(comm);
    return r;
  };
  // Call A.
  int64_t send[2] = {rank + 1, rank + 1}, recv[2] = {0, 0};
  if (kind == "skip" && odd) {
    o.first = braidSuccess;  // skipped: only B
  } else if (kind == "root") {
    o.first = note(braidReduce(send, recv, 1, braidInt64, braidSum, odd ? 1 : 0, comm, nullptr));
    o.aChecked = rank == 0;
  } else if (kind == "dtype" && odd) {
    double s[1] = {static_cast<double>(rank + 1)}, r[1] = {0};
    o.first = note(braidAllReduce(s, r, 1, braidFloat64, braidSum, comm, nullptr));
    std::memcpy(&recv[0], r, sizeof r);
    o.a = static_cast<long long>(r[0]);
    o.aChecked = true;
  } else {
    size_t count = 1;
    if ((kind == "count0" && odd) || kind == "same0") count = 0;
    if (kind == "count" && odd) count = 2;
    const braidRedOp_t op = kind == "op" && odd ? braidMax : braidSum;
    o.first = note(braidAllReduce(send, recv, count, braidInt64, op, comm, nullptr));
    o.aChecked = count > 0;
  }
  if (!(kind == "dtype" && odd)) o.a = recv[0];
  if (kind == "skip" && odd) o.aChecked = false;
  // Call B, of A's shape (so that a count-0 no-op would pair A with B unseen); where a rank
  // skips A, of count 2: it then meets its peers' A with a call of another shape. (Two calls
  // of one shape are alike to any library: skipping one of them cannot be detected.)
  const size_t countB = kind == "skip" ? 2 : 1;
  int64_t send2[2] = {10 * (rank + 1), 10 * (rank + 1)}, recv2[2] = {0, 0};
  o.second = note(braidAllReduce(send2, recv2, countB, braidInt64, braidSum, comm, nullptr));
  o.b = countB == 1 || recv2[0] == recv2[1] ? recv2[0] : -1;
  return o;
}

Outcome play(braidComm_t comm, const std::string& kind, const std::string& algo) {
  if (kind != "split") return playOn(comm, kind, algo);
  // One colour, keys reversed: the split communicator numbers the ranks backwards.
  int rank = 0, n = 0;
  braidCommUserRank(comm, &rank);
  braidCommCount(comm, &n);
  braidComm_t sub = nullptr;
  if (braidCommSplit(comm, 0, n - rank, &sub, nullptr) != braidSuccess) {
    Outcome o;
    o.first = o.second = braidInternalError;
    o.error = std::string("split failed: ") + braidGetLastError(comm);
    return o;
  }
  Outcome o = playOn(sub, "count", algo);
  braidCommDestroy(sub);
  return o;
}

// The cause in a rank's error: its text without the leading "rank N: " and before " [", where
// the rank's own part of the story starts (which rank found it, how its own call ended).
std::string causeOf(const std::string& error) {
  std::string e = error;
  if (e.rfind("rank ", 0) == 0 && e.find(": ") != std::string::npos) e = e.substr(e.find(": ") + 2);
  return e.substr(0, e.find(" ["));
}

// "" when the outcomes keep the promise: no success with wrong data, every rank fails where
// a rank's call differs, every rank's error gives the same cause, naming the odd rank and the
// calls, and every rank succeeds where none differs.
std::string judge(const std::vector<Outcome>& outs, const std::string& kind) {
  const int n = static_cast<int>(outs.size());
  std::string bad;
  std::string cause;  // the first failed rank's
  for (int r = 0; r < n; ++r) {
    const Outcome& o = outs[r];
    const std::string who = "rank " + std::to_string(r) + " (" + kind + "): ";
    if (o.first == braidSuccess && o.aChecked && o.a != triangle(n))
      bad += who + "call A returned success with " + std::to_string(o.a) + ", not " +
             std::to_string(triangle(n)) + "\n";
    if (o.second == braidSuccess && o.b != 10 * triangle(n))
      bad += who + "call B returned success with " + std::to_string(o.b) + ", not " +
             std::to_string(10 * triangle(n)) + "\n";
    const bool failed = o.first != braidSuccess || o.second != braidSuccess;
    if (kind == "same0" && failed) bad += who + "failed: " + o.error + "\n";
    if (kind != "same0" && !failed) bad += who + "every call succeeded\n";
    if (!failed || kind == "same0") continue;
    // Every rank learns the same cause, whichever rank found it: the calls made at that
    // collective number, the odd rank's among them.
    const std::string mine = causeOf(o.error);
    if (mine.find("misuse on communicator") == std::string::npos ||
        mine.find("rank " + std::to_string(kOdd)) == std::string::npos ||
        mine.find(" called ") == std::string::npos)
      bad += who + "its error does not give the cause naming rank " + std::to_string(kOdd) +
             " and the calls: " + o.error + "\n";
    else if (cause.empty())
      cause = mine;
    else if (mine != cause)
      bad += who + "its cause differs from another rank's:\n  " + mine + "\n  " + cause + "\n";
  }
  return bad;
}

const std::vector<std::string>& algorithms() {
  static const std::vector<std::string> names = [] {
    const char* list[32];
    int count = 0;
    braidListAlgorithms("allreduce", list, 32, &count);
    std::vector<std::string> v;
    for (int k = 0; k < count && k < 32; ++k) v.push_back(list[k]);
    return v;
  }();
  return names;
}

class MisuseThreads : public testing::TestWithParam<int> {};

TEST_P(MisuseThreads, NoWrongAnswerAndEveryRankFails) {
  const int n = GetParam();
  for (const std::string& algo : algorithms()) {
    for (const char* kind : kCases) {
      // Reduce's root does not depend on the all-reduce algorithm: once.
      if (std::string(kind) == "root" && algo != algorithms().front()) continue;
      std::vector<Outcome> outs(n);
      const auto errors = runThreads(n, [&](braidComm_t comm, int rank) -> std::string {
        outs[rank] = play(comm, kind, algo);
        return "";
      });
      for (const auto& e : errors) ADD_FAILURE() << algo << " " << kind << ": " << e;
      const std::string bad = judge(outs, kind);
      EXPECT_EQ(bad, "") << "algorithm " << algo;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(NRanks, MisuseThreads, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

// The child prints its outcome on one line: OUTCOME first second a aChecked b | error.
int childPlay(braidComm_t comm, int, int) {
  const char* kind = std::getenv("MISUSE_CASE");
  const char* algo = std::getenv("MISUSE_ALGO");
  const Outcome o = play(comm, kind ? kind : "count0", algo ? algo : "");
  std::string error = o.error;
  for (char& c : error)
    if (c == '\n') c = ' ';
  std::printf("\nOUTCOME %d %d %lld %d %lld | %s\n", static_cast<int>(o.first),
              static_cast<int>(o.second), o.a, o.aChecked ? 1 : 0, o.b, error.c_str());
  std::fflush(stdout);
  return 0;
}

Outcome parse(const ChildResult& child) {
  Outcome o;
  const size_t at = child.output.find("\nOUTCOME ");
  if (at == std::string::npos) {
    o.first = o.second = braidInternalError;
    o.error = "no outcome: " + child.output;
    return o;
  }
  int first = 0, second = 0, checked = 0;
  std::sscanf(child.output.c_str() + at, "\nOUTCOME %d %d %lld %d %lld", &first, &second, &o.a,
              &checked, &o.b);
  o.first = static_cast<braidResult_t>(first);
  o.second = static_cast<braidResult_t>(second);
  o.aChecked = checked != 0;
  const size_t bar = child.output.find(" | ", at);
  const size_t end = child.output.find('\n', bar == std::string::npos ? at : bar);
  if (bar != std::string::npos) o.error = child.output.substr(bar + 3, end - bar - 3);
  return o;
}

class MisuseProcesses : public testing::TestWithParam<int> {};

TEST_P(MisuseProcesses, NoWrongAnswerAndEveryRankFails) {
  const int n = GetParam();
  for (const std::string& algo : {std::string("ring"), std::string("")}) {
    for (const char* kind : kCases) {
      const auto children =
          runProcesses(n, "play", {std::string("MISUSE_CASE=") + kind, "MISUSE_ALGO=" + algo});
      std::vector<Outcome> outs;
      for (const ChildResult& c : children) outs.push_back(parse(c));
      EXPECT_EQ(failedChildren(children), "") << algo << " " << kind;
      EXPECT_EQ(judge(outs, kind), "") << "algorithm " << (algo.empty() ? "default" : algo);
    }
  }
}
INSTANTIATE_TEST_SUITE_P(NRanks, MisuseProcesses, testing::Values(2, 3),
                         [](const testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

// A socket interface that does not exist, set by NCCL's name: init fails on every rank (the
// control plane listens on it whatever transport the job uses), naming the variable as set.
TEST(MisuseSettings, MissingSocketInterfaceNamedAsSet) {
  const auto children =
      runProcesses(2, "play", {"NCCL_SOCKET_IFNAME=nosuch0", "MISUSE_CASE=same0"});
  for (size_t r = 0; r < children.size(); ++r) {
    EXPECT_NE(children[r].status, 0) << "rank " << r << ": init succeeded";
    EXPECT_NE(children[r].output.find("NCCL_SOCKET_IFNAME=\"nosuch0\""), std::string::npos)
        << "rank " << r << ": " << children[r].output;
    EXPECT_EQ(children[r].output.find("BRAID_SOCKET_IFNAME"), std::string::npos)
        << "rank " << r << ": " << children[r].output;
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  setenv("BRAID_TIMEOUT", "4", 0);
  braid::test::registerChildRole("play", braid::test::childPlay);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
