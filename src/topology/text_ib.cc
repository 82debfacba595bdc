// InfiniBand tools into the model: `ibstat`, `ibstatus`, `ibv_devinfo` and
// /sys/class/infiniband snapshots.

#include "topology/text_util.h"

namespace braid::topo {
using namespace text;  // NOLINT: the shared helpers of the text loaders

namespace {

LinkLayer layerOf(const std::string& s) {
  if (s.find("InfiniBand") != std::string::npos || s.find("Infiniband") != std::string::npos)
    return LinkLayer::kInfiniBand;
  if (s.find("Ethernet") != std::string::npos) return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

// "CA 'mlx5_0'" / "Infiniband device 'mlx5_0' port 1 status:" -> mlx5_0
std::string quotedName(const std::string& l) {
  size_t a = l.find('\''), b = l.find('\'', a + 1);
  if (a == std::string::npos || b == std::string::npos) return "";
  return l.substr(a + 1, b - a - 1);
}

// A text with no device line: the first line it has, and what was expected there.
braidResult_t noDeviceLine(const std::string& text, const std::string& name, const char* want) {
  std::vector<std::string> ls = splitLines(text);
  size_t i = 0;
  while (i < ls.size() && trim(ls[i]).empty()) ++i;
  if (i == ls.size())
    return fail(braidInvalidArgument,
                "%s: no text besides blank and shell prompt lines; expected %s", name.c_str(),
                want);
  return fail(braidInvalidArgument, "%s:%zu: '%s': expected %s", name.c_str(), i + 1,
              trim(ls[i]).substr(0, 120).c_str(), want);
}

// Noted after a port that is not active: its rate is not counted in the NIC's bandwidth.
constexpr char kNoBandwidth[] = " (not active: no bandwidth counted)";

// A rate line that gives no rate in (0, 10000] Gb/s: the port's rate stays unknown (0).
std::string badRate(const std::string& name, int lineNo, const std::string& l) {
  return name + ":" + std::to_string(lineNo) + ": '" + l.substr(0, 120) +
         "': not a rate in (0, 10000] Gb/sec; the port's rate is unknown (0)";
}

int nicNamed(System* sys, std::map<std::string, int>* byName, const std::string& name) {
  auto it = byName->find(name);
  if (it != byName->end()) return it->second;
  Nic nic;
  int idx = addNic(sys, nic).index;
  (*byName)[name] = idx;
  return idx;
}

}  // namespace

braidResult_t loadIbstat(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadIbstat: out is null");
  System sys;
  sys.source = name;
  std::map<std::string, int> nics;
  std::string ca, nodeGuid, caType, fw;
  Net* net = nullptr;
  int lineNo = 0;
  std::vector<std::string> down;
  std::vector<int> downNets;  // ports not Active: no bandwidth
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (startsWith(l, "CA '")) {
      ca = quotedName(l);
      if (ca.empty())
        return fail(braidInvalidArgument,
                    "%s:%d: '%s': a CA line without a quoted name, expected "
                    "CA 'NAME'",
                    name.c_str(), lineNo, l.substr(0, 120).c_str());
      nicNamed(&sys, &nics, ca);
      nodeGuid.clear(), caType.clear(), fw.clear();
      net = nullptr;
      continue;
    }
    size_t colon = l.find(':');
    bool indented = std::isspace(static_cast<unsigned char>(raw[0]));
    if (ca.empty() || colon == std::string::npos || !indented) {
      noteOnce(&sys, name + ":" + std::to_string(lineNo) +
                         ": not ibstat output, skipped: " + l.substr(0, 120));
      continue;
    }
    std::string k = trim(l.substr(0, colon)), v = trim(l.substr(colon + 1));
    if (startsWith(k, "Port ") && v.empty()) {
      long p = 0;
      if (!toLong(k.substr(5), 10, &p) || p < 0 || p > 255)
        return fail(braidInvalidArgument,
                    "%s:%d: '%s': bad port number, expected 'Port N:' with N in 0..255",
                    name.c_str(), lineNo, l.substr(0, 120).c_str());
      Net n;
      n.nic = nics[ca];
      n.name = ca;
      n.port = static_cast<int>(p);
      n.dev = static_cast<int>(sys.nets.size());
      n.guid = nodeGuid;
      if (!caType.empty()) n.extra.push_back({"ca_type", caType});
      if (!fw.empty()) n.extra.push_back({"fw_ver", fw});
      net = &sys.nets[addNet(&sys, n).index];
    } else if (k == "CA type") {
      caType = v;
    } else if (k == "Firmware version") {
      fw = v;
    } else if (k == "Node GUID") {
      nodeGuid = v;
    } else if (net != nullptr) {
      if (k == "State") {
        if (v != "Active") {
          down.push_back(ca + " port " + std::to_string(net->port) + ": " + v + kNoBandwidth);
          downNets.push_back(net->dev);
        }
      } else if (k == "Rate") {
        double r = 0;
        if (leadingDouble(v, &r) && plausibleNetGbps(r))
          net->speed_gbps = r;
        else
          sys.notes.push_back(badRate(name, lineNo, l));
      } else if (k == "Link layer") {
        net->link_layer = layerOf(v);
      } else if (k == "Port GUID") {
        net->extra.push_back({"port_guid", v});
        if (net->guid.empty()) net->guid = v;
      }
    }
  }
  if (sys.nics.empty()) return noDeviceLine(text, name, "\"CA 'NAME'\", the first line of ibstat");
  for (int d : downNets) sys.nets[d].speed_gbps = 0;
  for (const auto& d : down) sys.notes.push_back(d);
  sys.notes.push_back("ibstat gives no PCI or NUMA placement of the HCAs");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadIbstatus(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadIbstatus: out is null");
  System sys;
  sys.source = name;
  std::map<std::string, int> nics;
  Net* net = nullptr;
  int lineNo = 0;
  std::vector<int> downNets;  // ports not ACTIVE: no bandwidth
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (startsWith(l, "Infiniband device '")) {
      std::string dev = quotedName(l);
      size_t p = l.find(" port ");
      long port = -1;
      if (dev.empty() || p == std::string::npos ||
          !toLong(words(l.substr(p + 6)).empty() ? "" : words(l.substr(p + 6))[0], 10, &port) ||
          port < 0 || port > 255)
        return fail(braidInvalidArgument,
                    "%s:%d: '%s': expected \"Infiniband device 'NAME' port N status:\" with N in "
                    "0..255",
                    name.c_str(), lineNo, l.substr(0, 120).c_str());
      Net n;
      n.nic = nicNamed(&sys, &nics, dev);
      n.name = dev;
      n.port = static_cast<int>(port);
      n.dev = static_cast<int>(sys.nets.size());
      net = &sys.nets[addNet(&sys, n).index];
      continue;
    }
    size_t colon = l.find(':');
    if (net == nullptr || colon == std::string::npos) {
      noteOnce(&sys, name + ":" + std::to_string(lineNo) + ": not ibstatus output, skipped");
      continue;
    }
    std::string k = trim(l.substr(0, colon)), v = trim(l.substr(colon + 1));
    if (k == "rate") {
      double r = 0;
      if (leadingDouble(v, &r) && plausibleNetGbps(r))
        net->speed_gbps = r;
      else
        sys.notes.push_back(badRate(name, lineNo, l));
    } else if (k == "link_layer") {
      net->link_layer = layerOf(v);
    } else if (k == "state") {
      if (v.find("ACTIVE") == std::string::npos) {
        sys.notes.push_back(net->name + " port " + std::to_string(net->port) + ": " + v +
                            kNoBandwidth);
        downNets.push_back(net->dev);
      }
    } else if (k == "default gid") {
      // fe80:0000:0000:0000:0015:5dff:fd34:11eb -> port GUID 0x00155dfffd3411eb
      std::string hex;
      for (char c : v)
        if (c != ':') hex += c;
      if (hex.size() == 32) net->guid = "0x" + hex.substr(16);
      net->extra.push_back({"gid", v});
    }
  }
  if (sys.nics.empty())
    return noDeviceLine(text, name,
                        "\"Infiniband device 'NAME' port N status:\", the first line of ibstatus");
  for (int d : downNets) sys.nets[d].speed_gbps = 0;
  sys.notes.push_back("ibstatus gives no PCI or NUMA placement of the HCAs");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

// ibv_devinfo prints "hca_id:\tNAME", the device's "key: value" lines, then per port
// "port:\tN" and the port's lines; -v adds active_width ("4X (2)") and active_speed
// ("50.0 Gbps (64)"), whose product is the port's rate.
braidResult_t loadIbvDevinfo(const std::string& text, const std::string& name, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadIbvDevinfo: out is null");
  System sys;
  sys.source = name;
  std::map<std::string, int> nics;
  std::string hca, nodeGuid, fw;
  Net* net = nullptr;
  double width = 0, speed = 0;
  bool portDown = false;  // a port not PORT_ACTIVE counts no bandwidth
  int lineNo = 0, skipped = 0, firstSkipped = 0;
  std::vector<std::string> down;
  auto finishPort = [&]() {
    if (net != nullptr && !portDown && width > 0 && speed > 0 && plausibleNetGbps(width * speed))
      net->speed_gbps = width * speed;
    width = speed = 0;
    portDown = false;
  };
  for (const std::string& raw : splitLines(text)) {
    ++lineNo;
    std::string l = trim(raw);
    if (l.empty()) continue;
    size_t colon = l.find(':');
    std::string k = colon == std::string::npos ? "" : trim(l.substr(0, colon));
    std::string v = colon == std::string::npos ? "" : trim(l.substr(colon + 1));
    if (k == "hca_id") {
      finishPort();
      auto w = words(v);
      if (w.size() != 1)
        return fail(braidInvalidArgument, "%s:%d: '%s': expected 'hca_id: DEVICE' (ibv_devinfo)",
                    name.c_str(), lineNo, l.substr(0, 120).c_str());
      hca = w[0];
      nicNamed(&sys, &nics, hca);
      nodeGuid.clear(), fw.clear();
      net = nullptr;
      continue;
    }
    if (hca.empty()) {
      if (l == "No IB devices found")
        return fail(braidInvalidArgument, "%s:%d: ibv_devinfo found no RDMA device", name.c_str(),
                    lineNo);
      return fail(braidInvalidArgument,
                  "%s:%d: '%s': expected 'hca_id: DEVICE', the first line of ibv_devinfo",
                  name.c_str(), lineNo, l.substr(0, 120).c_str());
    }
    // Lines of a device are indented "key: value"; anything else ends its output.
    if (colon == std::string::npos || k.empty() ||
        !std::isspace(static_cast<unsigned char>(raw[0]))) {
      if (skipped++ == 0) firstSkipped = lineNo;
      continue;
    }
    if (k == "port") {
      finishPort();
      long p = 0;
      if (!toLong(v, 10, &p) || p < 0 || p > 255)
        return fail(braidInvalidArgument, "%s:%d: '%s': expected 'port: N' with N in 0..255",
                    name.c_str(), lineNo, l.substr(0, 120).c_str());
      Net n;
      n.nic = nics[hca];
      n.name = hca;
      n.port = static_cast<int>(p);
      n.dev = static_cast<int>(sys.nets.size());
      n.guid = nodeGuid;
      if (!fw.empty()) n.extra.push_back({"fw_ver", fw});
      net = &sys.nets[addNet(&sys, n).index];
    } else if (k == "fw_ver") {
      fw = v;
    } else if (k == "node_guid") {
      // 0c42:a103:0065:ab6c -> 0x0c42a1030065ab6c, as ibstat writes it
      std::string hex;
      for (char c : v)
        if (c != ':') hex += c;
      nodeGuid = hex.size() == 16 ? "0x" + hex : v;
    } else if (net != nullptr) {
      if (k == "state") {
        if (v.find("PORT_ACTIVE") == std::string::npos) {
          down.push_back(hca + " port " + std::to_string(net->port) + ": " + v + kNoBandwidth);
          portDown = true;
        }
      } else if (k == "link_layer") {
        net->link_layer = layerOf(v);
      } else if (k == "active_width") {
        double x = 0;
        if (leadingDouble(v, &x) && x >= 1 && x <= 32) width = x;
      } else if (k == "active_speed") {
        double g = 0;
        if (leadingDouble(v, &g) && g > 0) speed = g;
      }
    }
  }
  finishPort();
  if (sys.nics.empty())
    return fail(braidInvalidArgument, "%s: no 'hca_id:' line (ibv_devinfo output)", name.c_str());
  for (const auto& d : down) sys.notes.push_back(d);
  if (skipped)
    sys.notes.push_back(name + ":" + std::to_string(firstSkipped) + ": " + std::to_string(skipped) +
                        " line(s) not of ibv_devinfo skipped");
  bool rated = false;
  for (const Net& n : sys.nets) rated |= n.speed_gbps > 0;
  if (!rated && !sys.nets.empty())
    sys.notes.push_back("ibv_devinfo without -v gives no port rate (active_width, active_speed)");
  sys.notes.push_back("ibv_devinfo gives no PCI or NUMA placement of the HCAs");
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

braidResult_t loadSysfsInfinibandDir(const std::string& dir, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadSysfsInfinibandDir: out is null");
  namespace fs = std::filesystem;
  std::error_code ec;
  bool looks = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (fs::is_directory(it->path() / "ports", ec)) looks = true;
  if (!looks)
    return fail(braidInvalidArgument,
                "%s: a directory, but not a /sys/class/infiniband snapshot (no DEV/ports/); "
                "topology files are NCCL or hwloc XML or tool output",
                dir.c_str());
  System sys;
  sys.source = dir;
  int count = 0;
  BRAID_TRY(detectIbFromSysfs(dir, &sys, &count));
  if (count == 0)
    return fail(braidInvalidArgument, "%s: no RDMA device with ports found", dir.c_str());
  connectSystem(&sys);
  *out = std::move(sys);
  return braidSuccess;
}

}  // namespace braid::topo
