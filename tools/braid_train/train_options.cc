#include "train_options.h"

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

#include "training/attention.h"

namespace braid::training::cli {

namespace {

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
    "                   [--staleness S] [--elastic [--log-every N]]\n"
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
    "                      S + 1 steps\n"
    "  --elastic           survive a lost rank (processes, --zero 0): the survivors revoke,\n"
    "                      shrink, resynchronise and go on from the step in flight, with the\n"
    "                      same global batch split over fewer ranks (braidrun --elastic);\n"
    "                      --log-every N prints \"# step S world W\" every N steps\n";

}  // namespace

[[noreturn]] void usageError(const std::string& msg) {
  fprintf(stderr, "braid-train: %s (braid-train --help lists the flags)\n", msg.c_str());
  exit(2);
}

namespace {

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

}  // namespace

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
    } else if (a == "--elastic") {
      o.elastic = true;
    } else if (a == "--log-every") {
      o.log_every = parseLong(a, value(), 1, 1L << 40);
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
  if (o.log_every > 0 && !o.elastic) usageError("--log-every needs --elastic");
  if (o.elastic) {
    if (o.modelParallel() || o.moe() || o.ps_servers > 0)
      usageError("--elastic runs data parallelism alone: no --pp, --tp, --ps-servers or vit-moe");
    // ZeRO-1/2 would need the lost rank's optimizer shard: not kept anywhere else yet.
    if (o.zero != 0) usageError("--elastic keeps every rank's optimizer state whole: use --zero 0");
    if (o.precision == "fp16") usageError("--elastic runs in fp32 or bf16 (no loss scaler state)");
    if (o.optimizer == "adafactor") usageError("--elastic takes --optimizer sgd or adamw");
  }
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

}  // namespace braid::training::cli
