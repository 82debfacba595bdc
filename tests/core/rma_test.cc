// One-sided calls (braid_rma.h): windows registered on every rank, braidPutSignal writing into
// a peer's window without a call there, braidSignal, braidWaitSignal consuming the signals;
// exact contents afterwards. Ranks as threads and as processes, calls on the caller's thread
// and on a stream; puts to this rank itself; every bad argument refused by name; a wait
// without its signal ends at the timeout.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr int kCount = 1000;  // int32 per put

std::string err(const char* what, braidComm_t comm) {
  return std::string(what) + ": " + braidGetLastError(comm);
}

// Rank r puts kCount int32 (r * 100000 + i) into the window of rank r + 1 at byte offset 64,
// signals it twice more (a put to itself, a bare signal), and waits for its left neighbour's;
// then checks its own window. stream: the calls go on a stream of its own.
std::string exchange(braidComm_t comm, int rank, bool onStream) {
  int n = 0;
  braidCommCount(comm, &n);
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  // Sizes differ per rank; each is large enough for the put into it.
  std::vector<int32_t> window(64 / 4 + kCount + 4 + 16 * rank, -1);
  braidWindow_t win = nullptr;
  if (braidCommWindowRegister(comm, window.data(), window.size() * 4, &win, BRAID_WIN_DEFAULT))
    return err("register", comm);
  void* user = nullptr;
  if (braidWinGetUserPtr(comm, win, &user) || user != window.data()) return "user pointer";
  braidStream_t s = nullptr;
  if (onStream && braidStreamCreate(&s)) return err("stream", nullptr);
  std::vector<int32_t> mine(kCount), self(4, 7 + rank);
  for (int i = 0; i < kCount; ++i) mine[i] = rank * 100000 + i;
  std::string out;
  if (braidPutSignal(mine.data(), kCount, braidInt32, right, win, 64, 3, 0, 0, comm, s))
    out += err("put", comm) + "; ";
  // 16 bytes into its own window's tail, signal 5 from itself.
  if (braidPutSignal(self.data(), 4, braidInt32, rank, win, 64 + kCount * 4, 5, 0, 0, comm, s))
    out += err("put to itself", comm) + "; ";
  if (braidSignal(right, 3, 0, 0, comm, s)) out += err("signal", comm) + "; ";
  const braidWaitSignalDesc_t descs[2] = {{2, left, 3, 0}, {1, rank, 5, 0}};
  if (braidWaitSignal(2, descs, comm, s)) out += err("wait", comm) + "; ";
  if (s && braidStreamSynchronize(s)) out += err("synchronize", nullptr) + "; ";
  for (int i = 0; i < kCount && out.empty(); ++i)
    if (window[16 + i] != left * 100000 + i)
      out += "element " + std::to_string(i) + " is " + std::to_string(window[16 + i]);
  for (int i = 0; i < 4 && out.empty(); ++i)
    if (window[16 + kCount + i] != 7 + rank) out += "the put to itself is missing";
  if (out.empty() && (window[0] != -1 || window[15] != -1)) out += "bytes before the offset";
  // Every rank is past its waits before any deregisters (collective).
  if (braidCommWindowDeregister(comm, win)) out += err("deregister", comm);
  if (s) braidStreamDestroy(s);
  return out;
}

class Rma : public ::testing::TestWithParam<bool> {};

// Every communicator here waits at most 20 s (a lost signal fails, never hangs).
braidConfig_t bounded() {
  braidConfig_t cfg = BRAID_CONFIG_INITIALIZER;
  cfg.timeoutSec = 20;
  return cfg;
}

TEST_P(Rma, PutsLandWithoutACallThereOnThreads) {
  const bool stream = GetParam();
  auto errors = runThreadsWithConfig(4, bounded(),
                                     [&](braidComm_t c, int r) { return exchange(c, r, stream); });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

INSTANTIATE_TEST_SUITE_P(Stream, Rma, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "stream" : "caller"; });

int rmaChild(braidComm_t comm, int rank, int) {
  const std::string e = exchange(comm, rank, false);
  if (!e.empty()) std::printf("%s\n", e.c_str());
  return e.empty() ? 0 : 1;
}

TEST(Rma, PutsLandWithoutACallThereOnProcesses) {
  EXPECT_EQ(failedChildren(runProcesses(3, "rma", {"BRAID_TIMEOUT=20"})), "");
}

TEST(Rma, RefusesBadArgumentsByName) {
  auto errors = runThreadsWithConfig(2, bounded(), [](braidComm_t c, int r) -> std::string {
    std::vector<int32_t> buf(64, 0);
    braidWindow_t win = nullptr;
    std::string out;
    auto refused = [&](braidResult_t res, const char* needle, const char* what) {
      if (res != braidInvalidArgument || !std::strstr(braidGetLastError(nullptr), needle))
        out += std::string(what) + " not refused naming " + needle + " (" +
               braidGetLastError(nullptr) + "); ";
    };
    refused(braidCommWindowRegister(c, buf.data(), 256, nullptr, 0), "win", "NULL win");
    refused(braidCommWindowRegister(c, nullptr, 256, &win, 0), "buff", "NULL buff");
    refused(braidCommWindowRegister(c, buf.data(), 256, &win, 0x10), "winFlags", "flags 0x10");
    if (braidCommWindowRegister(c, buf.data(), 256, &win, 0)) return err("register", c);
    const int peer = 1 - r;
    refused(braidPutSignal(buf.data(), 65, braidInt32, peer, win, 0, 0, 0, 0, c, nullptr), "beyond",
            "a put past the window");
    refused(braidPutSignal(buf.data(), 1, braidInt32, peer, win, 256, 0, 0, 0, c, nullptr),
            "beyond", "an offset at the end");
    refused(braidPutSignal(buf.data(), 1, braidInt32, 2, win, 0, 0, 0, 0, c, nullptr), "peer",
            "peer 2 of 2");
    refused(braidPutSignal(buf.data(), 1, braidInt32, peer, win, 0, BRAID_MAX_SIGNALS, 0, 0, c,
                           nullptr),
            "sigIdx", "sigIdx past the end");
    refused(braidPutSignal(buf.data(), 1, braidInt32, peer, win, 0, 0, 1, 0, c, nullptr), "ctx",
            "ctx 1");
    refused(braidPutSignal(buf.data(), 1, braidInt32, peer, win, 0, 0, 0, 2, c, nullptr), "flags",
            "flags 2");
    refused(braidPutSignal(nullptr, 1, braidInt32, peer, win, 0, 0, 0, 0, c, nullptr), "localbuff",
            "NULL localbuff");
    refused(braidPutSignal(buf.data(), 1, static_cast<braidDataType_t>(99), peer, win, 0, 0, 0, 0,
                           c, nullptr),
            "datatype", "datatype 99");
    int junk = 0;
    refused(braidPutSignal(buf.data(), 1, braidInt32, peer, reinterpret_cast<braidWindow_t>(&junk),
                           0, 0, 0, 0, c, nullptr),
            "not a window", "a foreign window");
    const braidWaitSignalDesc_t bad[1] = {{-1, peer, 0, 0}};
    refused(braidWaitSignal(1, bad, c, nullptr), "opCnt", "opCnt -1");
    refused(braidWaitSignal(1, nullptr, c, nullptr), "descs", "NULL descs");
    refused(braidWinGetUserPtr(c, win, nullptr), "userPtr", "NULL userPtr");
    if (braidCommWindowDeregister(c, win)) out += err("deregister", c);
    refused(braidWinGetUserPtr(c, win, reinterpret_cast<void**>(&junk)), "not a window",
            "a deregistered window");
    // Nothing was sent: no signal is pending, and the communicator still works.
    float x = 1;
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, c, nullptr) || x != 2)
      out += "the communicator no longer works";
    return out;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

TEST(Rma, AWaitWithoutItsSignalEndsAtTheTimeout) {
  braidConfig_t cfg = BRAID_CONFIG_INITIALIZER;
  cfg.timeoutSec = 0.3;
  auto errors = runThreadsWithConfig(2, cfg, [](braidComm_t c, int r) -> std::string {
    const braidWaitSignalDesc_t d[1] = {{1, 1 - r, 9, 0}};
    const braidResult_t res = braidWaitSignal(1, d, c, nullptr);
    if (res != braidTimeout || !std::strstr(braidGetLastError(nullptr), "sigIdx 9"))
      return std::string("got ") + braidGetErrorString(res) + ": " + braidGetLastError(nullptr);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("rma", braid::test::rmaChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
