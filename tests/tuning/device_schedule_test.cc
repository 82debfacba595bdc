// NCCL's device algorithms as device schedules (algorithms/device_schedule.h): NVLS, NVLSTree
// and PAT pinned to their closed forms on hand-built fabrics, where they apply, and MNNVL
// domains built from a topology file (tuning/topo_fabric.h).
#include "algorithms/device_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "topology/topology.h"
#include "tuning/topo_fabric.h"

namespace {

using braid::Collective;
using braid::DeviceSchedule;
using braid::Fabric;

const braid::DeviceAlgorithm& find(const char* name, Collective coll) {
  for (const auto& d : braid::deviceAlgorithms())
    if (d.coll == coll && !std::strcmp(d.name, name)) return d;
  ADD_FAILURE() << name << " missing";
  return braid::deviceAlgorithms()[0];
}

double timeOf(const char* name, Collective coll, const Fabric& f, double bytes) {
  const auto& d = find(name, coll);
  EXPECT_EQ(d.supports(f), nullptr) << name;
  DeviceSchedule s;
  d.build(f, bytes, &s);
  return braid::deviceScheduleTime(s).total_us;
}

// 8 GPUs on one host's NVSwitches: 400 GB/s NVLink, multimem at 0.75 of it (300 GB/s), 1 us,
// 0.2 us steps; NVLS pieces of 16 channels x 128 KiB = 2 MiB.
Fabric nvlsHost(int hosts, int perHost) {
  Fabric f = braid::uniformFabric(hosts, perHost, {1.0, 400}, {5.0, 50});
  f.nicsPerHost = perHost;
  f.step_overhead_us = 0.2;
  f.engine_moves_data = false;
  f.chunk_bytes = 4 << 20;
  f.nvls = true;
  f.nvls_efficiency = 0.75;
  f.nvls_channels = 16;
  f.nvls_chunk_bytes = 128 << 10;
  return f;
}

constexpr double kMiB = 1 << 20;

TEST(DeviceSchedule, NvlsAllReduceClosedForm) {
  const Fabric f = nvlsHost(1, 8);
  const double B = 64 * kMiB, g = 300e3;  // bytes per us
  // ld_reduce: out B, in B/8, latency 2 x 1.2 us; multicast: out B/8, in B, 1.2 us. 32 pieces:
  // one piece through both, then the NVLink's busier direction over the other 31.
  const double fill = 2.4 + B / g / 32 + 1.2 + B / g / 32;
  const double expect = fill + (B + B / 8) / g * 31 / 32;
  EXPECT_DOUBLE_EQ(timeOf("nvls", Collective::kAllReduce, f, B), expect);
  // busbw at large sizes tends to 2(n-1)/n x n/(n+1) x 300 = 14/9 x 300 GB/s.
  const double big = 64.0 * (1 << 30);
  const double busbw = big / (timeOf("nvls", Collective::kAllReduce, f, big) * 1e3) * 14 / 8;
  EXPECT_NEAR(busbw, 14.0 / 9 * 300, 0.5);
}

TEST(DeviceSchedule, NvlsReduceScatterAndAllGatherAreItsHalves) {
  const Fabric f = nvlsHost(1, 8);
  const double B = 64 * kMiB, g = 300e3;
  EXPECT_DOUBLE_EQ(timeOf("nvls", Collective::kReduceScatter, f, B),
                   2.4 + B / g / 32 + B / g * 31 / 32);
  EXPECT_DOUBLE_EQ(timeOf("nvls", Collective::kAllGather, f, B),
                   1.2 + B / g / 32 + B / g * 31 / 32);
}

TEST(DeviceSchedule, NvlsTreeClosedForm) {
  // 2 hosts x 4 GPUs, 4 NICs of 50 GB/s per host: each rank's share is one NIC.
  const Fabric f = nvlsHost(2, 4);
  const double B = 64 * kMiB, g = 300e3, nic = 50e3;
  // NVLS within the host down to B/4 per rank; between the two hosts each rank sends and
  // receives its shard once, 4 MiB pieces stored and forwarded up and down (2 rounds of
  // 5 + 0.2 us); multicast back.
  const double fill = 2.4 + B / g / 32 + 2 * (5.2 + 4 * kMiB / nic) + 1.2 + B / g / 32;
  const double nvlink = (B + B / 4) / g, network = B / 4 / nic;
  EXPECT_DOUBLE_EQ(timeOf("nvlstree", Collective::kAllReduce, f, B),
                   fill + std::max(nvlink, network) * 31 / 32);
  braid::DeviceSchedule s;
  find("nvlstree", Collective::kAllReduce).build(f, B, &s);
  const braid::TimeSplit t = braid::deviceScheduleTime(s);
  EXPECT_DOUBLE_EQ(t.nvlink_us, nvlink);
  EXPECT_DOUBLE_EQ(t.network_us, network);
  EXPECT_DOUBLE_EQ(t.reduce_us, 0);
  EXPECT_DOUBLE_EQ(t.latency_us, t.total_us - std::max(nvlink, network));
  // Three hosts and more: a node is interior in one of the two trees, twice the data.
  const Fabric f4 = nvlsHost(4, 4);
  find("nvlstree", Collective::kAllReduce).build(f4, B, &s);
  EXPECT_DOUBLE_EQ(s.phases[1].tx, 2 * B / 4);
  EXPECT_EQ(s.phases[1].rounds, 4);  // 2 levels up, 2 down
}

TEST(DeviceSchedule, PatClosedForm) {
  // 8 hosts x 1 GPU, one 25 GB/s NIC each, 1 MiB steps: 3 rounds, 7/8 of the data each way;
  // the rounds of a piece add their latencies, the piece crosses once (round k: 2^k blocks).
  Fabric f = braid::uniformFabric(8, 1, {1.0, 400}, {5.0, 25});
  f.engine_moves_data = false;
  f.step_overhead_us = 0.2;
  f.chunk_bytes = 1 << 20;
  f.reduce_gbs = 1000;
  const double B = 8 * kMiB, net = 25e3;
  const double fill = 3 * 5.2 + 7 * kMiB / 8 / net;
  EXPECT_DOUBLE_EQ(timeOf("pat", Collective::kAllGather, f, B), fill + 7 * kMiB / net * 7 / 8);
  EXPECT_DOUBLE_EQ(timeOf("pat", Collective::kReduceScatter, f, B),
                   fill + 7 * kMiB / 8 / 1e6 + 7 * kMiB / net * 7 / 8);
  // The latency grows as log2 n: 64 nodes, 6 rounds.
  Fabric f64 = f;
  f64.hostOf.clear();
  for (int h = 0; h < 64; ++h) f64.hostOf.push_back(h);
  braid::DeviceSchedule s;
  find("pat", Collective::kAllGather).build(f64, B, &s);
  EXPECT_DOUBLE_EQ(s.phases[0].latency_us, 6 * 5.2);
}

TEST(DeviceSchedule, WhereEachApplies) {
  const auto& nvls = find("nvls", Collective::kAllReduce);
  const auto& tree = find("nvlstree", Collective::kAllReduce);
  const auto& pat = find("pat", Collective::kAllGather);
  Fabric f = nvlsHost(1, 8);
  EXPECT_EQ(nvls.supports(f), nullptr);
  EXPECT_NE(tree.supports(f), nullptr);  // one domain
  EXPECT_NE(pat.supports(f), nullptr);   // 8 ranks on the host
  f.nvls = false;                        // NCCL_NVLS_ENABLE=0, or no NVLink SHARP
  EXPECT_NE(nvls.supports(f), nullptr);
  EXPECT_NE(nvls.supports(nvlsHost(2, 4)), nullptr);
  EXPECT_EQ(tree.supports(nvlsHost(2, 4)), nullptr);
  EXPECT_EQ(pat.supports(nvlsHost(4, 1)), nullptr);
  Fabric cpu = braid::uniformFabric(4, 1, {1, 10}, {5, 10});  // host ranks: no GPU kernels
  EXPECT_NE(pat.supports(cpu), nullptr);
}

// MNNVL: the GB300 tray (4 GPUs) over 36 hosts in racks of 18 (NVL72): two NVLink domains of
// 72 GPUs joined by their hosts' NICs, NVLS within each.
TEST(DeviceSchedule, MnnvlDomainsFromTopology) {
  braid::topo::System sys;
  ASSERT_EQ(braid::topo::loadTopologyFile(
                std::string(BRAID_SOURCE_DIR) + "/perf/systems/oci_bm_gpu_gb300_4-topo.xml", &sys),
            braidSuccess);
  braid::tuning::TopoFabricOptions o;
  o.mnnvl = true;
  o.domainHosts = 18;
  Fabric f;
  std::string why;
  ASSERT_EQ(braid::tuning::fabricFromTopology(sys, 36, o, &f, &why), braidSuccess) << why;
  EXPECT_EQ(f.nranks(), 144);
  EXPECT_EQ(f.nhosts(), 2);
  EXPECT_EQ(f.ranksPerHost(), 72);
  EXPECT_TRUE(f.nvls);
  EXPECT_DOUBLE_EQ(f.nvls_efficiency, 0.72);
  EXPECT_EQ(find("nvls", Collective::kAllReduce).supports(f) != nullptr, true);
  EXPECT_EQ(find("nvlstree", Collective::kAllReduce).supports(f), nullptr);
  // Domains must be whole; NVLS can be turned off.
  o.domainHosts = 5;
  EXPECT_EQ(braid::tuning::fabricFromTopology(sys, 36, o, &f, &why), braidInvalidArgument);
  // More hosts per domain than hosts: refused too, not cut down to the hosts.
  o.domainHosts = 1000;
  EXPECT_EQ(braid::tuning::fabricFromTopology(sys, 4, o, &f, &why), braidInvalidArgument);
  o.domainHosts = 0;
  o.nvls = false;
  ASSERT_EQ(braid::tuning::fabricFromTopology(sys, 2, o, &f, &why), braidSuccess);
  EXPECT_EQ(f.nhosts(), 1);
  EXPECT_FALSE(f.nvls);
}

}  // namespace
