// The table and JSON rows of the perf binaries; see report.h.
#include "report.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "verifiable.h"

namespace braid::perf {
namespace {

// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char esc[8];
      snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A JSON number; JSON has no NaN or infinity, so those become null.
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  snprintf(text, sizeof(text), "%.9g", v);
  return text;
}

}  // namespace

std::string TimeString(double usec) {
  char text[32];
  if (usec >= 10000.0) {
    snprintf(text, sizeof(text), "%7.0f", usec);
  } else if (usec >= 100.0) {
    snprintf(text, sizeof(text), "%7.1f", usec);
  } else {
    snprintf(text, sizeof(text), "%7.2f", usec);
  }
  return text;
}

Report::Report(const Collective& coll, const Options& o, int nranks, FILE* json)
    : coll_(coll), o_(o), nranks_(nranks), json_(json) {}

void Report::PrintHeader() const {
  printf("#\n");
  printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
      "          \n",
      "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

void Report::BeginRow(size_t bytes, size_t count, braidDataType_t dtype, braidRedOp_t op,
                      int root) {
  const char* redop = coll_.uses_op ? OpName(op) : "none";
  const int root_column = coll_.uses_root ? root : -1;
  printf("%12zu  %12zu  %8s  %6s  %6i", bytes, count, TypeName(dtype), redop, root_column);
  fflush(stdout);
  const std::string algorithm = o_.forces_algorithm() ? o_.algorithm : "auto";
  row_ = "{\"collective\": " + JsonString(coll_.collective) +
         ", \"binary\": " + JsonString(coll_.name) + ", \"algorithm\": " + JsonString(algorithm) +
         ", \"size\": " + std::to_string(bytes) + ", \"count\": " + std::to_string(count) +
         ", \"type\": " + JsonString(TypeName(dtype)) + ", \"redop\": " + JsonString(redop) +
         ", \"root\": " + std::to_string(root_column) + ", \"nranks\": " + std::to_string(nranks_);
  results_ = 0;
}

void Report::AddResult(const Measurement& m) {
  const double usec = m.seconds * 1e6;
  if (m.wrong >= 0) {
    printf("  %7s  %6.2f  %6.2f  %5lld", TimeString(usec).c_str(), m.algbw, m.busbw,
           static_cast<long long>(m.wrong));
  } else {
    printf("  %7s  %6.2f  %6.2f  %5s", TimeString(usec).c_str(), m.algbw, m.busbw, "N/A");
  }
  fflush(stdout);
  row_ += std::string(results_ == 0 ? ", \"out_of_place\": " : ", \"in_place\": ") +
          "{\"time_us\": " + JsonNumber(usec) + ", \"algbw\": " + JsonNumber(m.algbw) +
          ", \"busbw\": " + JsonNumber(m.busbw) +
          ", \"wrong\": " + (m.wrong >= 0 ? std::to_string(m.wrong) : std::string("null")) + "}";
  ++results_;
}

void Report::AddNotApplicable() {
  printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  fflush(stdout);
  row_ += results_ == 0 ? ", \"out_of_place\": null" : ", \"in_place\": null";
  ++results_;
}

void Report::EndRow() {
  printf("\n");
  fflush(stdout);
  if (json_ != nullptr) {
    fprintf(json_, "%s}\n", row_.c_str());
    fflush(json_);
  }
}

}  // namespace braid::perf
