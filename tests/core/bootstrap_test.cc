// Bootstrap and init: the secret is proved before anything else, strangers do not disturb a
// job, and bad arguments are refused with a message naming them.
#include "core/bootstrap.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"

namespace braid {
namespace {

TEST(Bootstrap, WrongSecretIsRefused) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  // Forge an id that names the same root but carries another secret (valid checksum).
  braidUniqueId forged;
  ASSERT_EQ(braidGetUniqueId(&forged), braidSuccess);
  UniqueIdData real, fake;
  ASSERT_EQ(decodeUniqueId(id, &real), braidSuccess);
  ASSERT_EQ(decodeUniqueId(forged, &fake), braidSuccess);
  fake.root = real.root;
  fake.checksum = uniqueIdChecksum(fake);
  std::memcpy(forged.internal, &fake, sizeof(fake));
  braidComm_t comm = nullptr;
  EXPECT_EQ(braidCommInitRank(&comm, 1, forged, 0), braidRemoteError);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("refused"), std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
  // The real job still forms.
  ASSERT_EQ(braidCommInitRank(&comm, 1, id, 0), braidSuccess);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

TEST(Bootstrap, StrangersDoNotDisturbTheJob) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  UniqueIdData data;
  ASSERT_EQ(decodeUniqueId(id, &data), braidSuccess);
  // One stranger sends garbage, another connects and says nothing, then both go.
  for (int k = 0; k < 2; ++k) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&data.root), sizeof(data.root)), 0);
    if (k == 0) {
      std::string garbage(200, 'x');
      ASSERT_GT(write(fd, garbage.data(), garbage.size()), 0);
    }
    close(fd);
  }
  const int n = 3;
  std::vector<braidComm_t> comms(n);
  std::vector<braidResult_t> res(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      res[r] = braidCommInitRank(&comms[r], n, id, r);
      if (res[r] != braidSuccess) return;
      int v = r + 1, out = 0;
      res[r] = braidAllReduce(&v, &out, 1, braidInt32, braidSum, comms[r], nullptr);
      if (res[r] == braidSuccess && out != 6) res[r] = braidInternalError;
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r], braidSuccess) << braidGetLastError(nullptr);
    if (comms[r]) braidCommDestroy(comms[r]);
  }
}

TEST(Bootstrap, CorruptedIdIsRefused) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  id.internal[20] ^= 0x5a;
  braidComm_t comm = nullptr;
  EXPECT_EQ(braidCommInitRank(&comm, 1, id, 0), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("corrupted"), std::string::npos);
  std::memset(id.internal, 0, sizeof(id.internal));
  EXPECT_EQ(braidCommInitRank(&comm, 1, id, 0), braidInvalidArgument);
}

TEST(Bootstrap, IdTextRoundTripsAndRejectsGarbage) {
  braidUniqueId id, back;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  char text[2 * BRAID_UNIQUE_ID_BYTES + 1];
  ASSERT_EQ(braidUniqueIdToString(&id, text), braidSuccess);
  ASSERT_EQ(braidUniqueIdFromString(text, &back), braidSuccess);
  EXPECT_EQ(std::memcmp(id.internal, back.internal, sizeof(id.internal)), 0);
  EXPECT_EQ(braidUniqueIdFromString("abc", &back), braidInvalidArgument);
  text[10] = 'z';
  EXPECT_EQ(braidUniqueIdFromString(text, &back), braidInvalidArgument);
}

TEST(Init, BadArgumentsNameTheArgument) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  braidComm_t comm = nullptr;
  EXPECT_EQ(braidCommInitRank(&comm, 0, id, 0), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("nranks"), std::string::npos);
  EXPECT_EQ(braidCommInitRank(&comm, 2, id, 2), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("rank 2"), std::string::npos);
  EXPECT_EQ(braidCommInitRank(&comm, 2, id, -1), braidInvalidArgument);
  EXPECT_EQ(braidCommInitRank(nullptr, 1, id, 0), braidInvalidArgument);
  EXPECT_EQ(braidCommInitAll(nullptr, 2, nullptr), braidInvalidArgument);
  braidComm_t comms[1];
  EXPECT_EQ(braidCommInitAll(comms, 0, nullptr), braidInvalidArgument);
}

TEST(AllReduceArgs, BadArgumentsAreRefusedBeforeAnythingMoves) {
  braidComm_t comm;
  ASSERT_EQ(braidCommInitAll(&comm, 1, nullptr), braidSuccess);
  float x[4] = {1, 2, 3, 4}, y[4];
  EXPECT_EQ(braidAllReduce(nullptr, y, 4, braidFloat32, braidSum, comm, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("sendbuff"), std::string::npos);
  EXPECT_EQ(braidAllReduce(x, nullptr, 4, braidFloat32, braidSum, comm, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("recvbuff"), std::string::npos);
  EXPECT_EQ(braidAllReduce(x, y, 4, static_cast<braidDataType_t>(42), braidSum, comm, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("datatype"), std::string::npos);
  EXPECT_EQ(braidAllReduce(x, y, 4, braidFloat32, static_cast<braidRedOp_t>(-1), comm, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("op"), std::string::npos);
  EXPECT_EQ(braidAllReduce(x, y, SIZE_MAX / 2, braidFloat32, braidSum, comm, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("overflow"), std::string::npos);
  EXPECT_EQ(braidAllReduce(nullptr, nullptr, 0, braidFloat32, braidSum, comm, nullptr),
            braidSuccess);
  EXPECT_EQ(braidAllReduce(x, y, 4, braidFloat32, braidSum, nullptr, nullptr),
            braidInvalidArgument);
  ASSERT_EQ(braidAllReduce(x, y, 4, braidFloat32, braidSum, comm, nullptr), braidSuccess);
  EXPECT_EQ(y[3], 4.0f);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

TEST(Version, MatchesHeader) {
  int v = 0;
  ASSERT_EQ(braidGetVersion(&v), braidSuccess);
  EXPECT_EQ(v, BRAID_VERSION_CODE);
  EXPECT_EQ(braidGetVersion(nullptr), braidInvalidArgument);
}

}  // namespace
}  // namespace braid
