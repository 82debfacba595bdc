// Command-line parsing of the perf binaries; see options.h.
#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "verifiable.h"

namespace braid::perf {
namespace {

// nccl-tests' getopt_long names (src/common.cu), then Braid's own; a second name for a letter
// (--json) is an alias, and FlagName gives the first.
const struct option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"help", no_argument, nullptr, 'h'},
    {"algorithm", required_argument, nullptr, 'A'},
    {"buffers", required_argument, nullptr, 'B'},
    {"json", required_argument, nullptr, 'J'},
    {"trace", required_argument, nullptr, 'X'},
    {nullptr, 0, nullptr, 0},
};
// Every flag but -h takes a value; the leading ':' makes getopt report a missing one as ':'.
constexpr const char* kShortOptions =
    ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:S:J:a:R:x:D:V:M:u:I:A:B:X:h";

const char* LongName(int c) {
  for (const struct option& o : kLongOptions) {
    if (o.name != nullptr && o.val == c) return o.name;
  }
  return "?";
}

void PrintUsage(const char* prog) {
  printf(
      "USAGE: %s\n"
      "\t[-t,--nthreads <ranks as threads of this process>]\n"
      "\t[-g,--ngpus <ranks per thread: only 1>]\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]\n"
      "\t[-e,--maxbytes <max size in bytes, K/M/G suffixes>]\n"
      "\t[-i,--stepbytes <increment size>]\n"
      "\t[-f,--stepfactor <increment factor>]\n"
      "\t[-n,--iters <iteration count>]\n"
      "\t[-m,--agg_iters <aggregated iteration count>]\n"
      "\t[-w,--warmup_iters <warmup iteration count>]\n"
      "\t[-N,--run_cycles <sweeps over the sizes, each printed (default 1; 0: until killed)>]\n"
      "\t[-p,--parallel_init <0/1> (Braid's thread ranks always create their communicators "
      "concurrently)]\n"
      "\t[-c,--check <check iteration count: 0 off>]\n"
      "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>]\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>]\n"
      "\t[-r,--root <root, or all (-1): every rank in turn>]\n"
      "\t[-z,--blocking <0/1/2>: 1 wait for each call and barrier, 2 wait without barrier]\n"
      "\t[-y,--stream_null <0/1>: -B device: the legacy default CUDA stream (one thread per "
      "process)]\n"
      "\t[-T,--timeout <seconds: bound of every wait of the communicator; 0: BRAID_TIMEOUT>]\n"
      "\t[-G,--cudagraph <graph launches: accepted, Braid captures no CUDA graph>]\n"
      "\t[-C,--report_cputime <0/1>: time the loop that issues the calls, not the wait]\n"
      "\t[-S,--report_timestamps <0/1>: a timestamp at the end of each row]\n"
      "\t[-J,--output_file <file: nccl-tests' JSON document (version 2); if it exists, "
      "file.0, file.1, ...>]\n"
      "\t[-a,--average <0/1/2/3> report iteration time of <0=rank 0/1=avg/2=min/3=max>]\n"
      "\t[-R,--local_register <0/1/2>: braidCommRegister the buffers (2: the same, Braid has "
      "no symmetric windows)]\n"
      "\t[-x,--cta_policy <0/1/2>: accepted, a host has no CTAs]\n"
      "\t[-D,--device_implementation <N>: accepted with -R 2, Braid has no device-side "
      "kernels]\n"
      "\t[-V,--device_cta_count <1..128>: accepted, as -D]\n"
      "\t[-M,--memory <0/1>: memory report (RSS of the process, Braid's buffers)]\n"
      "\t[-u,--unalign <elements: buffers start this far past an aligned address>]\n"
      "\t[-I,--per_iter_timing <0/1>: time each iteration; min, max, p99 and cv%% columns]\n"
      "\t[-X,--trace <dir: every rank dumps its flight recorder there at the end, with per-step "
      "times unless BRAID_TRACE is set; braid-trace DIR/JOB reads it>]\n"
      "\t[-A,--algorithm <name: force it / list: print the algorithms of this collective / "
      "auto>]\n"
      "\t[-B,--buffers <host (default) / shared: host buffers from braidMemAllocHost, read in\n"
      "\t              place by the ranks of this machine / device: buffers from braidMemAlloc, "
      "CUDA>]\n"
      "\t[-h,--help]\n"
      "Integers as strtol reads them with base 0 (0x10 and 16 alike). Ranks: -t N threads in "
      "this process, times the processes of braidrun (BRAID_UNIQUE_ID, BRAID_RANK, "
      "BRAID_NRANKS) or mpirun.\n",
      prog);
}

std::string FlagName(int c) {
  return std::string("-") + static_cast<char>(c) + " (--" + LongName(c) + ")";
}

int64_t ParseInt(const Options& o, int c, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(text, &end, 0);  // base 0, as nccl-tests' strtol(optarg, 0, 0)
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    UsageError(o, "invalid value '" + std::string(text) + "' for " + FlagName(c) +
                      ": expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v;
}

// A 0/1 switch (-C, -S, -M, -I, -p, -y).
bool ParseSwitch(const Options& o, int c, const char* text) {
  return ParseInt(o, c, text, 0, 1) != 0;
}

// "8", "1.5K", "128M", "4g": a decimal number with an optional 1024-based suffix.
size_t ParseSize(const Options& o, int c, const char* text) {
  const char* p = text;
  long double value = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) value = value * 10 + (*p - '0');
  if (*p == '.') {
    long double scale = 0.1L;
    for (++p; *p >= '0' && *p <= '9'; ++p, ++digits, scale /= 10) value += scale * (*p - '0');
  }
  long double unit = 1;
  switch (*p) {
    case 'k':
    case 'K':
      unit = 1024.0L;
      ++p;
      break;
    case 'm':
    case 'M':
      unit = 1024.0L * 1024;
      ++p;
      break;
    case 'g':
    case 'G':
      unit = 1024.0L * 1024 * 1024;
      ++p;
      break;
    default:
      break;
  }
  value *= unit;
  if (digits == 0 || *p != '\0' || value > static_cast<long double>(1ull << 60)) {
    UsageError(o, "invalid size '" + std::string(text) + "' for " + FlagName(c) +
                      ": expected bytes like 8, 64K, 128M or 2G (at most 2^60)");
  }
  return static_cast<size_t>(value);
}

void ParseTypes(Options* o, const char* text) {
  o->types.clear();
  braidDataType_t dtype;
  if (strcmp(text, "all") == 0) {
    o->types = AllTypes();
  } else if (ParseTypeName(text, &dtype)) {
    o->types.push_back(dtype);
  } else {
    UsageError(*o, "unknown datatype '" + std::string(text) + "' for " + FlagName('d') +
                       ": expected int8, uint8, int32, uint32, int64, uint64, half (fp16), "
                       "float (fp32), double (fp64), bfloat16 (bf16), f8e4m3, f8e5m2 or all");
  }
}

void ParseOps(Options* o, const char* text) {
  o->ops.clear();
  for (int i = 0; i <= static_cast<int>(kMulSum); ++i) {  // nccl-tests' "all" has mulsum too
    if (strcmp(text, "all") == 0 || strcmp(text, OpName(static_cast<braidRedOp_t>(i))) == 0) {
      o->ops.push_back(static_cast<braidRedOp_t>(i));
    }
  }
  if (o->ops.empty()) {
    UsageError(*o, "unknown op '" + std::string(text) + "' for " + FlagName('o') +
                       ": expected sum, prod, max, min, avg, mulsum or all");
  }
}

}  // namespace

int ParseOptions(int argc, char** argv, Options* o) {
  if (argc > 0 && argv[0] != nullptr) {
    const char* slash = strrchr(argv[0], '/');
    o->prog = slash != nullptr ? slash + 1 : argv[0];
  }
  opterr = 0;  // our own messages, with the flag's long name
  optind = 0;  // 0, not 1: glibc then also forgets a previous scan (ParseOptions may run twice)
  for (;;) {
    const int c = getopt_long(argc, argv, kShortOptions, kLongOptions, nullptr);
    if (c == -1) break;
    if (c != ':' && c != '?' && c != 'h') o->given += static_cast<char>(c);
    switch (c) {
      case 't':
        o->nthreads = static_cast<int>(ParseInt(*o, c, optarg, 1, 4096));
        break;
      case 'g':
        if (ParseInt(*o, c, optarg, 1, 4096) != 1) {
          UsageError(*o,
                     "-g (--ngpus) must be 1: Braid runs one rank per thread or process; "
                     "use -t N for N ranks in this process");
        }
        break;
      case 'b':
        o->min_bytes = ParseSize(*o, c, optarg);
        break;
      case 'e':
        o->max_bytes = ParseSize(*o, c, optarg);
        break;
      case 'i':
        o->step_bytes = ParseSize(*o, c, optarg);
        break;
      case 'f':
        o->step_factor = static_cast<size_t>(ParseInt(*o, c, optarg, 0, 1 << 20));
        break;
      case 'n':
        o->iters = static_cast<int>(ParseInt(*o, c, optarg, 1, INT_MAX));
        break;
      case 'm':
        o->agg_iters = static_cast<int>(ParseInt(*o, c, optarg, 1, INT_MAX));
        break;
      case 'w':
        o->warmup_iters = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'N':
        o->run_cycles = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'p':
        o->parallel_init = ParseSwitch(*o, c, optarg) ? 1 : 0;
        break;
      case 'c':
        o->check = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'o':
        ParseOps(o, optarg);
        break;
      case 'd':
        ParseTypes(o, optarg);
        break;
      case 'r':
        o->all_roots = strcmp(optarg, "all") == 0 || strcmp(optarg, "-1") == 0;
        o->root = 0;
        if (!o->all_roots) {
          char* end = nullptr;
          errno = 0;
          const long v = strtol(optarg, &end, 0);
          if (end == optarg || *end != '\0' || errno == ERANGE || v < 0 || v > INT_MAX) {
            UsageError(*o, "invalid value '" + std::string(optarg) + "' for " + FlagName(c) +
                               ": expected a rank (an integer >= 0), or all (or -1) for every "
                               "rank in turn");
          }
          o->root = static_cast<int>(v);
        }
        break;
      case 'z':
        o->blocking = static_cast<int>(ParseInt(*o, c, optarg, 0, 2));
        break;
      case 'y':
        o->stream_null = ParseSwitch(*o, c, optarg) ? 1 : 0;
        break;
      case 'T':
        o->timeout_sec = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'G':
        o->cuda_graph = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'C':
        o->report_cputime = ParseSwitch(*o, c, optarg);
        break;
      case 'S':
        o->report_timestamps = ParseSwitch(*o, c, optarg);
        break;
      case 'a':
        o->average = static_cast<int>(ParseInt(*o, c, optarg, 0, 3));
        break;
      case 'R':
        o->local_register = static_cast<int>(ParseInt(*o, c, optarg, 0, 2));
        break;
      case 'x':
        o->cta_policy = static_cast<int>(ParseInt(*o, c, optarg, -1, 2));
        break;
      case 'D':
        o->device_impl = static_cast<int>(ParseInt(*o, c, optarg, 0, INT_MAX));
        break;
      case 'V':
        o->device_cta_count = static_cast<int>(ParseInt(*o, c, optarg, 1, 128));
        break;
      case 'M':
        if (strcmp(optarg, "host") == 0 || strcmp(optarg, "shared") == 0 ||
            strcmp(optarg, "device") == 0) {
          UsageError(*o, "invalid value '" + std::string(optarg) + "' for " + FlagName(c) +
                             ": -M is nccl-tests' memory report (0 or 1); the buffers' kind "
                             "is -B (--buffers) " +
                             optarg);
        }
        o->memory_report = ParseSwitch(*o, c, optarg);
        break;
      case 'u':
        o->unalign = static_cast<int>(ParseInt(*o, c, optarg, 0, kMaxUnalign));
        break;
      case 'I':
        o->per_iter_timing = ParseSwitch(*o, c, optarg);
        break;
      case 'A':
        o->algorithm = optarg;
        if (o->algorithm.empty()) UsageError(*o, FlagName(c) + " needs an algorithm name");
        break;
      case 'X':
        o->trace_dir = optarg;
        if (o->trace_dir.empty()) UsageError(*o, FlagName(c) + " needs a folder");
        // Read by each communicator as it is made (BRAID_TRACE) and at the dump: set before any.
        setenv("BRAID_TRACE_DIR", optarg, 1);
        setenv("BRAID_TRACE", "steps", 0);
        break;
      case 'J':
        o->json_path = optarg;
        if (o->json_path.empty()) UsageError(*o, FlagName(c) + " needs a file name");
        break;
      case 'B':
        if (strcmp(optarg, "host") != 0 && strcmp(optarg, "device") != 0 &&
            strcmp(optarg, "shared") != 0)
          UsageError(*o, "invalid value '" + std::string(optarg) + "' for " + FlagName(c) +
                             ": expected host, shared or device");
        o->device_memory = strcmp(optarg, "device") == 0;
        o->shared_memory = strcmp(optarg, "shared") == 0;
        break;
      case 'h':
        PrintUsage(o->prog);
        return 0;
      case ':':
        if (optopt != 0) UsageError(*o, "option " + FlagName(optopt) + " needs a value");
        UsageError(*o, "option '" + std::string(argv[optind - 1]) + "' needs a value");
      default: {
        // getopt_long leaves an unknown short flag in optopt, an unknown long one in argv.
        std::string flag = optopt != 0 ? std::string("-") + static_cast<char>(optopt)
                                       : std::string(argv[optind - 1]);
        UsageError(*o, "unknown option '" + flag + "'");
      }
    }
  }
  if (optind < argc) UsageError(*o, "unexpected argument '" + std::string(argv[optind]) + "'");
  if (o->min_bytes > o->max_bytes) {
    UsageError(*o, "-b (--minbytes) " + std::to_string(o->min_bytes) +
                       " is larger than -e (--maxbytes) " + std::to_string(o->max_bytes));
  }
  if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes < o->max_bytes) {
    UsageError(*o, "-i (--stepbytes) must be > 0 when -f (--stepfactor) is 0 or 1");
  }
  if (const size_t n = SizeCount(*o, kMaxSizes + 1); n > kMaxSizes) {
    UsageError(*o, "-b " + std::to_string(o->min_bytes) + " to -e " + std::to_string(o->max_bytes) +
                       " by " +
                       (o->step_factor > 1 ? "-f " + std::to_string(o->step_factor)
                                           : "-i " + std::to_string(o->step_bytes)) +
                       " gives more than " + std::to_string(kMaxSizes) +
                       " sizes; use a larger step or -f");
  }
  // As nccl-tests: a device implementation runs on symmetric windows only.
  if (o->device_impl > 0 && o->local_register != 2) {
    UsageError(*o, "-D (--device_implementation) " + std::to_string(o->device_impl) +
                       " needs -R (--local_register) 2, as in nccl-tests");
  }
  if (o->per_iter_timing && o->iters > kMaxTimedIters) {
    UsageError(*o, "-I (--per_iter_timing) 1 keeps every iteration's time: -n (--iters) " +
                       std::to_string(o->iters) + " is more than " +
                       std::to_string(kMaxTimedIters));
  }
  return -1;
}

std::vector<std::string> FlagNotes(const Options& o) {
  std::vector<std::string> notes;
  if (o.was_given('p') && o.parallel_init == 0) {
    notes.push_back(
        "# -p 0: each thread rank still creates its own communicator, all at once "
        "(braidCommInitRank returns when every rank has joined), as -p 1 does");
  }
  if (o.stream_null && !o.device_memory) {
    notes.push_back(
        "# -y 1: no CUDA stream to replace: the calls run on host buffers and return when done");
  } else if (o.stream_null && o.nthreads > 1) {
    notes.push_back(
        "# -y 1: each thread rank keeps its per-thread CUDA stream: thread ranks that shared "
        "the legacy default stream would wait on one another");
  }
  if (o.report_cputime && !o.device_memory) {
    notes.push_back(
        "# -C 1: on host buffers every call returns when done, so the time spent issuing the "
        "calls (cputime) is their whole time");
  }
  if (o.cuda_graph > 0) {
    notes.push_back("# -G " + std::to_string(o.cuda_graph) +
                    ": Braid's perf binaries capture no CUDA graph; every iteration is a call");
  }
  if (o.local_register == 2) {
    notes.push_back(
        "# -R 2: Braid has no symmetric windows; the buffers are registered with "
        "braidCommRegister, as -R 1");
  }
  if (o.cta_policy >= 0) {
    notes.push_back("# -x " + std::to_string(o.cta_policy) +
                    ": Braid launches no CTAs; the CTA policy applies to nothing here");
  }
  if (o.device_impl > 0) {
    notes.push_back("# -D " + std::to_string(o.device_impl) +
                    ": Braid has no device-side kernels; the collectives run as library calls");
  }
  if (o.was_given('V')) {
    notes.push_back("# -V " + std::to_string(o.device_cta_count) +
                    ": Braid has no device-side kernels to give CTAs to");
  }
  return notes;
}

void UsageError(const Options& o, const std::string& msg) {
#ifdef BRAID_PERF_USAGE_THROWS
  (void)o;
  throw UsageErrorThrown{msg};
#else
  fprintf(stderr, "%s: %s (see %s -h)\n", o.prog, msg.c_str(), o.prog);
  exit(2);
#endif
}

namespace {

// Calls visit(size) for each size of the sweep, in order, up to limit sizes; returns how many.
template <typename Visit>
size_t ForEachSize(const Options& o, size_t limit, const Visit& visit) {
  size_t n = 0;
  for (size_t size = o.min_bytes; size <= o.max_bytes && n < limit;) {
    visit(size);
    ++n;
    size_t next;
    if (o.step_factor > 1) {
      if (size == 0) {
        next = 1;  // 0 * factor would never grow
      } else if (__builtin_mul_overflow(size, o.step_factor, &next)) {
        break;
      }
    } else if (o.step_bytes == 0 || __builtin_add_overflow(size, o.step_bytes, &next)) {
      break;
    }
    size = next;
  }
  return n;
}

}  // namespace

size_t SizeCount(const Options& o, size_t limit) {
  return ForEachSize(o, limit, [](size_t) {});
}

std::vector<size_t> Sizes(const Options& o) {
  std::vector<size_t> sizes;
  ForEachSize(o, kMaxSizes, [&](size_t size) { sizes.push_back(size); });
  return sizes;
}

}  // namespace braid::perf
