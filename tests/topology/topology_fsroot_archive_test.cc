// hwloc Linux fsroot tarballs (a saved /sys and /proc) through loadTopologyFile, with
// libarchive: hwloc's own tarballs against the facts of its expected output, extraction leaving
// nothing behind; and archives that would write outside the extraction directory, or leave
// links, FIFOs or devices for hwloc to read through, refused with the entry named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

#if __has_include(<archive.h>)
#include <archive.h>
#include <archive_entry.h>
#endif

namespace braid::topo {
namespace {

namespace fs = std::filesystem;

using fixtures::topoDir;

#define REQUIRE_FIXTURES() REQUIRE_FIXTURE_DIR(topoDir() + "/tool-output")

// ---- hwloc fsroot tarballs through loadTopologyFile (libarchive) ----

// Points $TMPDIR at a fresh directory for the scope, so a test sees what extraction left.
class ScopedTmpdir {
 public:
  ScopedTmpdir() {
    if (const char* old = std::getenv("TMPDIR")) old_ = old, had_ = true;
    char tmpl[] = "/tmp/braid-archive-test-XXXXXX";
    if (mkdtemp(tmpl)) dir_ = tmpl;
    setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (had_)
      setenv("TMPDIR", old_.c_str(), 1);
    else
      unsetenv("TMPDIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  bool empty() const { return fs::is_empty(dir_); }

 private:
  std::string dir_, old_;
  bool had_ = false;
};

#define REQUIRE_ARCHIVES()                                                               \
  do {                                                                                   \
    if (!fsrootArchiveSupported()) {                                                     \
      System s;                                                                          \
      EXPECT_EQ(loadFsrootArchive("x.tar.bz2", &s), braidInvalidUsage);                  \
      EXPECT_NE(std::string(lastError()).find("libarchive"), std::string::npos);         \
      GTEST_SKIP() << "built without libarchive: fsroot archives are refused, not read"; \
    }                                                                                    \
  } while (0)

// Facts from hwloc's expected output beside each tarball (*.output): nvidiagpunumanodes is a
// POWER9 node, 2 packages, 8 cores, 32 PUs, NUMA nodes 0 and 8 with CPUs plus 6 of GPU memory,
// 6 PCI devices, no GPU (the VGA functions have no CUDA/NVML OS device); 2pa-pcidomain32bits a
// KVM guest, 2 packages of one core, one NUMA node, 4 PCI devices one of them in domain 10000,
// Ethernet ens3.
TEST(FsrootArchive, HwlocTarballs) {
  REQUIRE_FIXTURES();
  REQUIRE_ARCHIVES();
  ScopedTmpdir tmp;
  std::string dir = topoDir() + "/sysfs/hwloc_fsroot";
  System sys;
  std::string path = dir + "/nvidiagpunumanodes.tar.bz2";
  ASSERT_EQ(loadTopologyFile(path, &sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.source, path);
  EXPECT_TRUE(tmp.empty()) << "extraction left files in " << tmp.dir();
  EXPECT_EQ(sys.memory_numa_nodes, 6);
  EXPECT_EQ(sys.gpus.size(), 0u);
  EXPECT_EQ(sys.pci_devices.size(), 6u);
  for (const auto& n : sys.notes) EXPECT_EQ(n.find(tmp.dir()), std::string::npos) << n;
  if (fixtures::hwlocCounted(sys)) fixtures::expectNvidiaGpuNumaNodesCounts(sys);
  path = dir + "/2pa-pcidomain32bits.tar.bz2";
  ASSERT_EQ(loadTopologyFile(path, &sys), braidSuccess) << lastError();
  EXPECT_TRUE(tmp.empty());
  std::vector<std::string> pci = sys.pci_devices;
  std::sort(pci.begin(), pci.end());
  EXPECT_EQ(pci, (std::vector<std::string>{"0000:00:01.1", "0000:00:02.0", "0000:00:03.0",
                                           "10000:00:04.0"}));
  ASSERT_EQ(sys.nets.size(), 1u);
  EXPECT_EQ(sys.nets[0].name, "ens3");
  if (fixtures::hwlocCounted(sys)) {
    EXPECT_EQ(sys.packages, 2);
    EXPECT_EQ(sys.cores, 2);
    EXPECT_EQ(sys.cpus.size(), 1u);
  }
}

#if __has_include(<archive.h>)
// Writes a tar of (name, type, content-or-link-target) entries. Types: 'f' regular file, 'd'
// directory, 'l' symlink to body, 'h' hard link to the entry named body, 'p' FIFO, 'c'
// character device 1,5 (/dev/zero), 'b' block device 7,0. (tar cannot hold a socket.)
void writeTar(const std::string& path,
              const std::vector<std::tuple<std::string, char, std::string>>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_none(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, type, body] : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_perm(e, type == 'd' ? 0755 : 0644);
    mode_t ft = AE_IFREG;
    switch (type) {
      case 'd':
        ft = AE_IFDIR;
        break;
      case 'l':
        ft = AE_IFLNK;
        break;
      case 'p':
        ft = AE_IFIFO;
        break;
      case 'c':
        ft = AE_IFCHR;
        break;
      case 'b':
        ft = AE_IFBLK;
        break;
    }
    archive_entry_set_filetype(e, ft);
    if (type == 'c') archive_entry_set_rdevmajor(e, 1), archive_entry_set_rdevminor(e, 5);
    if (type == 'b') archive_entry_set_rdevmajor(e, 7), archive_entry_set_rdevminor(e, 0);
    if (type == 'l') archive_entry_set_symlink(e, body.c_str());
    if (type == 'h') archive_entry_set_hardlink(e, body.c_str());
    if (type == 'f') archive_entry_set_size(e, static_cast<la_int64_t>(body.size()));
    archive_write_header(a, e);
    if (type == 'f') archive_write_data(a, body.data(), body.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}
#endif

// Entries that would land outside the extraction directory (../evil, an absolute path, a write
// through a symlink the archive made) refuse the archive, and nothing is left behind.
TEST(FsrootArchive, EscapingEntriesRefused) {
  REQUIRE_ARCHIVES();
#if !__has_include(<archive.h>)
  GTEST_SKIP() << "libarchive headers absent: cannot build the test archives";
#else
  ScopedTmpdir tmp;
  char tmpl[] = "/tmp/braid-archive-src-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string src = tmpl;
  struct Case {
    const char* what;
    std::vector<std::tuple<std::string, char, std::string>> entries;
    std::string planted;  // a path that must not exist afterwards
  };
  std::vector<Case> cases = {
      {"dotdot", {{"r/sys/x", 'f', "1"}, {"../evil", 'f', "boom"}}, src + "/../evil"},
      {"dotdot-inner", {{"r/sys/../../../evil2", 'f', "boom"}}, "/tmp/evil2"},
      {"absolute", {{"r/sys/x", 'f', "1"}, {src + "/abs-evil", 'f', "boom"}}, src + "/abs-evil"},
      {"absolute-symlink",
       {{"r/sys", 'd', ""}, {"r/sys/out", 'l', src}, {"r/sys/out/planted", 'f', "x"}},
       src + "/planted"},
      // A symlink that stays inside is kept, but nothing is written through it.
      {"symlink",
       {{"r/sys", 'd', ""}, {"r/sys/out", 'l', ".."}, {"r/sys/out/planted", 'f', "x"}},
       src + "/planted"},
  };
  for (const Case& c : cases) {
    std::string tar = src + "/" + c.what + ".tar";
    writeTar(tar, c.entries);
    System sys;
    EXPECT_EQ(loadFsrootArchive(tar, &sys), braidInvalidArgument) << c.what;
    std::string msg = lastError();
    EXPECT_NE(msg.find(tar), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(c.planted)) << c.what << " planted " << c.planted;
    EXPECT_TRUE(tmp.empty()) << c.what << " left files in " << tmp.dir();
  }
  EXPECT_NE(std::string(lastError()).find("planted"), std::string::npos) << lastError();
  // A tidy archive without sys/ is refused too, and cleaned up.
  writeTar(src + "/nosys.tar", {{"top/proc/cpuinfo", 'f', "x"}});
  System sys;
  EXPECT_EQ(loadTopologyFile(src + "/nosys.tar", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("sys/"), std::string::npos) << lastError();
  EXPECT_TRUE(tmp.empty());
  fs::remove_all(src);
#endif
}

// Entries hwloc must never read through: a symlink to an absolute path (proc/cpuinfo ->
// /dev/zero would be read forever), a relative one leading out of the extraction directory
// (directly or through a chain of links), FIFOs, devices and hard links to nothing
// extracted before. Each refuses the archive with the entry named, and nothing is left behind.
TEST(FsrootArchive, UnsafeLinksAndSpecialFilesRefused) {
  REQUIRE_ARCHIVES();
#if !__has_include(<archive.h>)
  GTEST_SKIP() << "libarchive headers absent: cannot build the test archives";
#else
  ScopedTmpdir tmp;
  char tmpl[] = "/tmp/braid-archive-src-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string src = tmpl;
  struct Case {
    const char* what;
    std::vector<std::tuple<std::string, char, std::string>> entries;
    std::vector<std::string> said;  // what the error message must contain
  };
  const std::tuple<std::string, char, std::string> sys = {"r/sys/devices/x", 'f', "1"};
  std::vector<Case> cases = {
      {"abs-devzero",
       {sys, {"r/proc", 'd', ""}, {"r/proc/cpuinfo", 'l', "/dev/zero"}},
       {"'r/proc/cpuinfo'", "/dev/zero", "absolute"}},
      {"escaping-relative",
       {sys, {"r/sys/class/net/eth0", 'l', "../../../../../etc/passwd"}},
       {"'r/sys/class/net/eth0'", "outside"}},
      {"escaping-after-descent",
       {sys, {"r/sys/l", 'l', "a/../../../../x"}},
       {"'r/sys/l'", "outside"}},
      {"escaping-chain",
       {sys, {"r/up", 'l', ".."}, {"r/z", 'l', "up/.."}},
       {"'r/z'", "resolves outside"}},
      {"fifo", {sys, {"r/proc/fifo", 'p', ""}}, {"'r/proc/fifo'", "FIFO"}},
      {"chardev", {sys, {"r/proc/cpuinfo", 'c', ""}}, {"'r/proc/cpuinfo'", "character device"}},
      {"blockdev", {sys, {"r/sys/blk", 'b', ""}}, {"'r/sys/blk'", "block device"}},
      {"hardlink-nothing",
       {sys, {"r/sys/h", 'h', "r/sys/missing"}},
       {"'r/sys/h'", "hard link", "r/sys/missing"}},
      {"hardlink-to-symlink",
       {sys, {"r/sys/l", 'l', "devices/x"}, {"r/sys/h", 'h', "r/sys/l"}},
       {"'r/sys/h'", "hard link"}},
  };
  for (const Case& c : cases) {
    std::string tar = src + "/" + c.what + ".tar";
    writeTar(tar, c.entries);
    System out;
    EXPECT_EQ(loadFsrootArchive(tar, &out), braidInvalidArgument) << c.what;
    std::string msg = lastError();
    EXPECT_NE(msg.find(tar), std::string::npos) << msg;
    for (const std::string& s : c.said)
      EXPECT_NE(msg.find(s), std::string::npos) << c.what << ": no " << s << " in " << msg;
    EXPECT_TRUE(tmp.empty()) << c.what << " left files in " << tmp.dir();
  }
  // Relative links inside the directory (sysfs's ../../devices/...) and hard links to files
  // extracted before are kept: whatever detection then says, extraction does not refuse them.
  writeTar(src + "/ok.tar", {sys,
                             {"r/sys/bus/pci/devices/d", 'l', "../../../devices/x"},
                             {"r/sys/top", 'l', "../../r/sys/devices"},
                             {"r/sys/h", 'h', "r/sys/devices/x"}});
  System out;
  if (loadFsrootArchive(src + "/ok.tar", &out) != braidSuccess) {
    std::string msg = lastError();
    EXPECT_EQ(msg.find("refused"), std::string::npos) << msg;
  }
  EXPECT_TRUE(tmp.empty());
  fs::remove_all(src);
#endif
}

}  // namespace
}  // namespace braid::topo
