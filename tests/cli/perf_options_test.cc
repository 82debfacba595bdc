// The perf binaries' flags (perf/options.cc) as nccl-tests' binaries take them: every short
// flag and its getopt_long name give the same Options, with nccl-tests' meaning; bad values
// and flags nccl-tests does not have (-K) are refused naming the flag; FlagNotes names the
// flags a host run has no counterpart of. Then the pieces of the report those flags feed:
// -I's statistics, -M's sizes and -J's document (perf/report.cc). Built with
// BRAID_PERF_USAGE_THROWS, so a refusal throws its message instead of exiting with status 2
// (tests/cli/perf_nccl_flags.sh checks the status of the real binary).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "options.h"
#include "report.h"
#include "verifiable.h"

namespace braid::perf {
namespace {

// Parses args (after the program name); returns the refusal's message, or "" if they parse.
std::string Parse(std::vector<std::string> args, Options* o) {
  args.insert(args.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  try {
    ParseOptions(static_cast<int>(args.size()), argv.data(), o);
  } catch (const UsageErrorThrown& e) {
    return e.message.empty() ? "(empty message)" : e.message;
  }
  return "";
}

Options Parsed(const std::vector<std::string>& args) {
  Options o;
  const std::string error = Parse(args, &o);
  EXPECT_EQ(error, "") << "for " << ::testing::PrintToString(args);
  return o;
}

struct FlagCase {
  const char* letter;  // "-N"
  const char* name;    // "run_cycles"
  const char* value;
  std::function<bool(const Options&)> holds;
};

// Each of nccl-tests' flags, with a value other than its default and what it must set.
const std::vector<FlagCase>& FlagCases() {
  static const std::vector<FlagCase> cases = {
      {"-t", "nthreads", "3", [](const Options& o) { return o.nthreads == 3; }},
      {"-g", "ngpus", "1", [](const Options& o) { return o.was_given('g'); }},
      {"-b", "minbytes", "1K", [](const Options& o) { return o.min_bytes == 1024; }},
      {"-e", "maxbytes", "1.5G", [](const Options& o) { return o.max_bytes == (3ull << 30) / 2; }},
      {"-i", "stepbytes", "2M", [](const Options& o) { return o.step_bytes == 2u << 20; }},
      {"-f", "stepfactor", "4", [](const Options& o) { return o.step_factor == 4; }},
      {"-n", "iters", "7", [](const Options& o) { return o.iters == 7; }},
      {"-m", "agg_iters", "3", [](const Options& o) { return o.agg_iters == 3; }},
      {"-w", "warmup_iters", "0", [](const Options& o) { return o.warmup_iters == 0; }},
      {"-N", "run_cycles", "0", [](const Options& o) { return o.run_cycles == 0; }},
      {"-p", "parallel_init", "1", [](const Options& o) { return o.parallel_init == 1; }},
      {"-c", "check", "2", [](const Options& o) { return o.check == 2; }},
      {"-o", "op", "max",
       [](const Options& o) { return o.ops.size() == 1 && o.ops[0] == braidMax; }},
      {"-d", "datatype", "bfloat16",
       [](const Options& o) { return o.types.size() == 1 && o.types[0] == braidBfloat16; }},
      {"-r", "root", "2", [](const Options& o) { return o.root == 2 && !o.all_roots; }},
      {"-z", "blocking", "2", [](const Options& o) { return o.blocking == 2; }},
      {"-y", "stream_null", "1", [](const Options& o) { return o.stream_null == 1; }},
      {"-T", "timeout", "45", [](const Options& o) { return o.timeout_sec == 45; }},
      {"-G", "cudagraph", "4", [](const Options& o) { return o.cuda_graph == 4; }},
      {"-C", "report_cputime", "1", [](const Options& o) { return o.report_cputime; }},
      {"-S", "report_timestamps", "1", [](const Options& o) { return o.report_timestamps; }},
      {"-J", "output_file", "out.json", [](const Options& o) { return o.json_path == "out.json"; }},
      {"-a", "average", "3", [](const Options& o) { return o.average == 3; }},
      {"-R", "local_register", "1", [](const Options& o) { return o.local_register == 1; }},
      {"-x", "cta_policy", "2", [](const Options& o) { return o.cta_policy == 2; }},
      {"-V", "device_cta_count", "128", [](const Options& o) { return o.device_cta_count == 128; }},
      {"-M", "memory", "1", [](const Options& o) { return o.memory_report; }},
      {"-u", "unalign", "3", [](const Options& o) { return o.unalign == 3; }},
      {"-I", "per_iter_timing", "1", [](const Options& o) { return o.per_iter_timing; }},
      {"-A", "algorithm", "ring", [](const Options& o) { return o.algorithm == "ring"; }},
      {"-B", "buffers", "shared",
       [](const Options& o) { return o.shared_memory && !o.device_memory; }},
  };
  return cases;
}

TEST(PerfOptions, ShortAndLongFormsMeanTheSame) {
  for (const FlagCase& c : FlagCases()) {
    SCOPED_TRACE(c.letter);
    // -r 2 needs nothing more at parse time; the ranks are counted later.
    const Options by_letter = Parsed({c.letter, c.value});
    EXPECT_TRUE(c.holds(by_letter));
    EXPECT_TRUE(by_letter.was_given(c.letter[1]));
    const Options by_name = Parsed({std::string("--") + c.name, c.value});
    EXPECT_TRUE(c.holds(by_name));
    const Options by_equals = Parsed({std::string("--") + c.name + "=" + c.value});
    EXPECT_TRUE(c.holds(by_equals));
  }
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  const Options o = Parsed({});
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.run_cycles, 1);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.average, 1);
  EXPECT_EQ(o.blocking, 0);
  EXPECT_EQ(o.timeout_sec, 0);
  EXPECT_EQ(o.cuda_graph, 0);
  EXPECT_FALSE(o.report_cputime);
  EXPECT_FALSE(o.report_timestamps);
  EXPECT_EQ(o.local_register, 0);
  EXPECT_EQ(o.cta_policy, -1);
  EXPECT_EQ(o.device_impl, 0);
  EXPECT_EQ(o.device_cta_count, 16);
  EXPECT_FALSE(o.memory_report);
  EXPECT_EQ(o.unalign, 0);
  EXPECT_FALSE(o.per_iter_timing);
  EXPECT_TRUE(o.json_path.empty());
  EXPECT_FALSE(o.shared_memory || o.device_memory);
  EXPECT_TRUE(o.given.empty());
  EXPECT_TRUE(FlagNotes(o).empty());
}

TEST(PerfOptions, IntegersAsStrtolBaseZero) {
  EXPECT_EQ(Parsed({"-n", "0x10"}).iters, 16);
  EXPECT_EQ(Parsed({"-n", "010"}).iters, 8);
  EXPECT_EQ(Parsed({"-r", "0x3"}).root, 3);
  EXPECT_EQ(Parsed({"-T", "0x20"}).timeout_sec, 32);
}

TEST(PerfOptions, DeviceImplementationWithSymmetricRegistration) {
  const Options o = Parsed({"-D", "2", "-R", "2"});
  EXPECT_EQ(o.device_impl, 2);
  EXPECT_EQ(o.local_register, 2);
  const Options by_name = Parsed({"--device_implementation", "1", "--local_register", "2"});
  EXPECT_EQ(by_name.device_impl, 1);
  EXPECT_EQ(Parsed({"-D", "0"}).device_impl, 0);
}

TEST(PerfOptions, MulsumIsNcclTestsPreMulSum) {
  const Options o = Parsed({"-o", "mulsum"});
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], kMulSum);
  EXPECT_STREQ(OpName(kMulSum), "mulsum");
  const Options all = Parsed({"--op", "all"});  // nccl-tests' "all" has mulsum too
  ASSERT_EQ(all.ops.size(), static_cast<size_t>(braidNumOps) + 1);
  EXPECT_EQ(all.ops.back(), kMulSum);
  // The scalars: +1 on even ranks, -1 on odd ones, in each datatype's bits.
  EXPECT_EQ(PreMulScalar(0), 1.0);
  EXPECT_EQ(PreMulScalar(3), -1.0);
  float f = 0;
  PreMulScalarBytes(braidFloat32, 1, &f);
  EXPECT_EQ(f, -1.0f);
  uint8_t u = 0;
  PreMulScalarBytes(braidUint8, 1, &u);
  EXPECT_EQ(u, 255);
  uint16_t half = 0;
  PreMulScalarBytes(braidFloat16, 2, &half);
  EXPECT_EQ(half, 0x3c00);  // +1.0 in fp16
  // The expected result of 3 ranks: rank 0 - rank 1 + rank 2, element by element.
  CheckArgs args{braidFloat64, kMulSum, 0, 0, 3, 42};
  std::vector<double> in[3], want(5);
  for (int r = 0; r < 3; ++r) {
    in[r].resize(5);
    FillInput(in[r].data(), 5, 0, args, r);
  }
  FillReduced(want.data(), 5, 0, args);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(want[i], in[0][i] - in[1][i] + in[2][i]) << i;
}

TEST(PerfOptions, OutputFileAlsoAnswersToJson) {
  EXPECT_EQ(Parsed({"--json", "a.json"}).json_path, "a.json");
}

TEST(PerfOptions, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-K", "1"}, "unknown option '-K'"},
      {{"--no_such_flag", "1"}, "unknown option '--no_such_flag'"},
      {{"-N", "-1"}, "-N (--run_cycles)"},
      {{"-p", "2"}, "-p (--parallel_init)"},
      {{"-z", "3"}, "-z (--blocking)"},
      {{"-y", "2"}, "-y (--stream_null)"},
      {{"-T", "-1"}, "-T (--timeout)"},
      {{"-G", "-2"}, "-G (--cudagraph)"},
      {{"-C", "yes"}, "-C (--report_cputime)"},
      {{"-S", "2"}, "-S (--report_timestamps)"},
      {{"-a", "4"}, "-a (--average)"},
      {{"-R", "3"}, "-R (--local_register)"},
      {{"-x", "3"}, "-x (--cta_policy)"},
      {{"-x", "-2"}, "-x (--cta_policy)"},
      {{"-D", "-1"}, "-D (--device_implementation)"},
      {{"-D", "1"}, "needs -R (--local_register) 2"},
      {{"-D", "1", "-R", "1"}, "needs -R (--local_register) 2"},
      {{"-V", "0"}, "-V (--device_cta_count)"},
      {{"-V", "129"}, "-V (--device_cta_count)"},
      {{"-M", "2"}, "-M (--memory)"},
      {{"-M", "host"}, "-B (--buffers)"},
      {{"--memory", "device"}, "-B (--buffers)"},
      {{"-B", "gpu"}, "-B (--buffers)"},
      {{"-u", "-1"}, "-u (--unalign)"},
      {{"-u", "1048577"}, "-u (--unalign)"},
      {{"-I", "2"}, "-I (--per_iter_timing)"},
      {{"-I", "1", "-n", "2000000"}, "-I (--per_iter_timing) 1"},
      {{"-n", "0x"}, "-n (--iters)"},
      {{"-J", ""}, "-J (--output_file) needs a file name"},
      {{"-u"}, "-u (--unalign) needs a value"},
  };
  for (const auto& [args, want] : cases) {
    Options o;
    const std::string error = Parse(args, &o);
    EXPECT_NE(error.find(want), std::string::npos)
        << ::testing::PrintToString(args) << ": got '" << error << "', want '" << want << "'";
  }
}

bool HasNote(const std::vector<std::string>& notes, const std::string& start) {
  for (const std::string& n : notes)
    if (n.rfind(start, 0) == 0) return true;
  return false;
}

TEST(PerfOptions, FlagNotesNameWhatAHostRunCannotDo) {
  const std::vector<std::string> notes = FlagNotes(
      Parsed({"-G", "2", "-x", "1", "-D", "1", "-R", "2", "-V", "32", "-y", "1", "-p", "0"}));
  for (const std::string& n : notes) EXPECT_EQ(n.rfind("# ", 0), 0u) << n;
  EXPECT_TRUE(HasNote(notes, "# -G 2:"));
  EXPECT_TRUE(HasNote(notes, "# -x 1:"));
  EXPECT_TRUE(HasNote(notes, "# -D 1:"));
  EXPECT_TRUE(HasNote(notes, "# -R 2:"));
  EXPECT_TRUE(HasNote(notes, "# -V 32:"));
  EXPECT_TRUE(HasNote(notes, "# -y 1:"));
  EXPECT_TRUE(HasNote(notes, "# -p 0:"));
  EXPECT_EQ(notes.size(), 7u);
  // What runs as asked leaves no note: -p 1, -R 1, -y 1 and -C 1 on device buffers with one
  // thread.
  EXPECT_TRUE(
      FlagNotes(Parsed({"-p", "1", "-R", "1", "-y", "1", "-C", "1", "-B", "device"})).empty());
  EXPECT_TRUE(HasNote(FlagNotes(Parsed({"-C", "1"})), "# -C 1:"));
  EXPECT_TRUE(HasNote(FlagNotes(Parsed({"-y", "1", "-B", "device", "-t", "2"})), "# -y 1:"));
}

TEST(PerfReport, IterStatsAsNcclTests) {
  std::vector<double> t;
  for (int i = 100; i >= 1; --i) t.push_back(i);  // unsorted on purpose
  const IterStats s = ComputeIterStats(t);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 100);
  EXPECT_EQ(s.p50, 51);  // sorted[n / 2]
  EXPECT_EQ(s.p95, 95);  // nearest rank
  EXPECT_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.avg, 50.5);
  EXPECT_NEAR(s.stdev, std::sqrt((100.0 * 100.0 - 1) / 12), 1e-9);  // population
  EXPECT_NEAR(s.cv_pct, s.stdev / 50.5 * 100, 1e-9);
  const IterStats few = ComputeIterStats({3.0, 1.0, 2.0});
  EXPECT_EQ(few.p99, 3.0);  // below 100 samples p99 is the largest
  EXPECT_EQ(few.p50, 2.0);
  const IterStats one = ComputeIterStats({5.0});
  EXPECT_EQ(one.stdev, 0);
  EXPECT_EQ(one.cv_pct, 0);
}

TEST(PerfReport, MemoryStrings) {
  EXPECT_EQ(MemoryString(512), "512 B");
  EXPECT_EQ(MemoryString(1536), "1.50 KB");
  EXPECT_EQ(MemoryString(64.0 * 1024 * 1024), "64.0 MB");
  EXPECT_EQ(MemoryString(200.0 * 1024 * 1024), "200 MB");
  EXPECT_EQ(MemoryString(3.0 * 1024 * 1024 * 1024), "3.00 GB");
  EXPECT_EQ(MemoryString(-2048), "-2.00 KB");
  EXPECT_GT(ResidentBytes(), 0);
  EXPECT_GE(PeakResidentBytes(), ResidentBytes() / 2);
}

std::string TempDir() {
  char dir[] = "/tmp/perf_options_test.XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());  // throws (fails the test) on invalid JSON
}

TEST(PerfReport, JsonDocumentNeverOverwrites) {
  const std::string dir = TempDir();
  const std::string path = dir + "/run.json";
  std::string opened, error;
  {
    auto first = JsonDocument::Create(path, &opened, &error);
    ASSERT_NE(first, nullptr) << error;
    EXPECT_EQ(opened, path);
    first->Begin({"all_reduce_perf", "-J", path});
    auto second = JsonDocument::Create(path, &opened, &error);
    ASSERT_NE(second, nullptr) << error;
    EXPECT_EQ(opened, path + ".0");
    auto third = JsonDocument::Create(path, &opened, &error);
    ASSERT_NE(third, nullptr) << error;
    EXPECT_EQ(opened, path + ".1");
  }  // closed at whatever stage: each is still one JSON object
  for (const std::string& p : {path, path + ".0", path + ".1"}) {
    const nlohmann::json doc = ReadJson(p);
    EXPECT_EQ(doc.at("errors"), nlohmann::json::array()) << p;
    EXPECT_TRUE(doc.contains("end_time")) << p;
  }
  EXPECT_EQ(ReadJson(path).at("args").at(1), "-J");
  EXPECT_EQ(JsonDocument::Create(dir + "/missing/run.json", &opened, &error), nullptr);
  EXPECT_NE(error.find("missing/run.json"), std::string::npos) << error;
  for (const std::string& p : {path, path + ".0", path + ".1"}) unlink(p.c_str());
  rmdir(dir.c_str());
}

TEST(PerfReport, JsonDocumentHasNcclTestsKeys) {
  const std::string dir = TempDir();
  const std::string path = dir + "/keys.json";
  setenv("BRAID_UNIQUE_ID", "00112233secret", 1);
  Options o = Parsed({"-b", "8", "-e", "64", "-f", "2", "-z", "1", "-I", "1"});
  std::string opened, error;
  {
    auto doc = JsonDocument::Create(path, &opened, &error);
    ASSERT_NE(doc, nullptr) << error;
    doc->Begin({"all_reduce_perf"});
    doc->Config(o, {DeviceRecord{0, 11, "h\"0", 0}, DeviceRecord{1, 12, "h1", 1}});
    doc->BeginResults();
    doc->Row("{\"size\":8}");
    doc->Row("{\"size\":16}");
    doc->EndResults(0, std::nan(""));
    doc->Finish("a \"quoted\" error");
  }
  unsetenv("BRAID_UNIQUE_ID");
  const nlohmann::json j = ReadJson(path);
  // nlohmann::json sorts keys; the file's order is nccl-tests' (checked by the shell test).
  for (const char* k : {"version", "start_time", "args", "env", "nccl_version", "config", "results",
                        "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j.at("version"), 2);
  const nlohmann::json& c = j.at("config");
  EXPECT_EQ(c.at("minimum_bytes"), 8);
  EXPECT_EQ(c.at("maximum_bytes"), 64);
  EXPECT_EQ(c.at("step_factor"), 2);
  EXPECT_FALSE(c.contains("step_bytes"));
  EXPECT_EQ(c.at("blocking_collectives"), "true");  // booleans as strings, as nccl-tests
  EXPECT_EQ(c.at("per_iter_timing"), "true");
  EXPECT_EQ(c.at("parallel_init"), "false");
  EXPECT_EQ(c.at("graph"), 0);
  ASSERT_EQ(c.at("devices").size(), 2u);
  EXPECT_EQ(c.at("devices")[0].at("hostname"), "h\"0");
  EXPECT_EQ(c.at("devices")[1].at("pid"), 12);
  EXPECT_EQ(j.at("results").size(), 2u);
  EXPECT_EQ(j.at("out_of_bounds").at("okay"), "true");
  EXPECT_EQ(j.at("average_bus_bandwidth").at("bandwidth"), "nan");
  EXPECT_EQ(j.at("average_bus_bandwidth").at("okay"), "unchecked");
  EXPECT_EQ(j.at("errors").at(0), "a \"quoted\" error");
  bool withheld = false;
  for (const auto& e : j.at("env")) {
    EXPECT_EQ(e.get<std::string>().find("secret"), std::string::npos);
    withheld |= e == "BRAID_UNIQUE_ID=(withheld)";
  }
  EXPECT_TRUE(withheld);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace braid::perf
