#include "tuning/table.h"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace braid::tuning {

namespace {
bool collectiveByName(const std::string& name, Collective* out) {
  for (int c = 0; c < kNumCollectives; ++c)
    if (!strcasecmp(name.c_str(), collectiveName(static_cast<Collective>(c)))) {
      *out = static_cast<Collective>(c);
      return true;
    }
  return false;
}
}  // namespace

const MeasuredEntry* MeasuredTable::lookup(Collective coll, size_t bytes) const {
  const MeasuredEntry* best = nullptr;
  double bestRatio = 0;
  for (const MeasuredEntry& e : entries) {
    if (e.coll != coll) continue;
    const double ratio = std::fabs(std::log2((bytes + 1.0) / (e.bytes + 1.0)));
    if (ratio <= 1.0 && (!best || ratio < bestRatio)) {
      best = &e;
      bestRatio = ratio;
    }
  }
  return best;
}

std::string MeasuredTable::encode() const {
  std::string s;
  for (const MeasuredEntry& e : entries)
    s += std::string(collectiveName(e.coll)) + " " + std::to_string(e.bytes) + " " + e.best + ";";
  return s;
}

bool MeasuredTable::decode(const std::string& text, MeasuredTable* out) {
  out->entries.clear();
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    std::istringstream fields(item);
    std::string coll, best;
    MeasuredEntry e;
    if (!(fields >> coll >> e.bytes >> best) || !collectiveByName(coll, &e.coll)) return false;
    e.best = best;
    out->entries.push_back(e);
  }
  return true;
}

braidResult_t loadMeasuredTable(const std::string& path, int nranks, MeasuredTable* out) {
  std::ifstream in(path);
  if (!in)
    return fail(braidSystemError, "BRAID_TUNE_TABLE=\"%s\": cannot read: %s", path.c_str(),
                strerror(errno));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return fail(braidInvalidArgument, "BRAID_TUNE_TABLE=\"%s\": not JSON: %s", path.c_str(),
                e.what());
  }
  if (!doc.is_array())
    return fail(braidInvalidArgument,
                "BRAID_TUNE_TABLE=\"%s\": expected braid-tune --json's array of rows",
                path.c_str());
  out->entries.clear();
  size_t row = 0;
  for (const nlohmann::json& r : doc) {
    ++row;
    if (!r.is_object() || !r.contains("collective") || !r["collective"].is_string() ||
        !r.contains("bytes") || !r["bytes"].is_number_unsigned() || !r.contains("ranks") ||
        !r["ranks"].is_number_integer() || !r.contains("best") || !r["best"].is_string())
      return fail(braidInvalidArgument,
                  "BRAID_TUNE_TABLE=\"%s\": row %zu lacks collective, bytes, ranks or best",
                  path.c_str(), row);
    if (r["ranks"].get<int>() != nranks) continue;
    MeasuredEntry e;
    const std::string coll = r["collective"].get<std::string>();
    if (!collectiveByName(coll, &e.coll))
      return fail(braidInvalidArgument,
                  "BRAID_TUNE_TABLE=\"%s\": row %zu: unknown collective \"%s\"", path.c_str(), row,
                  coll.c_str());
    e.bytes = r["bytes"].get<size_t>();
    e.best = r["best"].get<std::string>();
    if (e.best.empty()) continue;  // nothing could run that size
    if (!findAlgorithm(e.coll, e.best))
      return fail(braidInvalidArgument,
                  "BRAID_TUNE_TABLE=\"%s\": row %zu: %s has no algorithm \"%s\"", path.c_str(), row,
                  coll.c_str(), e.best.c_str());
    out->entries.push_back(e);
  }
  if (out->entries.empty())
    return fail(braidInvalidArgument,
                "BRAID_TUNE_TABLE=\"%s\": no row was measured on %d ranks (run braid-tune on a job "
                "of this size)",
                path.c_str(), nranks);
  return braidSuccess;
}

}  // namespace braid::tuning
