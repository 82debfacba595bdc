// braid-train: trains the reference MLP (784-256-128-10), or a small ViT, on Fashion-MNIST with
// data parallelism over Braid: DDP (--zero 0) or ZeRO stages 1-3. Ranks are threads of this process
// (--dp N), or processes started by braidrun / mpirun / torchrun, one rank each (then --dp
// must equal the job's size). Prints, per epoch, the mean training loss, test accuracy,
// samples/s, the share of training time spent waiting for communication, and the bytes of
// parameters, gradients and optimizer state this rank holds; --json prints one JSON object per
// epoch instead. With --pp and --tp the model is also cut into pipeline stages (GPipe or 1F1B
// over --microbatches) and its Linears split Megatron-style; pp x tp x dp ranks in all.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef BRAID_HAVE_MPI
// The C API is all we use; MPI's C++ bindings only bring warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "braid/braid.h"
#include "training/attention.h"
#include "training/data.h"
#include "training/data_parallel.h"
#include "training/model.h"
#include "training/moe.h"
#include "training/optimizer.h"
#include "training/parameter_server.h"
#include "training/pipeline.h"
#include "training/tensor_parallel.h"

namespace {

using namespace braid::training;

struct Options {
  std::string model = "mlp";
  std::string data = "/usr/share/datasets/fashion-mnist";
  int dp = 0;  // 0: the job's size (processes) or 1 (no launcher)
  int zero = 0;
  std::string precision = "fp32";
  int epochs = 8;
  long batch_size = 128;
  double lr = -1.0;  // < 0: the optimizer's default
  uint64_t seed = 42;
  std::string optimizer = "adamw";
  bool json = false;
  double first_bucket_mb = 1.0;
  double bucket_cap_mb = 25.0;
  bool overlap = true;
  long max_steps = 0;  // per epoch; 0: the whole epoch
  long train_limit = 0;
  bool cosine = true;
  bool recompute = false;
  long loss_scale_window = 2000;
  double initial_loss_scale = 65536.0;
  int pp = 1, tp = 1;
  std::string schedule = "1f1b";
  long microbatches = 0;  // 0: pp (one micro-batch per stage), at least 1
  std::vector<size_t> widths = {784, 256, 128, 10};
  int ep = 1;              // expert-parallel ranks (vit-moe), a divisor of the job's size
  long moe_experts = 4;    // E
  int top_k = 1;           // 1 (Switch) or 2 (GShard)
  double capacity = 1.25;  // capacity factor
  int ps_servers = 0;      // > 0: parameter server, the job's first ranks serving
  int staleness = 0;       // SSP bound s (0: BSP)
  std::string moe_flag;    // the last of --moe-experts, --topk, --capacity given
  bool modelParallel() const { return pp > 1 || tp > 1; }
  bool moe() const { return model == "vit-moe"; }
};

const char* kUsage =
    "usage: braid-train [--model mlp|vit|vit-moe] [--data DIR] [--dp N] [--zero 0|1|2|3] "
    "[--precision "
    "fp32|bf16|fp16]\n"
    "                   [--epochs N] [--batch-size GLOBAL] [--lr LR] [--seed S]\n"
    "                   [--optimizer sgd|adamw|adafactor] [--json] [--first-bucket-mb MB]\n"
    "                   [--bucket-cap-mb MB] [--no-overlap] [--max-steps N] [--train-limit N]\n"
    "                   [--constant-lr] [--recompute] [--loss-scale-window N]\n"
    "                   [--initial-loss-scale S] [--pp N] [--tp N] [--schedule gpipe|1f1b]\n"
    "                   [--microbatches M] [--mlp-widths 784,H1,...,10] [--ep N]\n"
    "                   [--moe-experts E] [--topk 1|2] [--capacity F] [--ps-servers S]\n"
    "                   [--staleness S]\n"
    "  --model M           mlp (784-256-128-10), vit (7x7 patches, dim 64, 4 heads, 2 blocks)\n"
    "                      or vit-moe (the vit with each block's MLP a mixture of experts)\n"
    "  --data DIR          Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  --dp N              data-parallel ranks: threads of this process, or the job's size\n"
    "                      under braidrun/mpirun/torchrun (must match it)\n"
    "  --zero S            0: DDP all-reduce; 1: optimizer state, 2: + gradients, 3: + params\n"
    "                      partitioned (ZeRO, Rajbhandari et al. 2020)\n"
    "  --precision P       fp32; bf16 or fp16: forward and backward on a 16-bit copy of the\n"
    "                      fp32 master weights with 16-bit activations, gradients sent as\n"
    "                      16-bit, fp32 optimizer state; fp16 adds dynamic loss scaling\n"
    "  --recompute         activation recomputation: keep each block's input only and run its\n"
    "                      forward again before its backward\n"
    "  --loss-scale-window N   fp16: good steps before the loss scale doubles (default 2000)\n"
    "  --initial-loss-scale S  fp16: the first loss scale (default 65536)\n"
    "  --epochs N          passes over the training set (default 8)\n"
    "  --batch-size B      global batch (split evenly over ranks; default 128)\n"
    "  --lr LR             default 1e-3 (adamw), 0.05 (sgd, momentum 0.9) or 1e-2 (adafactor's\n"
    "                      relative step; --zero 0 only); decayed to 0 over the run by a\n"
    "                      cosine schedule unless --constant-lr\n"
    "  --seed S            initial parameters and shuffling (default 42)\n"
    "  --optimizer O       adamw (default), sgd or adafactor\n"
    "  --json              one JSON object per epoch instead of the table\n"
    "  --first-bucket-mb, --bucket-cap-mb   gradient bucket caps (default 1 and 25 MiB)\n"
    "  --no-overlap        queue gradient collectives only after backward has finished\n"
    "  --max-steps N       stop each epoch after N steps (measurements)\n"
    "  --train-limit N     use only the first N training images\n"
    "  --pp N              pipeline stages (the model's layers cut into N contiguous stages)\n"
    "  --tp N              tensor-parallel ranks (Megatron: column- then row-parallel Linear\n"
    "                      pairs; the ViT's attention heads and MLPs split the same way)\n"
    "                      pp x tp x dp must equal the ranks (threads: pp x tp x dp are started)\n"
    "  --schedule S        1f1b (default; warm-up, one forward one backward, cool-down) or gpipe\n"
    "                      (all forwards, then all backwards)\n"
    "  --microbatches M    micro-batches per step of each data-parallel replica (default --pp)\n"
    "  --mlp-widths W      the MLP's widths, comma-separated (default 784,256,128,10)\n"
    "  --ep N              vit-moe: expert-parallel ranks (a divisor of the data-parallel ranks;\n"
    "                      default 1): each group of N holds the E experts, E/N per rank, and\n"
    "                      exchanges tokens with all-to-all-v; the experts' gradients are\n"
    "                      averaged over the groups\n"
    "  --moe-experts E     vit-moe: experts per layer, a multiple of --ep (default 4)\n"
    "  --topk K            vit-moe: 1 (Switch, default) or 2 (GShard) experts per token\n"
    "  --capacity F        vit-moe: capacity factor: each expert takes ceil(F K T / E) of a\n"
    "                      rank's T tokens, the rest are dropped (default 1.25)\n"
    "  --ps-servers S      parameter server: the job's first S ranks hold the parameters'\n"
    "                      shards and step them, the others are workers that push gradients\n"
    "                      and pull parameters (the global batch is split over the workers)\n"
    "  --staleness S       parameter server: 0 (default) BSP; S > 0 SSP, workers pull every\n"
    "                      S + 1 steps\n";

[[noreturn]] void usageError(const std::string& msg) {
  fprintf(stderr, "braid-train: %s (braid-train --help lists the flags)\n", msg.c_str());
  exit(2);
}

long parseLong(const std::string& flag, const char* v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    usageError(flag + " " + v + ": expected an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]");
  }
  return x;
}

// A finite number above 0.
double parsePositive(const std::string& flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  const double x = strtod(v, &end);
  if (errno || end == v || *end || !(x > 0.0) || !std::isfinite(x)) {
    usageError(flag + " " + v + ": expected a positive number");
  }
  return x;
}

// What the mixture of experts and the parameter server support here.
void checkMoeAndParameterServer(const Options& o) {
  if (o.ep > 1 && !o.moe()) usageError("--ep " + std::to_string(o.ep) + " needs --model vit-moe");
  if (!o.moe() && !o.moe_flag.empty()) usageError(o.moe_flag + " needs --model vit-moe");
  if (o.staleness > 0 && o.ps_servers == 0) {
    usageError("--staleness " + std::to_string(o.staleness) + " needs --ps-servers");
  }
  if (!o.moe() && o.ps_servers == 0) return;
  const std::string what = o.moe() ? "--model vit-moe" : "--ps-servers";
  if (o.moe() && o.ps_servers > 0) usageError("--ps-servers does not take --model vit-moe");
  if (o.modelParallel()) usageError(what + " does not take --pp or --tp");
  if (o.zero != 0) usageError(what + " runs without ZeRO: use --zero 0");
  if (o.precision != "fp32") usageError(what + " runs in fp32 only: use --precision fp32");
  if (o.recompute) usageError(what + ": --recompute is not supported");
  if (o.optimizer == "adafactor") usageError(what + ": adafactor would factor shards");
  if (o.moe()) {
    if (o.moe_experts % o.ep != 0) {
      usageError("--moe-experts " + std::to_string(o.moe_experts) + " is not a multiple of --ep " +
                 std::to_string(o.ep));
    }
    if (o.top_k > o.moe_experts) {
      usageError("--topk " + std::to_string(o.top_k) + " exceeds --moe-experts " +
                 std::to_string(o.moe_experts));
    }
  }
}

// What pipeline and tensor parallelism support here; the ranks' count is checked later.
void checkModelParallel(const Options& o) {
  if (!o.modelParallel()) return;
  const std::string what =
      o.pp > 1 ? "--pp " + std::to_string(o.pp) : "--tp " + std::to_string(o.tp);
  if (o.zero != 0) usageError(what + " runs data parallelism as a plain all-reduce: use --zero 0");
  if (o.precision != "fp32") usageError(what + " runs in fp32 only: use --precision fp32");
  if (o.recompute) usageError(what + ": --recompute is not supported with model parallelism");
  // The ViT's heads are split over the tp ranks (and with them its widths 64 and 128).
  if (o.model == "vit" && 4 % o.tp != 0) {
    usageError("--tp " + std::to_string(o.tp) + " does not divide the ViT's 4 attention heads");
  }
  if (o.tp > 1 && o.optimizer == "adafactor") {
    usageError("--tp " + std::to_string(o.tp) + ": adafactor would factor shards, not matrices");
  }
  // Linears 2j and 2j + 1 form a pair split on width 2j + 1; an unpaired last one is whole.
  for (size_t i = 1; o.tp > 1 && o.model == "mlp" && i + 1 < o.widths.size(); i += 2) {
    if (o.widths[i] % static_cast<size_t>(o.tp) != 0) {
      usageError("--tp " + std::to_string(o.tp) + " does not divide the hidden width " +
                 std::to_string(o.widths[i]) + " that a column-/row-parallel pair splits");
    }
  }
  const size_t layers = o.model == "vit" ? makeVit(28, 28, 7, 64, 4, 2, 10)->numLayers()
                                         : 2 * (o.widths.size() - 1) - 1;
  if (static_cast<size_t>(o.pp) > layers) {
    usageError("--pp " + std::to_string(o.pp) + ": the model has only " + std::to_string(layers) +
               " layers to cut into stages");
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      exit(0);
    } else if (a == "--model") {
      o.model = value();
      if (o.model != "mlp" && o.model != "vit" && o.model != "vit-moe") {
        usageError("--model " + o.model + ": expected mlp, vit or vit-moe");
      }
    } else if (a == "--data") {
      o.data = value();
    } else if (a == "--dp") {
      o.dp = static_cast<int>(parseLong(a, value(), 1, 1024));
    } else if (a == "--zero") {
      o.zero = static_cast<int>(parseLong(a, value(), 0, 3));
    } else if (a == "--precision") {
      o.precision = value();
      if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "fp16") {
        usageError("--precision " + o.precision + ": expected fp32, bf16 or fp16");
      }
    } else if (a == "--epochs") {
      o.epochs = static_cast<int>(parseLong(a, value(), 1, 100000));
    } else if (a == "--batch-size") {
      o.batch_size = parseLong(a, value(), 1, 1 << 24);
    } else if (a == "--lr") {
      o.lr = parsePositive(a, value());
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(parseLong(a, value(), 0, 1L << 62));
    } else if (a == "--optimizer") {
      o.optimizer = value();
      if (o.optimizer != "sgd" && o.optimizer != "adamw" && o.optimizer != "adafactor") {
        usageError("--optimizer " + o.optimizer + ": expected sgd, adamw or adafactor");
      }
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--first-bucket-mb" || a == "--bucket-cap-mb") {
      const char* v = value();
      const double mb = parsePositive(a, v);
      if (mb > 1 << 20) usageError(a + " " + v + ": at most 1048576 (1 TiB)");
      (a == "--first-bucket-mb" ? o.first_bucket_mb : o.bucket_cap_mb) = mb;
    } else if (a == "--constant-lr") {
      o.cosine = false;
    } else if (a == "--recompute") {
      o.recompute = true;
    } else if (a == "--loss-scale-window") {
      o.loss_scale_window = parseLong(a, value(), 1, 1L << 40);
    } else if (a == "--initial-loss-scale") {
      o.initial_loss_scale = parsePositive(a, value());
      if (o.initial_loss_scale > 1e38 || o.initial_loss_scale < 1e-37) {
        usageError("--initial-loss-scale " + std::string(argv[i]) + ": beyond fp32's range");
      }
    } else if (a == "--no-overlap") {
      o.overlap = false;
    } else if (a == "--max-steps") {
      o.max_steps = parseLong(a, value(), 1, 1L << 40);
    } else if (a == "--train-limit") {
      o.train_limit = parseLong(a, value(), 1, 1L << 40);
    } else if (a == "--pp") {
      o.pp = static_cast<int>(parseLong(a, value(), 1, 1024));
    } else if (a == "--tp") {
      o.tp = static_cast<int>(parseLong(a, value(), 1, 1024));
    } else if (a == "--schedule") {
      o.schedule = value();
      if (o.schedule != "gpipe" && o.schedule != "1f1b") {
        usageError("--schedule " + o.schedule + ": expected gpipe or 1f1b");
      }
    } else if (a == "--microbatches") {
      o.microbatches = parseLong(a, value(), 1, 1 << 20);
    } else if (a == "--mlp-widths") {
      const std::string v = value();
      o.widths.clear();
      size_t at = 0;
      while (at <= v.size()) {
        const size_t comma = std::min(v.find(',', at), v.size());
        const std::string w = v.substr(at, comma - at);
        o.widths.push_back(static_cast<size_t>(parseLong("--mlp-widths", w.c_str(), 1, 1 << 16)));
        at = comma + 1;
      }
      if (o.widths.size() < 2 || o.widths.front() != 784 || o.widths.back() != 10) {
        usageError("--mlp-widths " + v + ": expected 784,...,10 (28x28 images, 10 classes)");
      }
    } else if (a == "--ep") {
      o.ep = static_cast<int>(parseLong(a, value(), 1, 1024));
    } else if (a == "--moe-experts") {
      o.moe_experts = parseLong(a, value(), 1, 4096);
      o.moe_flag = a;
    } else if (a == "--topk") {
      o.top_k = static_cast<int>(parseLong(a, value(), 1, 2));
      o.moe_flag = a;
    } else if (a == "--capacity") {
      o.capacity = parsePositive(a, value());
      o.moe_flag = a;
    } else if (a == "--ps-servers") {
      o.ps_servers = static_cast<int>(parseLong(a, value(), 0, 1023));
    } else if (a == "--staleness") {
      o.staleness = static_cast<int>(parseLong(a, value(), 0, 1 << 20));
    } else {
      usageError("unknown argument " + a);
    }
  }
  if (o.lr < 0) o.lr = o.optimizer == "sgd" ? 0.05 : o.optimizer == "adafactor" ? 1e-2 : 1e-3;
  if (o.microbatches == 0) o.microbatches = o.pp;
  checkMoeAndParameterServer(o);
  checkModelParallel(o);
  if (o.optimizer == "adafactor" && o.zero != 0) {
    usageError("--optimizer adafactor factors whole matrices, which --zero " +
               std::to_string(o.zero) + " shards: use --zero 0");
  }
  return o;
}

// pp x tp x dp must be the job's size (dp defaults to what is left); "" when it is.
std::string layoutError(const Options& o, int nranks) {
  if (o.ep > 1 && nranks % o.ep != 0) {
    return "--ep " + std::to_string(o.ep) + " does not divide the job's " + std::to_string(nranks) +
           " ranks";
  }
  if (o.ps_servers >= nranks) {
    return "--ps-servers " + std::to_string(o.ps_servers) + " leaves no worker among the job's " +
           std::to_string(nranks) + " ranks";
  }
  const int model = o.pp * o.tp;
  const std::string flags = "--pp " + std::to_string(o.pp) + " x --tp " + std::to_string(o.tp);
  if (o.dp == 0 && nranks % model != 0) {
    return flags + " does not divide the job's " + std::to_string(nranks) +
           " ranks (pp x tp x dp must equal the world size)";
  }
  if (o.dp != 0 && o.dp * model != nranks) {
    if (model == 1) {
      return "--dp " + std::to_string(o.dp) + " differs from the job's " + std::to_string(nranks) +
             " ranks (pp x tp x dp must equal the world size)";
    }
    return flags + " x --dp " + std::to_string(o.dp) + " = " + std::to_string(o.dp * model) +
           " differs from the job's " + std::to_string(nranks) +
           " ranks (pp x tp x dp must equal the world size)";
  }
  return "";
}

// The global batch must split evenly over the ranks that take data; "" when it does.
std::string batchError(const Options& o, int nranks) {
  const int takers = o.ps_servers > 0    ? nranks - o.ps_servers
                     : o.modelParallel() ? nranks / (o.pp * o.tp)
                                         : nranks;
  const char* what = o.ps_servers > 0    ? " workers"
                     : o.modelParallel() ? " data-parallel replicas"
                                         : " data-parallel ranks";
  if (takers <= 0 || o.batch_size % takers == 0) return "";  // layoutError names a layout of 0
  return "--batch-size " + std::to_string(o.batch_size) + " is not a multiple of the " +
         std::to_string(takers) + what +
         (o.ps_servers > 0 ? " (the ranks --ps-servers " + std::to_string(o.ps_servers) + " leaves)"
                           : std::string());
}

// A launcher that starts one process per rank leaves one of these set.
bool launchedAsRanks() {
  for (const char* v : {"BRAID_UNIQUE_ID", "BRAID_COMM_ID", "BRAID_NRANKS", "MASTER_ADDR",
                        "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (getenv(v) != nullptr) return true;
  }
  return false;
}

// mpirun (Open MPI, or MPICH's Hydra) with no rendezvous address for braidCommInitFromEnv.
bool startedByMpirunWithoutRendezvous() {
  if (getenv("OMPI_COMM_WORLD_SIZE") == nullptr && getenv("PMI_SIZE") == nullptr) return false;
  for (const char* v : {"BRAID_UNIQUE_ID", "BRAID_COMM_ID", "MASTER_ADDR"}) {
    if (getenv(v) != nullptr) return false;
  }
  return true;
}

// Rank 0's unique id to every rank through MPI_Bcast (the perf binaries' way), then
// braidCommInitRank. Without MPI, says how to launch instead.
braidResult_t initFromMpi(braidComm_t* comm) {
#ifdef BRAID_HAVE_MPI
  MPI_Init(nullptr, nullptr);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  braidUniqueId id{};
  int ok = 1;
  if (rank == 0 && braidGetUniqueId(&id) != braidSuccess) ok = 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return braidSystemError;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return braidCommInitRank(comm, nranks, id, rank);
#else
  (void)comm;
  fprintf(stderr,
          "braid-train: started by mpirun, but built without MPI (BRAID_HAVE_MPI): rebuild with "
          "-Dmpi=enabled, set BRAID_COMM_ID=host:port (rank 0's host and a free port), or "
          "launch with braidrun\n");
  exit(2);
#endif
}

std::mutex print_mutex;

// A failed rank ends the whole job: its peers would otherwise wait in a collective until
// BRAID_TIMEOUT. braidrun stops the other processes when one exits non-zero.
[[noreturn]] void fail(int rank, const std::string& msg) {
  {
    std::lock_guard<std::mutex> lock(print_mutex);
    fprintf(stderr, "braid-train: rank %d: %s\n", rank, msg.c_str());
    fflush(stderr);
  }
  std::quick_exit(1);
}

std::string mib(size_t bytes) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.3f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string precisionLine(const Options& o) {
  if (o.precision == "fp32") return "fp32";
  std::string s = o.precision + " compute and gradients, fp32 master weights";
  if (o.precision == "fp16") {
    char buf[96];
    snprintf(buf, sizeof(buf), ", dynamic loss scaling (initial %g, doubled after %ld good steps)",
             o.initial_loss_scale, o.loss_scale_window);
    s += buf;
  }
  return s;
}

std::string modelLine(const Options& o) {
  if (o.model == "vit") return "vit (28x28, patch 7, dim 64, 4 heads, 2 blocks)";
  if (o.moe()) {
    char buf[160];
    snprintf(buf, sizeof(buf),
             "vit-moe (28x28, patch 7, dim 64, 4 heads, 2 blocks, %ld experts of width 128, "
             "top-%d, capacity factor %g, ep %d)",
             o.moe_experts, o.top_k, o.capacity, o.ep);
    return buf;
  }
  std::string s = "mlp ";
  for (size_t i = 0; i < o.widths.size(); ++i) {
    if (i > 0) s += '-';
    s += std::to_string(o.widths[i]);
  }
  return s;
}

void check(braidResult_t r, const char* what) {
  if (r != braidSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + braidGetErrorString(r) + ": " +
                             braidGetLastError(nullptr));
  }
}

// The training images used, and the steps of each epoch, the same on every rank: each of
// `takers` ranks reads ceil(count / takers) of them (distributedIndices) in local batches,
// at most --max-steps.
struct EpochPlan {
  size_t train_count = 0, steps = 0, total_steps = 0;
  EpochPlan(const Options& o, const ImageDataset& train, size_t takers, size_t local_batch) {
    train_count =
        o.train_limit > 0 ? std::min(train.count, static_cast<size_t>(o.train_limit)) : train.count;
    const size_t per_rank = (train_count + takers - 1) / takers;
    steps = (per_rank + local_batch - 1) / local_batch;
    if (o.max_steps > 0) steps = std::min(steps, static_cast<size_t>(o.max_steps));
    total_steps = steps * static_cast<size_t>(o.epochs);
  }
};

// Test accuracy: share `share` of `shares` evaluates a contiguous part of the test set in
// batches of 1000, every share running the same number of batches, the last ones maybe empty
// (forward may be collective: ZeRO-3, a pipeline, a mixture of experts). forward returns the
// logits, or nullptr where this rank holds none. Returns the images classified right.
size_t countCorrect(const ImageDataset& test, size_t share, size_t shares,
                    const std::function<const Tensor*(const Tensor&)>& forward) {
  const size_t per_share = (test.count + shares - 1) / shares;
  const size_t lo = std::min(test.count, share * per_share);
  const size_t hi = std::min(test.count, lo + per_share);
  std::vector<size_t> test_idx(test.count);
  for (size_t i = 0; i < test.count; ++i) test_idx[i] = i;
  const size_t eval_batch = 1000;
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<int32_t> labels;
  size_t correct = 0;
  for (size_t b = 0; b < (per_share + eval_batch - 1) / eval_batch; ++b) {
    const size_t begin = std::min(hi, lo + b * eval_batch);
    const size_t end = std::min(hi, begin + eval_batch);
    gatherBatch(test, test_idx, begin, end, x, labels);
    const Tensor* logits = forward(x);
    if (logits != nullptr && end > begin) {
      loss.forward(*logits, labels);
      correct += loss.correct();
    }
  }
  return correct;
}

// Pipeline and/or tensor parallelism (with data parallelism over the remaining factor): each
// rank holds one stage, or its shards of one stage, and steps its own parameters.
void trainModelParallel(braidComm_t world, int rank, const Options& o, const ImageDataset& train,
                        const ImageDataset& test) {
  ParallelGroups groups(world, o.tp, o.pp);
  const ParallelLayout& l = groups.layout();
  TensorParallelCounters tpc;
  // Copies of the stage's layers hold the activations of micro-batches in flight.
  const ModelFactory factory = [&]() -> std::unique_ptr<Sequential> {
    if (o.tp > 1 && o.model == "vit") {
      return makeTensorParallelVit(28, 28, 7, 64, 4, 2, 10, o.seed, groups.tp(), &tpc);
    }
    if (o.tp > 1) return makeTensorParallelMlp(o.widths, o.seed, groups.tp(), &tpc);
    return o.model == "vit" ? makeVit(28, 28, 7, 64, 4, 2, 10) : makeMlp(o.widths);
  };
  std::unique_ptr<Sequential> model = factory();
  if (o.tp == 1) model->initialize(o.seed);
  PipelineOptions po;
  po.schedule = o.schedule == "gpipe" ? PipelineSchedule::kGPipe : PipelineSchedule::k1F1B;
  po.micro_batches = static_cast<size_t>(o.microbatches);
  const std::vector<size_t> cuts = stageCuts(*model, o.pp);
  PipelineStage stage(std::move(model), groups.pp(), po, factory);
  auto optimizer = makeOptimizer(o.optimizer, static_cast<float>(o.lr));
  // Loss, accuracy and samples are counted once per replica: on its last stage's tp rank 0.
  const bool counts = stage.isLast() && l.tp_rank == 0;
  const size_t dp = static_cast<size_t>(l.dp);
  const size_t local_batch = static_cast<size_t>(o.batch_size) / dp;
  const double p = o.pp, m = static_cast<double>(o.microbatches);
  const double formula = (p - 1) / (m + p - 1);
  if (rank == 0 && !o.json) {
    std::string stages;
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      stages += (s ? " | " : "") + std::string("layers ") + std::to_string(cuts[s]) + "-" +
                std::to_string(cuts[s + 1] - 1);
    }
    printf(
        "# braid-train: model %s, tp %d x pp %d x dp %d, %s schedule, %ld micro-batches per "
        "step (bubble (p-1)/(m+p-1) = %.3f), %s, global batch %ld (%zu per replica), lr %g\n"
        "# stages: %s\n",
        modelLine(o).c_str(), l.tp, l.pp, l.dp, o.schedule.c_str(), o.microbatches, formula,
        o.optimizer.c_str(), o.batch_size, local_batch, o.lr, stages.c_str());
    // Per-rank columns are the most of any rank; bubble is the mean over ranks.
    printf("%6s %10s %10s %12s %8s %8s %8s %14s %14s %14s\n", "epoch", "loss", "test_acc",
           "samples/s", "bubble", "min", "max", "p2p_B/step", "tp_B/step", "act_bytes");
    fflush(stdout);
  }
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<int32_t> labels;
  const EpochPlan plan(o, train, dp, local_batch);
  const size_t train_count = plan.train_count, total_steps = plan.total_steps;
  size_t global_step = 0;
  const int world_size = l.world;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const std::vector<size_t> idx =
        distributedIndices(train_count, l.dp_rank, l.dp, o.seed, static_cast<uint64_t>(epoch));
    size_t steps = (idx.size() + local_batch - 1) / local_batch;
    if (o.max_steps > 0) steps = std::min(steps, static_cast<size_t>(o.max_steps));
    stage.resetCounters();
    tpc = TensorParallelCounters();
    double loss_sum = 0.0;
    size_t samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < steps; ++s) {
      const size_t begin = s * local_batch, end = std::min(idx.size(), begin + local_batch);
      gatherBatch(train, idx, begin, end, x, labels);
      if (o.cosine) {
        optimizer->setLearningRate(
            cosineLearningRate(static_cast<float>(o.lr), global_step, total_steps));
      }
      ++global_step;
      loss_sum += stage.step(x, labels, loss);
      stage.optimizerStep(*optimizer, groups.dp());
      samples += end - begin;
    }
    const double train_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const PipelineCounters pc = stage.counters();
    const uint64_t tp_bytes = tpc.forward_bytes + tpc.backward_bytes;

    // Each replica evaluates a contiguous share of the test set, whole batches through the
    // pipeline; every rank of a replica runs the same batches.
    const size_t correct =
        countCorrect(test, static_cast<size_t>(l.dp_rank), dp, [&](const Tensor& images) {
          const Tensor* logits = stage.forward(images);
          return counts ? logits : nullptr;
        });
    const double bubble = pc.step_seconds > 0 ? pc.wait_seconds / pc.step_seconds : 0.0;
    std::vector<double> totals = {counts ? loss_sum / std::max<size_t>(steps, 1) : 0.0,
                                  static_cast<double>(correct),
                                  counts ? static_cast<double>(samples) : 0.0, train_s, bubble};
    check(braidAllReduce(totals.data(), totals.data(), totals.size(), braidFloat64, braidSum, world,
                         nullptr),
          "braidAllReduce (epoch totals)");
    // Per-rank figures: the bubble's range, and the most any rank sends or holds.
    std::vector<double> extremes = {bubble, -bubble, -static_cast<double>(pc.p2p_bytes),
                                    -static_cast<double>(tp_bytes),
                                    -static_cast<double>(pc.peak_activation_elements * 4)};
    check(braidAllReduce(extremes.data(), extremes.data(), extremes.size(), braidFloat64, braidMin,
                         world, nullptr),
          "braidAllReduce (per-rank extremes)");
    if (!std::isfinite(totals[0]))
      fail(rank, "the training loss is not finite after epoch " + std::to_string(epoch + 1) +
                     ": training diverged (try a lower --lr)");
    if (rank == 0) {
      const double mean_loss = totals[0] / l.dp;
      const double accuracy = totals[1] / static_cast<double>(test.count);
      const double samples_per_s = totals[2] / (totals[3] / world_size);
      const double mean_bubble = totals[4] / world_size;
      const double per_step = steps ? 1.0 / static_cast<double>(steps) : 0.0;
      if (o.json) {
        nlohmann::json j = {{"epoch", epoch + 1},
                            {"loss", mean_loss},
                            {"test_accuracy", accuracy},
                            {"samples_per_s", samples_per_s},
                            {"step_ms", 1e3 * totals[3] / world_size * per_step},
                            {"bubble_fraction", mean_bubble},
                            {"bubble_fraction_min", extremes[0]},
                            {"bubble_fraction_max", -extremes[1]},
                            {"bubble_formula", formula},
                            {"p2p_bytes_per_step", -extremes[2] * per_step},
                            {"tp_allreduce_bytes_per_step", -extremes[3] * per_step},
                            {"peak_activation_bytes", -extremes[4]},
                            {"recomputed_forwards_per_step",
                             static_cast<double>(pc.recomputed_forwards) * per_step},
                            {"stage_parameters", stage.numParameters()},
                            {"tp", l.tp},
                            {"pp", l.pp},
                            {"dp", l.dp},
                            {"schedule", o.schedule},
                            {"microbatches", o.microbatches},
                            {"model", o.model}};
        printf("%s\n", j.dump().c_str());
      } else {
        printf("%6d %10.4f %10.4f %12.0f %8.3f %8.3f %8.3f %14.0f %14.0f %14.0f\n", epoch + 1,
               mean_loss, accuracy, samples_per_s, mean_bubble, extremes[0], -extremes[1],
               -extremes[2] * per_step, -extremes[3] * per_step, -extremes[4]);
      }
      fflush(stdout);
    }
  }
}

// A communicator split from the world, destroyed with this.
struct SplitComm {
  braidComm_t comm = nullptr;
  SplitComm(braidComm_t parent, int color, int key, const char* what) {
    check(braidCommSplit(parent, color, key, &comm, nullptr), what);
  }
  ~SplitComm() {
    if (comm != nullptr) braidCommDestroy(comm);
  }
  SplitComm(const SplitComm&) = delete;
  SplitComm& operator=(const SplitComm&) = delete;
};

// The MoE layers' figures of one step, summed over the layers.
struct MoeStep {
  double aux_loss = 0, dropped = 0, alltoall_bytes = 0;
  static MoeStep of(const std::vector<MoELayer*>& moes) {
    MoeStep m;
    for (const MoELayer* l : moes) {
      m.aux_loss += l->auxLoss();
      m.dropped += static_cast<double>(l->dropped());
      m.alltoall_bytes += static_cast<double>(l->alltoallBytes());
    }
    return m;
  }
};

void trainParameterServer(braidComm_t comm, int rank, const Options& o, const ImageDataset& train,
                          const ImageDataset& test);

void trainRank(braidComm_t comm, int rank, int nranks, const Options& o, const ImageDataset& train,
               const ImageDataset& test) {
  if (o.modelParallel()) {
    trainModelParallel(comm, rank, o, train, test);
    return;
  }
  if (o.ps_servers > 0) {
    trainParameterServer(comm, rank, o, train, test);
    return;
  }
  // vit-moe: the expert-parallel group (ranks r / ep together) and the ranks holding the same
  // experts (r % ep), whose gradients DataParallel averages (Megatron's expert-data-parallel
  // group). Both are split from the world, so their calls never meet the engine's stream.
  std::unique_ptr<SplitComm> ep_group, expert_replicas;
  std::vector<MoELayer*> moes;
  std::unique_ptr<Sequential> model;
  if (o.moe()) {
    ep_group = std::make_unique<SplitComm>(comm, rank / o.ep, rank, "braidCommSplit (--ep group)");
    expert_replicas =
        std::make_unique<SplitComm>(comm, rank % o.ep, rank, "braidCommSplit (expert replicas)");
    MoEOptions mo;
    mo.experts = static_cast<size_t>(o.moe_experts);
    mo.hidden = 128;  // the dense ViT's MLP width
    mo.top_k = o.top_k;
    mo.capacity_factor = o.capacity;
    model = makeVitMoe(28, 28, 7, 64, 4, 2, 10, mo, ep_group->comm, &moes);
  } else {
    model = o.model == "vit" ? makeVit(28, 28, 7, 64, 4, 2, 10) : makeMlp(o.widths);
  }
  model->initialize(o.seed);
  auto optimizer = makeOptimizer(o.optimizer, static_cast<float>(o.lr));
  DataParallelOptions dpo;
  dpo.zero_stage = o.zero;
  dpo.first_bucket_bytes = static_cast<size_t>(std::max(1.0, o.first_bucket_mb * (1 << 20)));
  dpo.bucket_cap_bytes = static_cast<size_t>(std::max(1.0, o.bucket_cap_mb * (1 << 20)));
  dpo.overlap = o.overlap;
  const bool fp16 = o.precision == "fp16";
  dpo.grad_dtype = o.precision == "bf16" ? braidBfloat16 : fp16 ? braidFloat16 : braidFloat32;
  dpo.compute = o.precision == "bf16" ? Precision::kBf16
                : fp16                ? Precision::kFp16
                                      : Precision::kFp32;
  dpo.loss_scaling = fp16;
  dpo.scaler.growth_interval = o.loss_scale_window;
  dpo.scaler.initial_scale = static_cast<float>(o.initial_loss_scale);
  for (MoELayer* m : moes)
    for (Parameter* p : m->expertParameters()) dpo.local_parameters.push_back(p);
  if (expert_replicas) dpo.local_comm = expert_replicas->comm;
  model->setRecompute(o.recompute);
  DataParallel engine(*model, *optimizer, comm, dpo);
  const size_t act_bytes_per_element = bytesPerElement(dpo.compute);
  const size_t psi = engine.numParameters();
  const size_t n = static_cast<size_t>(nranks);
  const size_t local_batch = static_cast<size_t>(o.batch_size) / n;
  const bool adam = o.optimizer == "adamw";
  if (rank == 0 && !o.json) {
    const size_t k = adam ? 8 : 4;  // optimizer state bytes per parameter
    // AdaFactor's state is sublinear (rows + cols per matrix): its own count, not k psi.
    const bool factored = o.optimizer == "adafactor";
    const size_t p = 4 * psi, g = 4 * psi, s = factored ? optimizer->stateBytes() : k * psi;
    const size_t want_p = o.zero >= 3 ? p / n : p, want_g = o.zero >= 2 ? g / n : g,
                 want_s = o.zero >= 1 ? s / n : s;
    printf(
        "# braid-train: model %s, psi = %zu parameters, dp %d, zero %d, %s, %s, "
        "global batch %ld (%zu per rank), lr %g, %zu %s%s\n",
        modelLine(o).c_str(), psi, nranks, o.zero, o.optimizer.c_str(), precisionLine(o).c_str(),
        o.batch_size, local_batch, o.lr, engine.numUnits(),
        o.zero == 3 ? "layer units" : "gradient buckets",
        o.recompute ? ", activation recomputation" : "");
    if (o.moe()) {
      size_t local = 0;
      for (MoELayer* m : moes)
        for (Parameter* p : m->expertParameters()) local += p->numel;
      printf(
          "# experts: %zu parameters on this rank (%ld of %ld experts per layer), outside "
          "psi; gradients averaged over %d expert replica(s)\n",
          local, o.moe_experts / o.ep, o.moe_experts, nranks / o.ep);
    }
    const std::string state = factored ? "factored state" : std::to_string(k) + "psi state";
    printf(
        "# per-rank memory, paper's formulas (fp32, %s: 4psi params, 4psi grads, %s): params %s, "
        "grads %s, optimizer %s, total %s\n",
        o.optimizer.c_str(), state.c_str(), mib(want_p).c_str(), mib(want_g).c_str(),
        mib(want_s).c_str(), mib(want_p + want_g + want_s).c_str());
    printf("%6s %10s %10s %12s %10s %14s %14s %14s %12s %12s %12s %8s\n", "epoch", "loss",
           "test_acc", "samples/s", "comm_frac", "param_bytes", "grad_bytes", "optim_bytes",
           "comm_B/step", "act_bytes", "loss_scale", "skipped");
    fflush(stdout);
  }
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<int32_t> labels;
  const EpochPlan plan(o, train, n, local_batch);
  const size_t train_count = plan.train_count, total_steps = plan.total_steps;
  size_t global_step = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const std::vector<size_t> idx =
        distributedIndices(train_count, rank, nranks, o.seed, static_cast<uint64_t>(epoch));
    size_t steps = (idx.size() + local_batch - 1) / local_batch;
    if (o.max_steps > 0) steps = std::min(steps, static_cast<size_t>(o.max_steps));
    engine.resetCounters();
    double loss_sum = 0.0;
    size_t samples = 0;
    size_t act_elements = 0, act_peak_elements = 0;
    MoeStep moe_sum;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < steps; ++s) {
      const size_t begin = s * local_batch, end = std::min(idx.size(), begin + local_batch);
      gatherBatch(train, idx, begin, end, x, labels);
      if (o.cosine) {
        optimizer->setLearningRate(
            cosineLearningRate(static_cast<float>(o.lr), global_step, total_steps));
      }
      ++global_step;
      loss_sum += engine.step(x, labels, loss);
      samples += end - begin;
      const MoeStep m = MoeStep::of(moes);
      moe_sum.aux_loss += m.aux_loss;
      moe_sum.dropped += m.dropped;
      moe_sum.alltoall_bytes += m.alltoall_bytes;
      act_elements = std::max(act_elements, model->activationElements());
      act_peak_elements = std::max(act_peak_elements, model->peakBackwardActivationElements());
    }
    const double train_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double comm_s = engine.commSeconds();
    const uint64_t comm_bytes = engine.commVolumeBytes();

    // Test accuracy: rank r evaluates a contiguous share of the test set; every rank runs the
    // same number of batches (ZeRO-3's forward is collective), some maybe empty.
    const size_t correct =
        countCorrect(test, static_cast<size_t>(rank), n,
                     [&](const Tensor& images) { return &engine.forward(images); });
    std::vector<double> totals = {loss_sum / std::max<size_t>(steps, 1),
                                  static_cast<double>(correct),
                                  static_cast<double>(samples),
                                  train_s,
                                  comm_s,
                                  moe_sum.aux_loss,
                                  moe_sum.dropped,
                                  moe_sum.alltoall_bytes};
    engine.allReduceSum(totals);
    // Every rank holds the same totals, so all stop together on a diverged run.
    if (!std::isfinite(totals[0]))
      fail(rank, "the training loss is not finite after epoch " + std::to_string(epoch + 1) +
                     ": training diverged (try a lower --lr)");
    const MemoryAccount mem = engine.memory();
    if (rank == 0) {
      const double mean_loss = totals[0] / nranks;
      const double accuracy = totals[1] / static_cast<double>(test.count);
      const double train_time = totals[3] / nranks;
      const double samples_per_s = totals[2] / train_time;
      const double comm_fraction = totals[4] / totals[3];
      const double bytes_per_step = steps ? static_cast<double>(comm_bytes) / steps : 0.0;
      // MoE, per rank and step, summed over the layers. Choices: each token's top-k in each
      // layer, 16 tokens an image. With nothing dropped a rank sends 4 x tokens x top-k x dim
      // x 4 B a layer: each kept choice's row there and back, in forward and in backward.
      const double per_rank_step =
          1.0 / (static_cast<double>(nranks) * static_cast<double>(std::max<size_t>(steps, 1)));
      const double tokens = totals[2] * 16 * per_rank_step;
      const double layer_choices = tokens * o.top_k * static_cast<double>(moes.size());
      const double moe_aux = totals[5] * per_rank_step;
      const double moe_dropped = layer_choices > 0 ? totals[6] * per_rank_step / layer_choices : 0;
      const double moe_bytes = totals[7] * per_rank_step;
      const double moe_formula = 4.0 * layer_choices * 64 * 4;
      if (o.json) {
        nlohmann::json j = {
            {"epoch", epoch + 1},
            {"loss", mean_loss},
            {"test_accuracy", accuracy},
            {"samples_per_s", samples_per_s},
            {"comm_fraction", comm_fraction},
            {"param_bytes", mem.param_bytes},
            {"grad_bytes", mem.grad_bytes},
            {"optim_bytes", mem.optim_bytes},
            {"comm_bytes_per_step", bytes_per_step},
            {"step_ms", 1e3 * train_time / std::max<size_t>(steps, 1)},
            {"psi", psi},
            {"dp", nranks},
            {"zero", o.zero},
            {"precision", o.precision},
            {"recompute", o.recompute},
            {"activation_bytes", act_elements * act_bytes_per_element},
            {"peak_backward_activation_bytes", act_peak_elements * act_bytes_per_element},
            {"loss_scale", engine.lossScale()},
            {"skipped_steps", engine.skippedSteps()},
            {"model", o.model}};
        if (o.moe()) {
          j["ep"] = o.ep;
          j["moe_experts"] = o.moe_experts;
          j["topk"] = o.top_k;
          j["capacity_factor"] = o.capacity;
          j["moe_aux_loss"] = moe_aux;
          j["moe_dropped_fraction"] = moe_dropped;
          j["alltoall_bytes_per_rank_step"] = moe_bytes;
          j["alltoall_bytes_formula"] = moe_formula;
        }
        printf("%s\n", j.dump().c_str());
      } else {
        printf("%6d %10.4f %10.4f %12.0f %10.3f %14zu %14zu %14zu %12.0f %12zu %12g %8ld\n",
               epoch + 1, mean_loss, accuracy, samples_per_s, comm_fraction, mem.param_bytes,
               mem.grad_bytes, mem.optim_bytes, bytes_per_step,
               act_elements * act_bytes_per_element, engine.lossScale(), engine.skippedSteps());
        if (o.moe()) {
          printf(
              "#      moe: aux loss %.5f, dropped %.2f%% of choices, all-to-all-v %.0f B per "
              "rank and step (4 x tokens x top-k x dim x 4 B x layers = %.0f)\n",
              moe_aux, 100 * moe_dropped, moe_bytes, moe_formula);
        }
      }
      fflush(stdout);
    }
  }
}

// The parameter server (--ps-servers S): ranks [0, S) serve, the others train on shares of
// the data and push / pull; BSP (--staleness 0) or SSP.
void trainParameterServer(braidComm_t comm, int rank, const Options& o, const ImageDataset& train,
                          const ImageDataset& test) {
  auto model = o.model == "vit" ? makeVit(28, 28, 7, 64, 4, 2, 10) : makeMlp(o.widths);
  model->initialize(o.seed);
  auto optimizer = makeOptimizer(o.optimizer, static_cast<float>(o.lr));
  ParameterServer ps(*model, *optimizer, comm, {o.ps_servers, o.staleness});
  const int workers = ps.workers(), worker = rank - o.ps_servers;
  const size_t w = static_cast<size_t>(workers);
  const size_t local_batch = static_cast<size_t>(o.batch_size) / w;
  if (rank == 0 && !o.json) {
    printf(
        "# braid-train: model %s, psi = %zu parameters, parameter server: %d server(s), %d "
        "worker(s), %s (staleness %d), %s, global batch %ld (%zu per worker), lr %g\n",
        modelLine(o).c_str(), model->numParameters(), o.ps_servers, workers,
        o.staleness ? "SSP" : "BSP", o.staleness, o.optimizer.c_str(), o.batch_size, local_batch,
        o.lr);
    printf("%6s %10s %10s %12s %14s %12s\n", "epoch", "loss", "test_acc", "samples/s",
           "push_B/step", "pulls/step");
    fflush(stdout);
  }
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<int32_t> labels;
  // Servers run as many clocks as the workers' steps: every rank computes the same count.
  const EpochPlan plan(o, train, w, local_batch);
  const size_t train_count = plan.train_count, steps = plan.steps, total_steps = plan.total_steps;
  size_t global_step = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::vector<size_t> idx;
    if (!ps.isServer()) {
      idx = distributedIndices(train_count, worker, workers, o.seed, static_cast<uint64_t>(epoch));
    }
    const size_t bytes0 = ps.bytesSent(), pulls0 = ps.pulls();
    double loss_sum = 0.0;
    size_t samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < steps; ++s, ++global_step) {
      if (o.cosine) {
        optimizer->setLearningRate(
            cosineLearningRate(static_cast<float>(o.lr), global_step, total_steps));
      }
      if (ps.isServer()) {
        ps.serve();
        continue;
      }
      // distributedIndices pads the shares to one length: every worker has rows at each step.
      const size_t begin = std::min(idx.size(), s * local_batch);
      const size_t end = std::min(idx.size(), begin + local_batch);
      gatherBatch(train, idx, begin, end, x, labels);
      loss_sum += ps.step(x, labels, loss);
      samples += end - begin;
    }
    ps.synchronize();  // workers' copies are now the servers' latest
    const double train_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The workers evaluate contiguous shares of the test set.
    const size_t correct =
        ps.isServer() ? 0
                      : countCorrect(test, static_cast<size_t>(worker), w,
                                     [&](const Tensor& images) { return &model->forward(images); });
    const bool counts = !ps.isServer();
    std::vector<double> totals = {counts ? loss_sum / std::max<size_t>(steps, 1) : 0.0,
                                  static_cast<double>(correct),
                                  static_cast<double>(samples),
                                  counts ? train_s : 0.0,
                                  counts ? static_cast<double>(ps.bytesSent() - bytes0) : 0.0,
                                  counts ? static_cast<double>(ps.pulls() - pulls0) : 0.0};
    check(braidAllReduce(totals.data(), totals.data(), totals.size(), braidFloat64, braidSum, comm,
                         nullptr),
          "braidAllReduce (epoch totals)");
    if (!std::isfinite(totals[0]))
      fail(rank, "the training loss is not finite after epoch " + std::to_string(epoch + 1) +
                     ": training diverged (try a lower --lr)");
    if (rank != 0) continue;
    const double per_worker_step =
        1.0 / (static_cast<double>(workers) * std::max<size_t>(steps, 1));
    const double mean_loss = totals[0] / workers;
    const double accuracy = totals[1] / static_cast<double>(test.count);
    const double samples_per_s = totals[2] / (totals[3] / workers);
    const double push_bytes = totals[4] * per_worker_step;
    // The final synchronize's pull counts too.
    const double pulls = totals[5] * per_worker_step;
    if (o.json) {
      nlohmann::json j = {{"epoch", epoch + 1},
                          {"loss", mean_loss},
                          {"test_accuracy", accuracy},
                          {"samples_per_s", samples_per_s},
                          {"step_ms", 1e3 * totals[3] * per_worker_step},
                          {"push_bytes_per_worker_step", push_bytes},
                          {"pulls_per_worker_step", pulls},
                          {"psi", model->numParameters()},
                          {"ps_servers", o.ps_servers},
                          {"workers", workers},
                          {"staleness", o.staleness},
                          {"model", o.model}};
      printf("%s\n", j.dump().c_str());
    } else {
      printf("%6d %10.4f %10.4f %12.0f %14.0f %12.3f\n", epoch + 1, mean_loss, accuracy,
             samples_per_s, push_bytes, pulls);
    }
    fflush(stdout);
  }
}

void runRank(braidComm_t comm, int rank, int nranks, const Options& o, const ImageDataset& train,
             const ImageDataset& test) {
  try {
    trainRank(comm, rank, nranks, o, train, test);
  } catch (const std::exception& e) {
    fail(rank, e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Threads: the layout is known now, before the data is read.
  const int thread_ranks = (o.dp == 0 ? 1 : o.dp) * o.pp * o.tp;
  if (!launchedAsRanks()) {
    for (const std::string& e : {layoutError(o, thread_ranks), batchError(o, thread_ranks)})
      if (!e.empty()) usageError(e);
  }
  ImageDataset train, test;
  try {
    train = loadFashionMnist(o.data, true);
    test = loadFashionMnist(o.data, false);
    // The models take 28x28 images: a set of another size fails here, not after an epoch.
    for (const ImageDataset* set : {&train, &test})
      if (set->features != 784)
        throw std::runtime_error(std::string(set == &train ? "training" : "test") +
                                 " images have " + std::to_string(set->features) +
                                 " pixels, not 28x28 = 784");
    standardize(train, 0.2860f, 0.3530f);
    standardize(test, 0.2860f, 0.3530f);
  } catch (const std::exception& e) {
    fprintf(stderr, "braid-train: --data %s: %s\n", o.data.c_str(), e.what());
    return 1;
  }
  if (launchedAsRanks()) {
    braidComm_t comm = nullptr;
    const bool mpi = startedByMpirunWithoutRendezvous();
    braidResult_t r = mpi ? initFromMpi(&comm) : braidCommInitFromEnv(&comm);
    if (r != braidSuccess) {
      fprintf(stderr, "braid-train: %s failed: %s: %s\n",
              mpi ? "braidCommInitRank (unique id from MPI)" : "braidCommInitFromEnv",
              braidGetErrorString(r), braidGetLastError(nullptr));
      return 1;
    }
    int rank = 0, nranks = 1;
    braidCommUserRank(comm, &rank);
    braidCommCount(comm, &nranks);
    std::string layout = layoutError(o, nranks);
    if (layout.empty()) layout = batchError(o, nranks);
    if (!layout.empty()) {
      // Every rank sees the same flags and job size, so all of them stop here.
      if (rank == 0) fprintf(stderr, "braid-train: %s\n", layout.c_str());
      braidCommDestroy(comm);
      return 2;
    }
    // One BLAS thread per rank process: ranks share the host's cores.
    if (nranks > 1) setBlasThreads(1);
    runRank(comm, rank, nranks, o, train, test);
    braidCommDestroy(comm);
#ifdef BRAID_HAVE_MPI
    if (mpi) MPI_Finalize();
#endif
    return 0;
  }
  const int nranks = thread_ranks;
  if (nranks > 1) setBlasThreads(1);
  std::vector<braidComm_t> comms(nranks, nullptr);
  braidResult_t r = braidCommInitAll(comms.data(), nranks, nullptr);
  if (r != braidSuccess) {
    fprintf(stderr, "braid-train: braidCommInitAll(%d) failed: %s: %s\n", nranks,
            braidGetErrorString(r), braidGetLastError(nullptr));
    return 1;
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] { runRank(comms[rank], rank, nranks, o, train, test); });
  }
  for (auto& t : threads) t.join();
  for (braidComm_t c : comms) braidCommDestroy(c);
  return 0;
}
