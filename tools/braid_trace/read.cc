// Reading the flight-recorder dumps. A dump is written one element per line (the format's
// contract, docs/trace.md) precisely so that a file cut off by a dying process, or corrupted on
// one line, can still be read: each line is parsed on its own, a bad one is reported with its
// file and number and passed over, and the reading goes on. Fields of the wrong type or
// missing take the format's default and are reported once per file and field.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <variant>

#include "trace.h"

namespace braid::trace {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = R"({"format":"braid-trace")";

// One element of a section, with the line it stood on (0: the file was read as a whole).
struct Element {
  int line = 0;
  json value;
};

// A dump as JSON pieces, before its fields are checked.
struct RawDump {
  bool isDump = false;  // line 1 was the format's
  bool cut = false;     // the file ends before the dump's closing '}'
  int64_t version = 0;
  Element header;
  std::map<std::string, std::vector<Element>> sections;  // "comms", "calls", "steps"
};

std::optional<json> parse(const std::string& text, std::string* why) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // The library's text names a position in our wrapped string; its reason is what helps.
    const std::string what = e.what();
    const size_t at = what.find(": ", what.find("column"));
    *why = at == std::string::npos ? what : what.substr(at + 2);
    return std::nullopt;
  }
}

std::string trim(std::string s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t b = 0;
  while (b < s.size() && space(s[b])) ++b;
  return s.substr(b);
}

std::string withoutTrailingComma(const std::string& s) {
  return !s.empty() && s.back() == ',' ? s.substr(0, s.size() - 1) : s;
}

// The line-by-line reader: a small state machine over the format's lines.
class LineReader {
 public:
  LineReader(const std::string& file, std::vector<Problem>& problems)
      : file_(file), problems_(problems) {}

  RawDump read(std::istream& in) {
    std::string line;
    while (std::getline(in, line)) {
      ++n_;
      line = trim(line);
      if (line.empty()) continue;
      if (!raw_.isDump) {
        if (!firstLine(line)) return raw_;
        continue;
      }
      if (closed_) {
        problem("text after the dump's closing '}' (ignored)");
        break;
      }
      lastBad_ = !(section_ ? sectionLine(line) : topLine(line));
    }
    finish();
    return raw_;
  }

 private:
  // A file of bad lines gives the first kMaxProblems of them and a count of the rest.
  static constexpr int kMaxProblems = 20;
  void problem(const std::string& what) {
    if (++problemCount_ <= kMaxProblems) problems_.push_back({file_, n_, what});
  }

  bool firstLine(const std::string& line) {
    std::string why;
    const auto head =
        line.rfind(kMagic, 0) == 0 ? parse(withoutTrailingComma(line) + "}", &why) : std::nullopt;
    if (!head) return false;  // not a dump: the caller decides whether to say so
    raw_.isDump = true;
    raw_.version = head->value("version", json()).is_number() ? head->value("version", 0) : 0;
    if (raw_.version != 1)
      problem("format version " + head->value("version", json()).dump() +
              ", this reader knows version 1 (read as version 1)");
    return true;
  }

  // Outside a section: "header":{...}, a section's opening "comms":[ or the closing }.
  bool topLine(const std::string& line) {
    if (line == "}") return closed_ = true;
    if (line.back() == '[') return openSection(line.substr(0, line.size() - 1));
    std::string body = withoutTrailingComma(line), why;
    std::optional<json> obj = parse("{" + body + "}", &why);
    if (!obj && !body.empty() &&
        body.back() == '}') {  // the last key and the closing brace on one line
      obj = parse("{" + body.substr(0, body.size() - 1) + "}", &why);
      closed_ = obj.has_value();
    }
    if (!obj) {
      problem(R"(expected "header":{...}, a section ("comms":[, "calls":[, "steps":[) or the )"
              "closing '}': " +
              why);
      return false;
    }
    for (auto& [key, value] : obj->items()) {
      if (key == "header") raw_.header = {n_, value};
      if (value.is_array() && isSection(key))
        for (json& e : value) raw_.sections[key].push_back({n_, e});
    }
    return true;
  }

  static bool isSection(const std::string& key) {
    return key == "comms" || key == "calls" || key == "steps";
  }

  bool openSection(const std::string& keyPart) {
    std::string why;
    const auto key = parse(withoutTrailingComma(trim(keyPart.substr(0, keyPart.rfind(':')))), &why);
    if (!key || !key->is_string() || keyPart.find(':') == std::string::npos) {
      problem("expected a section's opening such as \"calls\":[");
      return false;
    }
    section_ = key->get<std::string>();
    if (!isSection(*section_)) problem("unknown section \"" + *section_ + "\" (ignored)");
    return true;
  }

  // Inside a section: an element {...} (a comma after each but the last) or the closing ].
  bool sectionLine(const std::string& line) {
    if (line == "]" || line == "],") return closeSection();
    if (line.back() == '[') {  // the next section's opening: this one's closing was lost
      problem("the section \"" + *section_ + "\" is not closed before this line");
      openSection(line.substr(0, line.size() - 1));
      return false;
    }
    if (line == "]}") return closeSection() && (closed_ = true);
    std::string why;
    std::optional<json> e = parse(withoutTrailingComma(line), &why);
    if (!e || !e->is_object()) {
      problem("expected a \"" + *section_ + "\" element {...} or the section's closing ']': " +
              (e ? "found " + std::string(e->type_name()) : why));
      return false;
    }
    if (isSection(*section_)) raw_.sections[*section_].push_back({n_, *e});
    return true;
  }

  bool closeSection() {
    section_.reset();
    return true;
  }

  void finish() {
    if (problemCount_ > kMaxProblems)
      problems_.push_back({file_, 0,
                           std::to_string(problemCount_ - kMaxProblems) +
                               " more lines, after the " + std::to_string(kMaxProblems) +
                               " listed, could not be read"});
    if (!raw_.isDump || closed_) return;
    raw_.cut = true;
    const std::string where =
        section_ ? "inside \"" + *section_ + "\" (expected more elements, ']' and '}')"
                 : "before the dump's closing '}'";
    if (lastBad_ && problemCount_ <= kMaxProblems)  // the last line was bad: one problem for both
      problems_.back().what += "; the file ends there, " + where + ": cut off";
    else
      problems_.push_back({file_, n_, "the file ends after this line, " + where + ": cut off"});
  }

  std::string file_;
  std::vector<Problem>& problems_;
  RawDump raw_;
  int n_ = 0, problemCount_ = 0;
  std::optional<std::string> section_;
  bool closed_ = false, lastBad_ = false;
};

// The whole file as one JSON document: for a dump that is valid JSON but not laid out one
// element per line (reformatted by a tool, say).
std::optional<RawDump> readWhole(const std::string& text) {
  std::string why;
  const std::optional<json> doc = parse(text, &why);
  if (!doc || !doc->is_object() || doc->value("format", json()) != "braid-trace")
    return std::nullopt;
  RawDump raw;
  raw.isDump = true;
  raw.version = doc->value("version", json()).is_number() ? doc->value("version", 0) : 0;
  raw.header = {0, doc->value("header", json::object())};
  for (const char* key : {"comms", "calls", "steps"})
    for (const json& e : doc->value(key, json::array()))
      if (e.is_object()) raw.sections[key].push_back({0, e});
  return raw;
}

// Missing and mistyped fields of one file, counted per section and field so that a writer's
// mistake repeated on every call gives one problem, not thousands.
class FieldIssues {
 public:
  void note(const std::string& section, const char* key, const std::string& what, int line) {
    Issue& i = issues_[section + "." + key + " " + what];
    if (!i.count++) i.line = line;
  }
  void report(const std::string& file, std::vector<Problem>& problems) const {
    for (const auto& [what, i] : issues_)
      problems.push_back(
          {file, i.line,
           what +
               (i.count > 1 ? " (" + std::to_string(i.count) + " elements, this the first)" : "") +
               ": the default taken"});
  }

 private:
  struct Issue {
    int count = 0, line = 0;
  };
  std::map<std::string, Issue> issues_;
};

// Reads an element's fields into a struct whose members hold the format's defaults: a field
// missing or of the wrong type keeps the default and is noted. Unknown fields are not looked at.
class Fields {
 public:
  Fields(const Element& e, const char* section, FieldIssues& issues)
      : e_(e), section_(section), issues_(issues) {}

  void read(const char* key, int64_t& v) { get(key, v, isInteger, "an integer"); }
  void read(const char* key, int& v) {
    int64_t wide = v;
    read(key, wide);
    if (wide < INT_MIN || wide > INT_MAX)
      issues_.note(section_, key, "is out of range", e_.line);
    else
      v = static_cast<int>(wide);
  }
  void read(const char* key, bool& v) { get(key, v, &json::is_boolean, "true or false"); }
  void read(const char* key, std::string& v) { get(key, v, &json::is_string, "a string"); }
  void read(const char* key, std::vector<int>& v) {
    get(
        key, v, [](const json& x) { return allOf(x, isInteger); }, "a list of integers");
  }
  void read(const char* key, std::vector<std::string>& v) {
    get(
        key, v, [](const json& x) { return allOf(x, &json::is_string); }, "a list of strings");
  }

 private:
  // A whole number that fits in 64 bits (a float one too: some writers print 1e3).
  static bool isInteger(const json& x) {
    return x.is_number_integer() || (x.is_number_float() && std::abs(x.get<double>()) < 9e18 &&
                                     x.get<double>() == std::floor(x.get<double>()));
  }
  template <class Check>
  static bool allOf(const json& v, Check is) {
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [&](const json& x) { return std::invoke(is, x); });
  }

  template <class T, class Check>
  void get(const char* key, T& v, Check ok, const char* expected) {
    const auto it = e_.value.find(key);
    if (it == e_.value.end())
      issues_.note(section_, key, "missing", e_.line);
    else if (!std::invoke(ok, *it))
      issues_.note(section_, key, std::string("is not ") + expected, e_.line);
    else
      v = it->template get<T>();
  }

  const Element& e_;
  std::string section_;
  FieldIssues& issues_;
};

// Each section's fields, as the format names them, and where they go.
template <class S>
using MemberOf = std::variant<int S::*, int64_t S::*, bool S::*, std::string S::*,
                              std::vector<int> S::*, std::vector<std::string> S::*>;
template <class S>
struct FieldSpec {
  const char* key;
  MemberOf<S> member;
};

const FieldSpec<Header> kHeaderFields[] = {{"job", &Header::job},
                                           {"rank", &Header::rank},
                                           {"nranks", &Header::nranks},
                                           {"host", &Header::host},
                                           {"pid", &Header::pid},
                                           {"reason", &Header::reason},
                                           {"detail", &Header::detail},
                                           {"time_ns", &Header::time_ns},
                                           {"wall_ns", &Header::wall_ns},
                                           {"buffer", &Header::buffer},
                                           {"recorded", &Header::recorded},
                                           {"steps_mode", &Header::steps_mode},
                                           {"steps_recorded", &Header::steps_recorded},
                                           {"clock_ns", &Header::clock_ns}};
const FieldSpec<Comm> kCommFields[] = {{"comm", &Comm::hash},
                                       {"rank", &Comm::rank},
                                       {"nranks", &Comm::nranks},
                                       {"parent", &Comm::parent},
                                       {"color", &Comm::color},
                                       {"key", &Comm::key},
                                       {"world_ranks", &Comm::world_ranks},
                                       {"hosts", &Comm::hosts}};
const FieldSpec<Call> kCallFields[] = {{"id", &Call::id},
                                       {"comm", &Call::comm},
                                       {"seq", &Call::seq},
                                       {"call", &Call::call},
                                       {"dtype", &Call::dtype},
                                       {"count", &Call::count},
                                       {"bytes", &Call::bytes},
                                       {"root", &Call::root},
                                       {"peer", &Call::peer},
                                       {"op", &Call::op},
                                       {"algo", &Call::algo},
                                       {"state", &Call::state},
                                       {"step", &Call::step},
                                       {"steps", &Call::steps},
                                       {"t_enqueue_ns", &Call::t_enqueue_ns},
                                       {"t_start_ns", &Call::t_start_ns},
                                       {"t_end_ns", &Call::t_end_ns},
                                       {"waiting_on", &Call::waiting_on},
                                       {"error", &Call::error}};
const FieldSpec<Step> kStepFields[] = {
    {"call", &Step::call},         {"comm", &Step::comm},
    {"seq", &Step::seq},           {"step", &Step::step},
    {"kind", &Step::kind},         {"peer", &Step::peer},
    {"bytes", &Step::bytes},       {"t_start_ns", &Step::t_start_ns},
    {"t_end_ns", &Step::t_end_ns}, {"wait_ns", &Step::wait_ns},
    {"copy_ns", &Step::copy_ns},   {"reduce_ns", &Step::reduce_ns}};

template <class S, size_t N>
S fill(const Element& e, const char* section, const FieldSpec<S> (&spec)[N], FieldIssues& issues) {
  S s;
  Fields f(e, section, issues);
  for (const FieldSpec<S>& field : spec)
    std::visit([&](auto member) { f.read(field.key, s.*member); }, field.member);
  return s;
}

// The struct's fields as a JSON object under the format's names.
template <class S, size_t N>
json toJson(const S& s, const FieldSpec<S> (&spec)[N]) {
  json out = json::object();
  for (const FieldSpec<S>& field : spec)
    std::visit([&](auto member) { out[field.key] = s.*member; }, field.member);
  return out;
}

template <class S, size_t N>
std::vector<S> fillAll(const RawDump& raw, const char* section, const FieldSpec<S> (&spec)[N],
                       FieldIssues& issues) {
  std::vector<S> out;
  const auto it = raw.sections.find(section);
  if (it != raw.sections.end())
    for (const Element& e : it->second) out.push_back(fill(e, section, spec, issues));
  return out;
}

// The N of a file named rank-N.json or rank-N-<hash>.json, -1 for another name.
int rankFromName(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind("rank-", 0) != 0) return -1;
  size_t used = 0;
  try {
    const int r = std::stoi(name.substr(5), &used);
    return used ? r : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// Reads one file into in; `named` says the user named it (so a file that is not a dump is
// a problem, where in a folder only a rank-N file is).
void readFile(const fs::path& path, bool named, Input& in) {
  const std::string file = path.string();
  std::ifstream f(path, std::ios::binary);
  std::stringstream buf;
  buf << f.rdbuf();
  if (!f) {
    in.problems.push_back({file, 0, "cannot be read"});
    return;
  }
  const std::string text = buf.str();
  std::vector<Problem> lineProblems;
  std::istringstream lines(text);
  RawDump raw = LineReader(file, lineProblems).read(lines);
  if (!raw.isDump || !lineProblems.empty())
    if (std::optional<RawDump> whole = readWhole(text)) {
      raw = std::move(*whole);
      lineProblems = {{file, 0, "not laid out one element per line; read as one JSON document"}};
    }
  const int fileRank = rankFromName(path);
  if (!raw.isDump) {
    if (named || fileRank >= 0) {
      in.problems.push_back({file, text.empty() ? 0 : 1,
                             text.empty()
                                 ? "empty (its process may have died as it began the dump); skipped"
                                 : "not a braid-trace dump (expected line 1 to start with " +
                                       std::string(kMagic) + "); skipped"});
      if (fileRank >= 0) in.unreadable.emplace(fileRank, file);
    }
    return;
  }
  in.problems.insert(in.problems.end(), lineProblems.begin(), lineProblems.end());
  FieldIssues issues;
  Dump d;
  d.file = file;
  d.cut = raw.cut;
  if (raw.header.value.is_object()) {
    d.header = fill(raw.header, "header", kHeaderFields, issues);
  } else {
    in.problems.push_back({file, 2, "no \"header\" object read: rank, clocks and host unknown"});
  }
  if (d.header.rank < 0) d.header.rank = fileRank;
  d.comms = fillAll(raw, "comms", kCommFields, issues);
  // Rank counts past any real job would have every view allocate per rank: taken as unknown.
  constexpr int kMaxRanks = 1 << 24;
  for (int* n : {&d.header.nranks})
    if (*n < 0 || *n > kMaxRanks) {
      in.problems.push_back({file, 2,
                             "header nranks " + std::to_string(*n) + " is out of [0, " +
                                 std::to_string(kMaxRanks) + "]: taken as unknown"});
      *n = 0;
    }
  for (Comm& c : d.comms)
    if (c.nranks < 0 || c.nranks > kMaxRanks) {
      in.problems.push_back({file, 0,
                             "comm " + c.hash + ": nranks " + std::to_string(c.nranks) +
                                 " is out of [0, " + std::to_string(kMaxRanks) +
                                 "]: taken as its ranks seen"});
      c.nranks = 0;
    }
  d.calls = fillAll(raw, "calls", kCallFields, issues);
  d.steps = fillAll(raw, "steps", kStepFields, issues);
  issues.report(file, in.problems);
  in.dumps.push_back(std::move(d));
}

std::vector<fs::path> dumpFiles(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json" && it->path().filename() != "timeline.json")
      files.push_back(it->path());
  if (ec)
    throw std::runtime_error("cannot read the folder '" + dir.string() + "': " + ec.message());
  // rank-2 before rank-10: by the rank in the name, then by name.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return std::pair(rankFromName(a), a.filename()) < std::pair(rankFromName(b), b.filename());
  });
  return files;
}

}  // namespace

json callJson(const Call& c) { return toJson(c, kCallFields); }

Input readInput(const std::vector<std::string>& paths) {
  Input in;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st))
      throw std::runtime_error("cannot read '" + p +
                               "': " + (ec ? ec.message() : "no such file or folder"));
    if (fs::is_directory(st)) {
      for (const fs::path& f : dumpFiles(p)) readFile(f, false, in);
    } else {
      readFile(p, true, in);
    }
  }
  return in;
}

}  // namespace braid::trace
