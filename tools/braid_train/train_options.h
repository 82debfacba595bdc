// braid-train's command line: its options, their parsing and checks (a bad flag or
// combination exits 2 with a message naming the flag), and the layout checks that need the
// job's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::training::cli {

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
  // Survive a lost rank (process ranks): shrink to the survivors and go on from the step in
  // flight (train_elastic.cc). Data parallelism alone, --zero 0.
  bool elastic = false;
  long log_every = 0;  // --elastic: rank 0 prints "# step S world N" every this many steps
  bool modelParallel() const { return pp > 1 || tp > 1; }
  bool moe() const { return model == "vit-moe"; }
};

/// Parses argv; prints the usage and exits 0 for --help, exits 2 naming the flag for bad input.
Options parse(int argc, char** argv);
/// "" when pp x tp x dp (and --ep, --ps-servers) fit a job of nranks; else why not.
std::string layoutError(const Options& o, int nranks);
/// "" when the global batch splits evenly over the ranks that take data; else why not.
std::string batchError(const Options& o, int nranks);
/// Prints "braid-train: MSG (braid-train --help lists the flags)" and exits 2.
[[noreturn]] void usageError(const std::string& msg);
std::string modelLine(const Options& o);
std::string precisionLine(const Options& o);
/// bytes as "%.3f MiB".
std::string mib(size_t bytes);

}  // namespace braid::training::cli
