// braidConfigGet and braidConfigList (braid/braid_config.h) on this process's environment:
// meson.build sets BRAID_BUFFSIZE=1M, NCCL_CHUNKSIZE=64K, NCCL_DEBUG=NONE and BRAID_COMM_SECRET.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "braid/braid_config.h"

namespace {

TEST(ConfigApi, GetByAnyName) {
  braidSetting_t s;
  ASSERT_EQ(braidConfigGet("NCCL_BUFFSIZE", &s), braidSuccess) << braidGetLastError(nullptr);
  EXPECT_STREQ(s.name, "BRAID_BUFFSIZE");
  EXPECT_STREQ(s.type, "size");
  EXPECT_STREQ(s.ncclName, "NCCL_BUFFSIZE");
  EXPECT_STREQ(s.value, "1048576");
  EXPECT_STREQ(s.defaultValue, "2097152");
  EXPECT_STREQ(s.source, "BRAID_BUFFSIZE");
  ASSERT_EQ(braidConfigGet("CHUNKSIZE", &s), braidSuccess);
  EXPECT_STREQ(s.name, "BRAID_CHUNKSIZE");
  EXPECT_STREQ(s.value, "65536");
  EXPECT_STREQ(s.source, "NCCL_CHUNKSIZE");
  ASSERT_EQ(braidConfigGet("BRAID_DEBUG", &s), braidSuccess);
  EXPECT_STREQ(s.value, "NONE");
  EXPECT_STREQ(s.source, "NCCL_DEBUG");
  ASSERT_EQ(braidConfigGet("BRAID_NSOCKS_PERPEER", &s), braidSuccess);
  EXPECT_STREQ(s.type, "int");
  EXPECT_STREQ(s.value, "2");
  EXPECT_STREQ(s.source, "default");
  EXPECT_STREQ(s.ncclName, "");
  ASSERT_EQ(braidConfigGet("BRAID_COMM_SECRET", &s), braidSuccess);
  EXPECT_STREQ(s.value, "(secret)");
  EXPECT_STREQ(s.source, "BRAID_COMM_SECRET");
}

TEST(ConfigApi, Refusals) {
  braidSetting_t s;
  s.name = "untouched";
  EXPECT_EQ(braidConfigGet("NCCL_NO_SUCH_SETTING", &s), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("\"NCCL_NO_SUCH_SETTING\""),
            std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_STREQ(s.name, "untouched");
  EXPECT_EQ(braidConfigGet(nullptr, &s), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("name is NULL"), std::string::npos);
  EXPECT_EQ(braidConfigGet("BRAID_DEBUG", nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("setting is NULL"), std::string::npos);
  int count = 0;
  const braidSetting_t* table = nullptr;
  EXPECT_EQ(braidConfigList(nullptr, &count), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("settings is NULL"), std::string::npos);
  EXPECT_EQ(braidConfigList(&table, nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("count is NULL"), std::string::npos);
}

// The list: every setting once, each found again by its name; a later braidConfigGet leaves
// the list's strings alone (each function keeps its own).
TEST(ConfigApi, ListSurvivesGet) {
  const braidSetting_t* table = nullptr;
  int count = 0;
  ASSERT_EQ(braidConfigList(&table, &count), braidSuccess);
  EXPECT_EQ(count, 36);
  std::set<std::string> names;
  for (int i = 0; i < count; ++i) names.insert(table[i].name);
  EXPECT_EQ(names.size(), static_cast<size_t>(count));
  const std::string first = table[0].name, firstValue = table[0].value;
  braidSetting_t s;
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(braidConfigGet(table[i].name, &s), braidSuccess) << table[i].name;
    EXPECT_STREQ(s.value, table[i].value) << table[i].name;
  }
  EXPECT_EQ(first, table[0].name);
  EXPECT_EQ(firstValue, table[0].value);
}

}  // namespace
