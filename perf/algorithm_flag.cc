// The -A flag of the perf binaries; see algorithm_flag.h.
#include "algorithm_flag.h"

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::perf {
namespace {

// The names -A accepts for this binary's collective, in table order.
std::vector<std::string> AlgorithmNames(const Collective& coll) {
  std::vector<std::string> names;
  if (!coll.has_algorithms) return names;
  int count = 0;
  if (braidListAlgorithms(coll.collective, nullptr, 0, &count) != braidSuccess) return names;
  std::vector<const char*> raw(static_cast<size_t>(count));
  braidListAlgorithms(coll.collective, raw.data(), count, &count);
  for (int i = 0; i < count && i < static_cast<int>(raw.size()); ++i) names.push_back(raw[i]);
  return names;
}

// braidrun and mpirun start every process with the same flags; one of them speaks for -A
// list (before any communicator exists, rank is known only from the environment).
bool FirstProcess() {
  for (const char* var : {"BRAID_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* v = getenv(var);
    if (v != nullptr && *v != '\0' && strcmp(v, "0") != 0) return false;
  }
  return true;
}

}  // namespace

// -A list prints and returns 0; an -A name no algorithm answers to exits with status 2;
// a known one is respelled as the table spells it (names match case-insensitively).
int CheckAlgorithmFlag(Options* opts, const Collective& coll) {
  const Options& o = *opts;
  if (o.algorithm.empty() || o.algorithm == "auto") return -1;
  const std::vector<std::string> names = AlgorithmNames(coll);
  if (o.algorithm == "list") {
    if (!coll.has_algorithms && FirstProcess()) {
      fprintf(stderr,
              "%s: %s runs grouped braidSend/braidRecv, which no algorithm of the table "
              "implements: there is nothing to list\n",
              o.prog, coll.name);
    }
    if (FirstProcess()) {
      for (const std::string& name : names) printf("%s\n", name.c_str());
    }
    return 0;
  }
  if (!coll.has_algorithms) {
    UsageError(o, "-A (--algorithm) " + o.algorithm + ": " + coll.name +
                      " runs grouped braidSend/braidRecv, which no algorithm implements; "
                      "-A applies to the collective binaries only");
  }
  for (const std::string& name : names) {
    if (strcasecmp(name.c_str(), o.algorithm.c_str()) == 0) {
      opts->algorithm = name;
      return -1;
    }
  }
  std::string known;
  for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
  UsageError(o, "-A (--algorithm): no " + std::string(coll.collective) + " algorithm named '" +
                    o.algorithm + "' (known: " + (known.empty() ? "none" : known) +
                    "; -A list prints them)");
}

}  // namespace braid::perf
