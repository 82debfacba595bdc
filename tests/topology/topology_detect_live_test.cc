// Live detection: this machine against sysconf and sysfs, a stand-in NVML (run by the
// topology_detect_fake_nvml test), a /sys/class/infiniband snapshot of an H100 node, and hwloc's
// fsroot tarballs (a saved /sys and /proc) detected as another machine.
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "detect_fixtures.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

using fixtures::exists;
using fixtures::hasNote;
using fixtures::sharedDir;

// ---- this machine ----

std::string readLine(const std::string& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

std::vector<std::string> listDir(const std::string& p) {
  std::vector<std::string> out;
  if (DIR* d = opendir(p.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

TEST(Detect, ThisMachine) {
  System sys;
  ASSERT_EQ(detectSystem(&sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.source, "detected");
  // Counts against sysconf and sysfs.
  std::set<std::string> pkgs, cores;
  int pus = 0;
  for (auto& c : listDir("/sys/devices/system/cpu")) {
    if (c.size() < 4 || c.rfind("cpu", 0) != 0 || !isdigit(static_cast<unsigned char>(c[3])))
      continue;
    std::string base = "/sys/devices/system/cpu/" + c + "/topology/";
    std::string pk = readLine(base + "physical_package_id");
    if (pk.empty()) continue;
    pus++;
    pkgs.insert(pk);
    cores.insert(pk + ":" + readLine(base + "core_id"));
  }
  EXPECT_EQ(sys.pus, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_EQ(sys.pus, pus);
  EXPECT_EQ(sys.packages, static_cast<int>(pkgs.size()));
  EXPECT_EQ(sys.cores, static_cast<int>(cores.size()));
  int numa = 0;
  for (auto& n : listDir("/sys/devices/system/node"))
    if (n.rfind("node", 0) == 0 && isdigit(static_cast<unsigned char>(n[4])) &&
        !readLine("/sys/devices/system/node/" + n + "/cpulist").empty())
      numa++;
  EXPECT_EQ(static_cast<int>(sys.cpus.size()), std::max(numa, 1));
  // Every network interface with a device is a Net.
  for (auto& ifc : listDir("/sys/class/net")) {
    if (access(("/sys/class/net/" + ifc + "/device").c_str(), F_OK) != 0) continue;
    bool found = false;
    for (auto& n : sys.nets) found = found || n.name == ifc;
    EXPECT_TRUE(found) << ifc << " not detected";
  }
  // Notes: each absent source said once.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml) {
    EXPECT_EQ(std::count(sys.notes.begin(), sys.notes.end(),
                         "NVML not available (libnvidia-ml.so.1 not found)"),
              1);
    EXPECT_EQ(std::count(sys.notes.begin(), sys.notes.end(), "no GPU found"), 1);
  } else {
    dlclose(nvml);
  }
  if (listDir("/sys/class/infiniband").empty()) {
    EXPECT_EQ(std::count(sys.notes.begin(), sys.notes.end(), "no RDMA device"), 1);
  }
  for (auto& n : sys.notes) EXPECT_EQ(std::count(sys.notes.begin(), sys.notes.end(), n), 1) << n;
  // Ethernet speeds are read or said unknown.
  for (auto& n : sys.nets) {
    if (n.speed_gbps <= 0) {
      EXPECT_TRUE(hasNote(sys, "network " + n.name + ": speed unknown")) << n.name;
    }
  }
}

// Run by the topology_detect_fake_nvml test with fake_nvml.cc as libnvidia-ml.so.1.
TEST(DetectFakeNvml, GpusAndNvLinks) {
  if (!getenv("BRAID_TEST_FAKE_NVML")) GTEST_SKIP() << "runs under topology_detect_fake_nvml";
  System sys;
  ASSERT_EQ(detectSystem(&sys), braidSuccess) << lastError();
  ASSERT_EQ(sys.gpus.size(), 4u);
  for (int i = 0; i < 4; i++) {
    char bus[16];
    snprintf(bus, sizeof bus, "0000:%02x:00.0", 0xa1 + i);
    EXPECT_EQ(sys.gpus[i].pci.busid, bus);  // NVML's 8-digit domain made 4
    EXPECT_EQ(sys.gpus[i].model, "Fake H100");
    EXPECT_EQ(sys.gpus[i].sm, 90);
    EXPECT_EQ(sys.gpus[i].dev, i);
  }
  ASSERT_EQ(sys.nvswitches.size(), 1u);
  EXPECT_EQ(sys.nvswitches[0].pci.busid, "0000:f0:00.0");
  int gpuGpu = 0, gpuSw = 0, total = 0;
  for (auto& l : sys.links) {
    if (l.type != LinkType::kNvLink) continue;
    total += l.count;
    if (l.a.kind == NodeKind::kGpu && l.b.kind == NodeKind::kGpu) {
      gpuGpu++;
      EXPECT_EQ(l.count, 4);  // links 0-3, counted once per pair though both ends report them
      EXPECT_EQ(l.a.index ^ 1, l.b.index);
    } else {
      gpuSw++;
      EXPECT_EQ(l.count, 2);
    }
  }
  EXPECT_EQ(gpuGpu, 2);
  EXPECT_EQ(gpuSw, 4);
  EXPECT_EQ(total, 16);
  EXPECT_FALSE(hasNote(sys, "NVML not available"));
  EXPECT_TRUE(hasNote(sys, "4 GPU(s), 16 active NVLink(s)"));
  EXPECT_TRUE(hasNote(sys, "not in the PCI tree"));
}

// ---- /sys/class/infiniband snapshot of an H100 node ----

TEST(Detect, InfinibandSysfsSnapshot) {
  std::string root = sharedDir() + "/topologies/sysfs/sys-class-infiniband-h100_gpud";
  REQUIRE_DIR(root);
  System sys;
  int count = 0;
  ASSERT_EQ(detectIbFromSysfs(root, &sys, &count), braidSuccess);
  EXPECT_EQ(count, 9);
  ASSERT_EQ(sys.nets.size(), 9u);
  EXPECT_EQ(sys.nics.size(), 9u);
  std::vector<std::string> names;
  for (auto& n : sys.nets) {
    names.push_back(n.name);
    EXPECT_EQ(n.port, 1);
    if (n.name == "mlx5_bond_0") {
      EXPECT_EQ(n.link_layer, LinkLayer::kEthernet);
      EXPECT_DOUBLE_EQ(n.speed_gbps, 200);
    } else {
      EXPECT_EQ(n.link_layer, LinkLayer::kInfiniBand);
      EXPECT_DOUBLE_EQ(n.speed_gbps, 400);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6",
                                             "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"}));
  // The snapshot has no device/ links: PCI locality unknown, said.
  EXPECT_TRUE(hasNote(sys, "mlx5_0: no PCI device link"));
}

// ---- hwloc fsroot tarballs (hwloc's tests/hwloc/linux: a copy of /sys and /proc) ----
// Facts from hwloc's expected lstopo output beside each tarball (*.output).

std::string fsrootDir() { return sharedDir() + "/topologies/sysfs/hwloc_fsroot"; }

// Extracts NAME.tar.bz2 into a fresh temporary directory; the fsroot is <tmp>/NAME. Empty when
// tar or bzip2 is missing (the test then skips).
class FsrootTarball {
 public:
  explicit FsrootTarball(const std::string& name) {
    if (system("command -v tar >/dev/null 2>&1 && command -v bzip2 >/dev/null 2>&1") != 0) return;
    char tmpl[] = "/tmp/braid-fsroot-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    tmp_ = tmpl;
    std::string cmd =
        "tar xjf '" + fsrootDir() + "/" + name + ".tar.bz2' -C '" + tmp_ + "' 2>/dev/null";
    if (system(cmd.c_str()) == 0 && exists(tmp_ + "/" + name + "/sys")) root_ = tmp_ + "/" + name;
  }
  ~FsrootTarball() {
    if (!tmp_.empty()) {
      std::string cmd = "rm -rf '" + tmp_ + "'";
      if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", tmp_.c_str());
    }
  }
  const std::string& root() const { return root_; }

 private:
  std::string tmp_, root_;
};

#define REQUIRE_FSROOT(tarball, name)                                                          \
  REQUIRE_DIR(fsrootDir());                                                                    \
  FsrootTarball tarball(name);                                                                 \
  do {                                                                                         \
    if (tarball.root().empty()) GTEST_SKIP() << "tar/bzip2 missing or " name " not extracted"; \
  } while (0)

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// 2pa-pcidomain32bits: a KVM guest with two packages of one core, one NUMA node, and a second
// PCI host bridge in domain 10000 (SCSI controller 10000:00:04.0).
TEST(DetectFsroot, PciDomain32Bits) {
  REQUIRE_FSROOT(t, "2pa-pcidomain32bits");
  System sys;
  ASSERT_EQ(detectSystemAt(t.root(), &sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.source, "detected (fsroot " + t.root() + ")");
  EXPECT_TRUE(hasNote(sys, "NVML and libibverbs skipped"));
  EXPECT_FALSE(hasNote(sys, "libnvidia-ml.so.1"));
  // PCI devices: IDE 0000:00:01.1, VGA 0000:00:02.0, Ethernet 0000:00:03.0, SCSI 10000:00:04.0.
  EXPECT_EQ(sorted(sys.pci_devices), (std::vector<std::string>{"0000:00:01.1", "0000:00:02.0",
                                                               "0000:00:03.0", "10000:00:04.0"}));
  std::string norm;
  ASSERT_TRUE(normalizeBusId("10000:00:04.0", &norm));
  EXPECT_EQ(norm, "10000:00:04.0");
  EXPECT_EQ(sys.gpus.size(), 0u);  // the Cirrus VGA is no GPU
  ASSERT_EQ(sys.nics.size(), 1u);
  EXPECT_EQ(sys.nics[0].pci.busid, "0000:00:03.0");
  ASSERT_EQ(sys.nets.size(), 1u);
  EXPECT_EQ(sys.nets[0].name, "ens3");
  EXPECT_EQ(sys.nets[0].link_layer, LinkLayer::kEthernet);
  EXPECT_TRUE(hasNote(sys, "network ens3: speed unknown"));  // virtio says -1
  if (!fixtures::hwlocCounted(sys)) GTEST_SKIP() << "built without hwloc: counts came from sysfs";
  EXPECT_EQ(sys.packages, 2);
  EXPECT_EQ(sys.cores, 2);
  EXPECT_EQ(sys.pus, 2);
  ASSERT_EQ(sys.cpus.size(), 1u);
  EXPECT_EQ(sys.memory_numa_nodes, 0);
  EXPECT_EQ(sys.cpus[0].numaid, 0);
  EXPECT_EQ(sys.cpus[0].affinity, "00000003");
  // From the root's /proc/cpuinfo, not this machine's cpuid.
  EXPECT_EQ(sys.cpus[0].vendor, "GenuineIntel");
  EXPECT_EQ(sys.cpus[0].family, 6);
  EXPECT_EQ(sys.cpus[0].model, 94);
}

// nvidiagpunumanodes: a POWER9 node (8335-GTW) with two packages of four SMT4 cores, two NUMA
// nodes with CPUs (0, 8), six NUMA nodes of GPU memory (250-255; hwloc hides them) and six VGA
// functions without vendor id or CUDA/NVML OS devices (so no GPU in the model).
TEST(DetectFsroot, NvidiaGpuNumaNodes) {
  REQUIRE_FSROOT(t, "nvidiagpunumanodes");
  System sys;
  ASSERT_EQ(detectSystemAt(t.root(), &sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.memory_numa_nodes, 6);
  EXPECT_EQ(sys.gpus.size(), 0u);
  EXPECT_EQ(sys.nics.size(), 0u);
  EXPECT_EQ(sorted(sys.pci_devices),
            (std::vector<std::string>{"0004:05:00.0", "0004:06:00.0", "0006:00:00.0",
                                      "0007:00:00.0", "0035:04:00.0", "0035:05:00.0"}));
  if (!fixtures::hwlocCounted(sys)) GTEST_SKIP() << "built without hwloc: counts came from sysfs";
  fixtures::expectNvidiaGpuNumaNodesCounts(sys);
  ASSERT_EQ(sys.cpus.size(), 2u);
  EXPECT_EQ(sys.cpus[0].arch, "ppc64");
  EXPECT_EQ(sys.cpus[0].vendor, "");  // POWER's cpuinfo has no vendor; not this machine's
  EXPECT_EQ(sys.cpus[0].affinity, "0000ffff");
  EXPECT_EQ(sys.numa_latency, (std::vector<std::vector<uint32_t>>{{10, 40}, {40, 10}}));
}

TEST(DetectFsroot, RootWithoutSysRefused) {
  System sys;
  EXPECT_EQ(detectSystemAt("/nonexistent-braid-root", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("/nonexistent-braid-root"), std::string::npos);
  char tmpl[] = "/tmp/braid-fsroot-empty-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  EXPECT_EQ(detectSystemAt(tmpl, &sys), braidInvalidArgument);
  rmdir(tmpl);
}

}  // namespace
}  // namespace braid::topo
