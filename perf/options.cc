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
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"average", required_argument, nullptr, 'a'},
    {"algorithm", required_argument, nullptr, 'A'},
    {"json", required_argument, nullptr, 'J'},
    {"memory", required_argument, nullptr, 'M'},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

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
      "\t[-c,--check <check iteration count: 0 off, 1 on>]\n"
      "\t[-o,--op <sum/prod/min/max/avg/all>]\n"
      "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/"
      "f8e4m3/f8e5m2/all>]\n"
      "\t[-r,--root <root, or all (-1): every rank in turn>]\n"
      "\t[-z,--blocking <0/1>: barrier after each call]\n"
      "\t[-a,--average <0/1/2/3> report iteration time of <0=rank 0/1=avg/2=min/3=max>]\n"
      "\t[-A,--algorithm <name: force it / list: print the algorithms of this collective / "
      "auto>]\n"
      "\t[-J,--json <file: write every row as one JSON object per line>]\n"
      "\t[-M,--memory <host (default) / shared: host buffers from braidMemAllocHost, read in\n"
      "\t              place by the ranks of this machine / device: buffers from braidMemAlloc, "
      "CUDA>]\n"
      "\t[-h,--help]\n"
      "Ranks: -t N threads in this process, times the processes of braidrun "
      "(BRAID_UNIQUE_ID, BRAID_RANK, BRAID_NRANKS) or mpirun.\n",
      prog);
}

std::string FlagName(int c) {
  return std::string("-") + static_cast<char>(c) + " (--" + LongName(c) + ")";
}

int64_t ParseInt(const Options& o, int c, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    UsageError(o, "invalid value '" + std::string(text) + "' for " + FlagName(c) +
                      ": expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v;
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
  for (int i = 0; i < braidNumOps; ++i) {
    if (strcmp(text, "all") == 0 || strcmp(text, OpName(static_cast<braidRedOp_t>(i))) == 0) {
      o->ops.push_back(static_cast<braidRedOp_t>(i));
    }
  }
  if (o->ops.empty()) {
    UsageError(*o, "unknown op '" + std::string(text) + "' for " + FlagName('o') +
                       ": expected sum, prod, max, min, avg or all");
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
    const int c =
        getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:c:o:d:r:z:a:A:J:M:h", kLongOptions, nullptr);
    if (c == -1) break;
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
          const long v = strtol(optarg, &end, 10);
          if (end == optarg || *end != '\0' || errno == ERANGE || v < 0 || v > INT_MAX) {
            UsageError(*o, "invalid value '" + std::string(optarg) + "' for " + FlagName(c) +
                               ": expected a rank (an integer >= 0), or all (or -1) for every "
                               "rank in turn");
          }
          o->root = static_cast<int>(v);
        }
        break;
      case 'z':
        o->blocking = static_cast<int>(ParseInt(*o, c, optarg, 0, 1));
        break;
      case 'a':
        o->average = static_cast<int>(ParseInt(*o, c, optarg, 0, 3));
        break;
      case 'A':
        o->algorithm = optarg;
        if (o->algorithm.empty()) UsageError(*o, FlagName(c) + " needs an algorithm name");
        break;
      case 'J':
        o->json_path = optarg;
        if (o->json_path.empty()) UsageError(*o, FlagName(c) + " needs a file name");
        break;
      case 'M':
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
  return -1;
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
