// Tool outputs as a user pastes them from a terminal (issue 37): fixtures written by hand from
// the formats' documentation under tests/topology/text_fixtures/, one test per variant checking
// the counts of GPUs, NICs and NUMA nodes and the path class of every GPU pair and GPU-NIC pair
// the format gives; the pasted nvidia-smi text (prompt, CR LF, tabs, GPU NUMA ID, a topo -p2p
// section and a trailing prompt) against the clean one; refusals naming line, text and what
// was expected.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "topology/text_util.h"
#include "topology/topology.h"

namespace braid::topo {
namespace {

const PathClass LOC = PathClass::kLoc, NVL = PathClass::kNvl, PIX = PathClass::kPix,
                PXB = PathClass::kPxb, PHB = PathClass::kPhb, NODE = PathClass::kNode,
                SYS = PathClass::kSys;

std::string fixture(const std::string& file) {
  return std::string(BRAID_SOURCE_DIR) + "/tests/topology/text_fixtures/" + file;
}

System load(const std::string& file) {
  System sys;
  EXPECT_EQ(loadTopologyFile(fixture(file), &sys), braidSuccess) << file << ": " << lastError();
  return sys;
}

std::vector<int> numaIds(const System& sys) {
  std::vector<int> ids;
  for (const Cpu& c : sys.cpus) ids.push_back(c.numaid);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool hasNote(const System& sys, const std::string& part) {
  for (const auto& n : sys.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

void expectClasses(const System& sys, const std::vector<std::vector<PathClass>>& gg,
                   const std::vector<std::vector<PathClass>>& gn) {
  Paths p = computePaths(sys);
  ASSERT_EQ(p.gpu_gpu.size(), gg.size());
  for (size_t a = 0; a < gg.size(); ++a) {
    for (size_t b = 0; b < gg.size(); ++b)
      EXPECT_EQ(pathClassName(p.gpu_gpu[a][b].cls), std::string(pathClassName(gg[a][b])))
          << "GPU" << a << "-GPU" << b;
    for (size_t k = 0; k < gn[a].size(); ++k)
      EXPECT_EQ(pathClassName(p.gpu_nic[a][k].cls), std::string(pathClassName(gn[a][k])))
          << "GPU" << a << "-NIC" << k;
  }
}

// smi_topo_m_*.txt "A": NUMA 0 holds GPU0 and NIC0 on one PCIe switch (PIX), GPU1 on a
// sibling switch (PXB to NIC0, NV2 to GPU0) and NIC1 behind another host bridge (NODE); NUMA 1
// holds GPU2 under its CPU and GPU3 with NIC2 on a switch.
void expectMachineA(const System& sys) {
  ASSERT_EQ(sys.gpus.size(), 4u);
  ASSERT_EQ(sys.nics.size(), 3u);
  EXPECT_EQ(numaIds(sys), (std::vector<int>{0, 1}));
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(sys.nets[sys.nics[k].nets[0]].name, "mlx5_" + std::to_string(k));
  EXPECT_EQ(nvlinkCount(sys, 0, 1), 2);
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_numa, (std::vector<int>{0, 0, 1, 1}));
  expectClasses(
      sys, {{LOC, NVL, SYS, SYS}, {NVL, LOC, SYS, SYS}, {SYS, SYS, LOC, PHB}, {SYS, SYS, PHB, LOC}},
      {{PIX, NODE, SYS}, {PXB, NODE, SYS}, {SYS, SYS, PHB}, {SYS, SYS, PIX}});
  for (const auto& n : sys.notes) EXPECT_EQ(n.find("cannot reproduce"), std::string::npos) << n;
}

TEST(PastedText, SmiTopoClean) {
  System sys = load("smi_topo_m_clean.txt");
  expectMachineA(sys);
  EXPECT_TRUE(hasNote(sys, "2 PCIe host bridge(s) inferred from NODE and PHB"));
}

TEST(PastedText, SmiTopoPastedWithPromptCrlfTabsNumaIdAndP2p) {
  System sys = load("smi_topo_m_pasted.txt");
  expectMachineA(sys);
  // The topo -p2p r matrix after the prompt is noted by its header's line, not read.
  EXPECT_TRUE(hasNote(sys, "smi_topo_m_pasted.txt:28: a second matrix (topo -p2p)"));
}

// The acceptance check: the pasted text gives the topology of the clean one.
TEST(PastedText, PastedSmiTopoEqualsClean) {
  System clean = load("smi_topo_m_clean.txt"), pasted = load("smi_topo_m_pasted.txt");
  std::string a, b;
  ASSERT_EQ(dumpNcclTopoXml(clean, &a), braidSuccess) << lastError();
  ASSERT_EQ(dumpNcclTopoXml(pasted, &b), braidSuccess) << lastError();
  EXPECT_EQ(a, b);
  Paths pa = computePaths(clean), pb = computePaths(pasted);
  for (size_t i = 0; i < pa.gpu_gpu.size(); ++i) {
    for (size_t j = 0; j < pa.gpu_gpu.size(); ++j) {
      EXPECT_EQ(pa.gpu_gpu[i][j].cls, pb.gpu_gpu[i][j].cls);
      EXPECT_EQ(pa.gpu_gpu[i][j].bw_gbs, pb.gpu_gpu[i][j].bw_gbs);
    }
    for (size_t k = 0; k < pa.gpu_nic[i].size(); ++k)
      EXPECT_EQ(pa.gpu_nic[i][k].cls, pb.gpu_nic[i][k].cls);
  }
  EXPECT_EQ(pa.gpu_numa, pb.gpu_numa);
  // The printed model past its first line (the source) up to the notes.
  auto body = [](const std::string& t) {
    size_t b = t.find('\n');
    return t.substr(b, t.find("\nnote:") - b);
  };
  EXPECT_EQ(body(toText(clean)), body(toText(pasted)));
}

// The bare command line (no prompt) before the output is passed over too.
TEST(PastedText, SmiTopoAfterABareCommandLine) {
  std::ifstream in(fixture("smi_topo_m_clean.txt"), std::ios::binary);
  std::stringstream clean;
  clean << in.rdbuf();
  System a, b;
  ASSERT_EQ(loadTextTopology(clean.str(), "clean", &a), braidSuccess) << lastError();
  ASSERT_EQ(loadTextTopology("sudo nvidia-smi topo -m\n" + clean.str(), "bare", &b), braidSuccess)
      << lastError();
  std::string xa, xb;
  ASSERT_EQ(dumpNcclTopoXml(a, &xa), braidSuccess);
  ASSERT_EQ(dumpNcclTopoXml(b, &xb), braidSuccess);
  EXPECT_EQ(xa, xb);
}

// The model of a pasted matrix dumps as NCCL XML that loads again with its host bridges, so
// NODE and PHB survive the round trip (GPUs and NICs found again by dev and name).
TEST(PastedText, SmiTopoDumpLoadsAgainWithNode) {
  System sys = load("smi_topo_m_pasted.txt");
  std::string xml;
  ASSERT_EQ(dumpNcclTopoXml(sys, &xml), braidSuccess) << lastError();
  System re;
  ASSERT_EQ(loadNcclTopoXmlString(xml, "dump", &re), braidSuccess) << lastError();
  ASSERT_EQ(re.gpus.size(), 4u);
  ASSERT_EQ(re.nics.size(), 3u);
  EXPECT_EQ(numaIds(re), (std::vector<int>{0, 1}));
  auto gpu = [&](int dev) {
    for (size_t i = 0; i < re.gpus.size(); ++i)
      if (re.gpus[i].dev == dev) return static_cast<int>(i);
    return -1;
  };
  auto nic = [&](const std::string& name) {
    for (size_t k = 0; k < re.nics.size(); ++k)
      if (re.nets[re.nics[k].nets[0]].name == name) return static_cast<int>(k);
    return -1;
  };
  Paths p = computePaths(re);
  const std::vector<std::vector<PathClass>> gn = {
      {PIX, NODE, SYS}, {PXB, NODE, SYS}, {SYS, SYS, PHB}, {SYS, SYS, PIX}};
  for (int g = 0; g < 4; ++g)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(pathClassName(p.gpu_nic[gpu(g)][nic("mlx5_" + std::to_string(k))].cls),
                std::string(pathClassName(gn[g][k])))
          << "GPU" << g << "-mlx5_" << k;
  EXPECT_EQ(p.gpu_gpu[gpu(2)][gpu(3)].cls, PHB);
  EXPECT_EQ(p.gpu_gpu[gpu(0)][gpu(1)].cls, NVL);
}

// 8 GPUs, NV18 between every pair (one NVSwitch), NIC columns named mlx5_N (no legend), each
// NIC PXB to its two GPUs, NODE to the other two of its NUMA node, SYS to the rest.
TEST(PastedText, SmiTopoNvswitchNamedNicColumns) {
  System sys = load("smi_topo_m_nvswitch_named_nics.txt");
  ASSERT_EQ(sys.gpus.size(), 8u);
  ASSERT_EQ(sys.nics.size(), 4u);
  EXPECT_EQ(sys.nvswitches.size(), 1u);
  EXPECT_EQ(numaIds(sys), (std::vector<int>{0, 1}));
  std::vector<std::vector<PathClass>> gg(8, std::vector<PathClass>(8, NVL)), gn(8);
  for (int g = 0; g < 8; ++g) {
    gg[g][g] = LOC;
    for (int k = 0; k < 4; ++k) gn[g].push_back(g / 4 != k / 2 ? SYS : g / 2 == k ? PXB : NODE);
  }
  expectClasses(sys, gg, gn);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(sys.nets[sys.nics[k].nets[0]].name, "mlx5_" + std::to_string(k));
  EXPECT_EQ(nvlinkCount(sys, 0, 7), 18);
}

// topo -p2p r alone after a bracketed prompt: GPUs only, the OK and not-OK pairs counted.
TEST(PastedText, SmiP2pReadMatrix) {
  System sys = load("smi_topo_p2p_r.txt");
  EXPECT_EQ(sys.gpus.size(), 3u);
  EXPECT_EQ(sys.nics.size(), 0u);
  EXPECT_EQ(sys.cpus.size(), 0u);
  EXPECT_TRUE(hasNote(sys, "(4 OK, 2 not OK)"));
}

// ibstat with a root prompt before and after, CR LF: three CAs, one port each.
TEST(PastedText, IbstatPasted) {
  System sys = load("ibstat_pasted.txt");
  EXPECT_EQ(sys.gpus.size(), 0u);
  EXPECT_EQ(sys.cpus.size(), 0u);  // ibstat says nothing of NUMA
  ASSERT_EQ(sys.nics.size(), 3u);
  ASSERT_EQ(sys.nets.size(), 3u);
  const double gbps[] = {400, 400, 0};  // mlx5_2 is Down: its 100 Gb/s not counted
  const LinkLayer layer[] = {LinkLayer::kInfiniBand, LinkLayer::kInfiniBand, LinkLayer::kEthernet};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sys.nets[i].name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(sys.nets[i].speed_gbps, gbps[i]);
    EXPECT_EQ(sys.nets[i].link_layer, layer[i]);
  }
  EXPECT_EQ(sys.nets[1].guid, "0x0002c90300aa0020");
  EXPECT_TRUE(hasNote(sys, "mlx5_2 port 1: Down (not active: no bandwidth counted)"));
  for (const auto& n : sys.notes) EXPECT_EQ(n.find("skipped"), std::string::npos) << n;
}

// ibv_devinfo -v pasted: rates from active_width x active_speed, a down port, a later command.
TEST(PastedText, IbvDevinfoVerbosePasted) {
  EXPECT_EQ(sniffTextTopology("$ ibv_devinfo\nhca_id:\tmlx5_0\n"), "ibv_devinfo");
  System sys = load("ibv_devinfo_v_pasted.txt");
  EXPECT_EQ(sys.gpus.size(), 0u);
  EXPECT_EQ(sys.cpus.size(), 0u);
  ASSERT_EQ(sys.nics.size(), 3u);
  ASSERT_EQ(sys.nets.size(), 3u);
  const double gbps[] = {400, 200, 0};  // mlx5_2 is PORT_DOWN: its rate not counted
  const LinkLayer layer[] = {LinkLayer::kInfiniBand, LinkLayer::kInfiniBand, LinkLayer::kEthernet};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sys.nets[i].name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(sys.nets[i].port, 1);
    EXPECT_EQ(sys.nets[i].speed_gbps, gbps[i]);
    EXPECT_EQ(sys.nets[i].link_layer, layer[i]);
  }
  EXPECT_EQ(sys.nets[0].guid, "0x0002c90300aa0010");
  EXPECT_TRUE(hasNote(sys, "mlx5_2 port 1: PORT_DOWN (1) (not active: no bandwidth counted)"));
  EXPECT_TRUE(hasNote(sys, "ibv_devinfo_v_pasted.txt:81: 1 line(s) not of ibv_devinfo skipped"));
}

// Plain ibv_devinfo: no rates (noted), link layers read.
TEST(PastedText, IbvDevinfoPlain) {
  System sys = load("ibv_devinfo.txt");
  EXPECT_EQ(sys.gpus.size(), 0u);
  EXPECT_EQ(sys.cpus.size(), 0u);
  ASSERT_EQ(sys.nics.size(), 2u);
  ASSERT_EQ(sys.nets.size(), 2u);
  EXPECT_EQ(sys.nets[0].link_layer, LinkLayer::kInfiniBand);
  EXPECT_EQ(sys.nets[1].link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(sys.nets[0].speed_gbps, 0);
  EXPECT_TRUE(hasNote(sys, "without -v gives no port rate"));
}

// lspci -tv, one root bus: GPU0 and a two-port NIC behind one PCIe switch, GPU1 on its own
// root port; an empty bridge and chipset devices ignored.
TEST(PastedText, LspciTreeOneRoot) {
  System sys = load("lspci_tv.txt");
  ASSERT_EQ(sys.gpus.size(), 2u);
  ASSERT_EQ(sys.nics.size(), 2u);
  EXPECT_EQ(sys.nvswitches.size(), 0u);
  EXPECT_EQ(sys.cpus.size(), 1u);
  ASSERT_EQ(sys.pcis.size(), 1u);
  EXPECT_EQ(sys.pcis[0].pci.busid, "0000:01:00.0");
  EXPECT_EQ(sys.gpus[0].pci.busid, "0000:03:00.0");
  EXPECT_EQ(sys.gpus[1].pci.busid, "0000:05:00.0");
  EXPECT_EQ(sys.nics[0].pci.busid, "0000:04:00.0");
  EXPECT_EQ(sys.nics[1].pci.busid, "0000:04:00.1");
  EXPECT_EQ(sys.gpus[0].sm, 90);
  expectClasses(sys, {{LOC, PHB}, {PHB, LOC}}, {{PIX, PIX}, {PHB, PHB}});
}

// lspci -tvnn with three root buses (an AMD host's host bridges), pasted with prompts and
// CR LF: devices on different roots are NODE apart.
TEST(PastedText, LspciTreeRootsPasted) {
  System sys = load("lspci_tvnn_roots_pasted.txt");
  ASSERT_EQ(sys.gpus.size(), 2u);
  ASSERT_EQ(sys.nics.size(), 1u);
  EXPECT_EQ(sys.cpus.size(), 1u);
  EXPECT_EQ(sys.gpus[0].pci.busid, "0000:c2:00.0");
  EXPECT_EQ(sys.gpus[1].pci.busid, "0000:01:00.0");
  EXPECT_EQ(sys.gpus[0].pci.device, 0x20b0);
  EXPECT_EQ(sys.nics[0].pci.busid, "0000:81:00.0");
  EXPECT_EQ(sys.nics[0].pci.vendor, 0x15b3);
  expectClasses(sys, {{LOC, NODE}, {NODE, LOC}}, {{NODE}, {NODE}});
  EXPECT_TRUE(hasNote(sys, "3 root buses read as PCIe host bridges"));
}

// Older lspci -tv without the domain ("[00]"), after "$ /sbin/lspci -tv": a VM's two GPUs and
// its network adapter straight on the root bus, PHB apart.
TEST(PastedText, LspciTreeOldRootWithoutDomain) {
  EXPECT_EQ(sniffTextTopology("-[00]-+-00.0  Intel Corporation 440FX\n"), "lspci-tree");
  System sys = load("lspci_t_old_no_domain.txt");
  ASSERT_EQ(sys.gpus.size(), 2u);
  ASSERT_EQ(sys.nics.size(), 1u);
  EXPECT_EQ(sys.cpus.size(), 1u);
  EXPECT_EQ(sys.pcis.size(), 0u);
  EXPECT_EQ(sys.gpus[0].pci.busid, "0000:00:04.0");
  EXPECT_EQ(sys.gpus[1].sm, 75);
  EXPECT_EQ(sys.nics[0].pci.busid, "0000:00:06.0");
  expectClasses(sys, {{LOC, PHB}, {PHB, LOC}}, {{PHB}, {PHB}});
}

// lspci -tv of an HGX board's corner: one GPU and two NVSwitches (device 22a3) behind one
// PCIe switch; the NVSwitches' NVLinks are not in lspci (noted).
TEST(PastedText, LspciTreeNvswitches) {
  System sys = load("lspci_tv_nvswitch.txt");
  ASSERT_EQ(sys.gpus.size(), 1u);
  EXPECT_EQ(sys.nics.size(), 0u);
  ASSERT_EQ(sys.nvswitches.size(), 2u);
  EXPECT_EQ(sys.nvswitches[0].pci.busid, "0000:04:00.0");
  EXPECT_EQ(sys.nvswitches[1].pci.busid, "0000:05:00.0");
  EXPECT_EQ(sys.cpus.size(), 1u);
  expectClasses(sys, {{LOC}}, {{}});
  EXPECT_TRUE(hasNote(sys, "2 NVSwitch PCI device(s)"));
}

TEST(PastedText, PromptLines) {
  for (const char* p :
       {"$ ibstat", "$", "# lspci -tv", "alice@node:~$ nvidia-smi topo -m",
        "root@node:/home/x# ibstat", "[bob@node3 ~]$ nvidia-smi topo -p2p r",
        "(venv) alice@node:~/x$ ", "PS C:\\Users\\a> nvidia-smi topo -m", "alice@node:~$"})
    EXPECT_TRUE(text::isPromptLine(p)) << p;
  for (const char* l :
       {"GPU0\t X \tNV2", "CA 'mlx5_0'", "-[0000:00]-+-00.0  Intel", "  NIC0: mlx5_0",
        "hca_id:\tmlx5_0", "\t\tState: Active", " \\-[0000:00]-+-00.0", "Legend:", "  X    = Self"})
    EXPECT_FALSE(text::isPromptLine(l)) << l;
}

std::string loadError(const std::string& text, const std::string& name) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  System sys;
  EXPECT_EQ(loadTopologyFile(path, &sys), braidInvalidArgument) << text;
  std::remove(path.c_str());
  return lastError();
}

// Text not understood: the line number, the line and what was expected; never "XML".
TEST(PastedText, RefusalsNameLineTextAndExpectation) {
  std::string e = loadError("alice@node:~$ cat notes.txt\r\nhello world\r\n", "notes.txt");
  EXPECT_NE(e.find("notes.txt:2: 'hello world': not a known topology format; expected NCCL or "
                   "hwloc XML"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("malformed"), std::string::npos) << e;
  e = loadError("alice@node:~$ nvidia-smi topo -m\n", "prompt.txt");
  EXPECT_NE(e.find("no text besides blank and shell prompt lines"), std::string::npos) << e;
  e = loadError(
      "$ nvidia-smi topo -m\n\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNVX\t0-7\n"
      "GPU1\tNV2\t X \t0-7\n",
      "cell.txt");
  EXPECT_NE(e.find("cell.txt:3: 'GPU0\t X \tNVX\t0-7': cell 2 (GPU1) is 'NVX', expected X, NV#"),
            std::string::npos)
      << e;
  e = loadError("\tGPU0\tGPU1\tCPU Affinity\nfoo bar\n", "row.txt");
  EXPECT_NE(e.find("row.txt:2: 'foo bar': expected the row of a device of the header at line 1"),
            std::string::npos)
      << e;
  e = loadError("-[0000:00]-+-00.0  Intel Corporation Device 09a2\n           +-zz.q  Broken\n",
                "tree.txt");
  EXPECT_NE(e.find("tree.txt:2: '+-zz.q  Broken': unexpected text in the tree; expected an "
                   "lspci -t tree"),
            std::string::npos)
      << e;
  System sys;
  EXPECT_EQ(loadIbstat("$ ibstat\nibstat: command not found\n", "ib.txt", &sys),
            braidInvalidArgument);
  EXPECT_NE(std::string(lastError())
                .find("ib.txt:2: 'ibstat: command not found': expected \"CA 'NAME'\""),
            std::string::npos)
      << lastError();
  EXPECT_EQ(loadIbvDevinfo("garbage\nhca_id:\tmlx5_0\n", "dev.txt", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("dev.txt:1: 'garbage': expected 'hca_id: DEVICE'"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(loadIbvDevinfo("hca_id:\tmlx5_0\n\t\tport:\tone\n", "dev.txt", &sys),
            braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("dev.txt:2: 'port:\tone': expected 'port: N'"),
            std::string::npos)
      << lastError();
}

// Every hand-written fixture cut at every line and mutated with the characters the readers
// look for (tree signs, brackets, CR): each load succeeds or is refused, never crashes, and
// a refusal names its file.
TEST(PastedText, MutatedFixturesNeverCrash) {
  std::mt19937 rng(37);
  int runs = 0, refused = 0;
  auto replay = [&](const std::string& text) {
    System sys;
    ++runs;
    if (loadTextTopology(text, "mutated", &sys) == braidSuccess) {
      computePaths(sys);
      toJson(sys);
      toText(sys);
      std::string xml;
      dumpNcclTopoXml(sys, &xml);
    } else {
      ++refused;
      EXPECT_EQ(std::string(lastError()).find("mutated"), 0u) << lastError();
    }
  };
  const char alphabet[] = "X NV2PIXNODE:\t\r\n0123456789abf'[]-+\\|.@$#";
  for (const auto& e : std::filesystem::directory_iterator(std::string(BRAID_SOURCE_DIR) +
                                                           "/tests/topology/text_fixtures")) {
    if (e.path().extension() != ".txt") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (size_t pos = text.find('\n'); pos != std::string::npos; pos = text.find('\n', pos + 1))
      replay(text.substr(0, pos + 1));
    for (int m = 0; m < 150; ++m) {
      std::string t = text;
      int edits = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < edits && !t.empty(); ++k) {
        size_t pos = rng() % t.size();
        char c = alphabet[rng() % (sizeof(alphabet) - 1)];
        switch (rng() % 3) {
          case 0:
            t[pos] = c;
            break;
          case 1:
            t.erase(pos, 1 + rng() % 12);
            break;
          default:
            t.insert(pos, std::string(1 + rng() % 3, c));
        }
      }
      replay(t);
    }
  }
  EXPECT_GT(runs, 1500);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace braid::topo
