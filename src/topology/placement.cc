#include "topology/placement.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/config.h"
#include "base/error.h"

namespace braid::topo {

bool parseCpuList(const std::string& text, std::vector<int>* cpus) {
  cpus->clear();
  std::string t = text;
  while (!t.empty() && isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return true;
  std::stringstream in(t);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    if (end == part.c_str() || lo < 0) return false;
    long hi = lo;
    if (*end == '-') {
      const char* h = end + 1;
      hi = std::strtol(h, &end, 10);
      if (end == h || hi < lo) return false;
    }
    if (*end != '\0' || hi > (1 << 20)) return false;
    for (long c = lo; c <= hi; ++c) cpus->push_back(static_cast<int>(c));
  }
  return true;
}

int numaNodeOfCpus(const std::vector<int>& cpus, const std::vector<std::vector<int>>& nodeCpus) {
  int found = -1;
  for (int cpu : cpus) {
    int node = -1;
    for (size_t k = 0; k < nodeCpus.size() && node < 0; ++k)
      if (std::find(nodeCpus[k].begin(), nodeCpus[k].end(), cpu) != nodeCpus[k].end())
        node = static_cast<int>(k);
    if (node < 0 || (found >= 0 && node != found)) return -1;
    found = node;
  }
  return found;
}

int currentNumaNode(const std::string& fsroot) {
  const std::string dir =
      (fsroot.empty() || fsroot == "/" ? std::string() : fsroot) + "/sys/devices/system/node";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  std::vector<std::vector<int>> nodeCpus;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("node", 0) != 0 || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), [](char c) { return isdigit(c); }))
      continue;
    const size_t id = std::strtoul(name.c_str() + 4, nullptr, 10);
    if (id > 4096) continue;
    std::ifstream f(dir + "/" + name + "/cpulist");
    std::string line;
    std::vector<int> cpus;
    if (!f || !std::getline(f, line) || !parseCpuList(line, &cpus)) continue;
    if (nodeCpus.size() <= id) nodeCpus.resize(id + 1);
    nodeCpus[id] = std::move(cpus);
  }
  closedir(d);
  if (nodeCpus.empty()) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  return numaNodeOfCpus(mine, nodeCpus);
}

std::vector<int> commRing(const std::vector<int>& hostOf, const std::vector<int>& numaOf) {
  const int n = static_cast<int>(hostOf.size());
  // Groups numbered by first appearance: hosts, and (host, NUMA node) pairs. Hash maps, so
  // that braid-sim's millions of ranks stay linear.
  std::vector<int> hostRank(n), groupRank(n);
  std::unordered_map<int, int> hosts;
  std::map<std::pair<int, int>, int> groups;
  for (int r = 0; r < n; ++r) {
    const int numa = r < static_cast<int>(numaOf.size()) ? numaOf[r] : -1;
    hostRank[r] = hosts.emplace(hostOf[r], static_cast<int>(hosts.size())).first->second;
    groupRank[r] = groups.emplace(std::make_pair(hostOf[r], numa), static_cast<int>(groups.size()))
                       .first->second;
  }
  std::vector<int> ring(n);
  for (int r = 0; r < n; ++r) ring[r] = r;
  std::stable_sort(ring.begin(), ring.end(), [&](int a, int b) {
    if (hostRank[a] != hostRank[b]) return hostRank[a] < hostRank[b];
    return groupRank[a] < groupRank[b];
  });
  return ring;
}

braidResult_t parseRingSpec(const std::string& spec, int nranks, std::vector<int>* ring) {
  ring->clear();
  // As the user set it: NCCL_RINGS where only NCCL's name was.
  const std::string var = settingVar("BRAID_RING");
  std::vector<bool> seen(static_cast<size_t>(std::max(nranks, 0)), false);
  std::set<long> listed;  // every rank named, beyond the communicator too
  size_t i = 0;
  while (i < spec.size()) {
    const char c = spec[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (!isdigit(static_cast<unsigned char>(c)))
      return fail(braidInvalidArgument,
                  "%s=\"%s\": '%c' at offset %zu is not a rank (expected ranks "
                  "separated by spaces or commas, e.g. \"0 2 1 3\")",
                  var.c_str(), spec.c_str(), c, i);
    size_t j = i;
    long v = 0;
    while (j < spec.size() && isdigit(static_cast<unsigned char>(spec[j])) && v <= (1L << 30))
      v = v * 10 + (spec[j++] - '0');
    if (j < spec.size() && isdigit(static_cast<unsigned char>(spec[j])))
      return fail(braidInvalidArgument, "%s=\"%s\": rank at offset %zu is too large", var.c_str(),
                  spec.c_str(), i);
    i = j;
    if (!listed.insert(v).second || (v < nranks && seen[v]))
      return fail(braidInvalidArgument, "%s=\"%s\": rank %ld appears twice", var.c_str(),
                  spec.c_str(), v);
    if (v >= nranks) continue;
    seen[v] = true;
    ring->push_back(static_cast<int>(v));
  }
  for (int r = 0; r < nranks; ++r)
    if (!seen[r])
      return fail(braidInvalidArgument,
                  "%s=\"%s\": rank %d of this %d-rank communicator is missing; the "
                  "ring must list every rank once",
                  var.c_str(), spec.c_str(), r, nranks);
  return braidSuccess;
}

}  // namespace braid::topo
