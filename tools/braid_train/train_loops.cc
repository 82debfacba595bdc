#include "train_loops.h"

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

namespace braid::training::cli {

namespace {

std::mutex print_mutex;  // one rank's failure message at a time

}  // namespace

[[noreturn]] void fail(int rank, const std::string& msg) {
  {
    std::lock_guard<std::mutex> lock(print_mutex);
    fprintf(stderr, "braid-train: rank %d: %s\n", rank, msg.c_str());
    fflush(stderr);
  }
  std::quick_exit(1);
}

namespace {

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

// One epoch's steps: for each, batch s of this rank's indices (none for a rank without data,
// a parameter server's server), the learning rate of its global step (cosine unless
// --constant-lr), then step(x, labels), which returns the batch's mean loss.
struct EpochRun {
  double loss_sum = 0, seconds = 0;
  size_t samples = 0;
};
EpochRun runSteps(const Options& o, const ImageDataset& train, const std::vector<size_t>& idx,
                  size_t local_batch, const EpochPlan& plan, Optimizer& optimizer,
                  size_t* global_step,
                  const std::function<float(const Tensor&, const std::vector<int32_t>&)>& step) {
  EpochRun run;
  Tensor x;
  std::vector<int32_t> labels;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t s = 0; s < plan.steps; ++s, ++*global_step) {
    if (o.cosine) {
      optimizer.setLearningRate(
          cosineLearningRate(static_cast<float>(o.lr), *global_step, plan.total_steps));
    }
    // distributedIndices pads the shares to one length: every rank has rows at each step.
    const size_t begin = std::min(idx.size(), s * local_batch);
    const size_t end = std::min(idx.size(), begin + local_batch);
    if (!idx.empty()) gatherBatch(train, idx, begin, end, x, labels);
    run.loss_sum += step(x, labels);
    run.samples += end - begin;
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
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
  const EpochPlan plan(o, train, dp, local_batch);
  const size_t train_count = plan.train_count;
  size_t global_step = 0;
  const int world_size = l.world;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const std::vector<size_t> idx =
        distributedIndices(train_count, l.dp_rank, l.dp, o.seed, static_cast<uint64_t>(epoch));
    const size_t steps = plan.steps;
    stage.resetCounters();
    tpc = TensorParallelCounters();
    const EpochRun run = runSteps(o, train, idx, local_batch, plan, *optimizer, &global_step,
                                  [&](const Tensor& images, const std::vector<int32_t>& y) {
                                    const float l = stage.step(images, y, loss);
                                    stage.optimizerStep(*optimizer, groups.dp());
                                    return l;
                                  });
    const double loss_sum = run.loss_sum, train_s = run.seconds;
    const size_t samples = run.samples;
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
  const EpochPlan plan(o, train, n, local_batch);
  const size_t train_count = plan.train_count;
  size_t global_step = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const std::vector<size_t> idx =
        distributedIndices(train_count, rank, nranks, o.seed, static_cast<uint64_t>(epoch));
    const size_t steps = plan.steps;
    engine.resetCounters();
    size_t act_elements = 0, act_peak_elements = 0;
    MoeStep moe_sum;
    const EpochRun run = runSteps(
        o, train, idx, local_batch, plan, *optimizer, &global_step,
        [&](const Tensor& images, const std::vector<int32_t>& y) {
          const float l = engine.step(images, y, loss);
          const MoeStep m = MoeStep::of(moes);
          moe_sum.aux_loss += m.aux_loss;
          moe_sum.dropped += m.dropped;
          moe_sum.alltoall_bytes += m.alltoall_bytes;
          act_elements = std::max(act_elements, model->activationElements());
          act_peak_elements = std::max(act_peak_elements, model->peakBackwardActivationElements());
          return l;
        });
    const double loss_sum = run.loss_sum, train_s = run.seconds;
    const size_t samples = run.samples;
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
  // Servers run as many clocks as the workers' steps: every rank computes the same count.
  const EpochPlan plan(o, train, w, local_batch);
  const size_t train_count = plan.train_count, steps = plan.steps;
  size_t global_step = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::vector<size_t> idx;
    if (!ps.isServer()) {
      idx = distributedIndices(train_count, worker, workers, o.seed, static_cast<uint64_t>(epoch));
    }
    const size_t bytes0 = ps.bytesSent(), pulls0 = ps.pulls();
    const EpochRun run = runSteps(o, train, idx, local_batch, plan, *optimizer, &global_step,
                                  [&](const Tensor& images, const std::vector<int32_t>& y) {
                                    if (!ps.isServer()) return ps.step(images, y, loss);
                                    ps.serve();
                                    return 0.0f;
                                  });
    ps.synchronize();  // workers' copies are now the servers' latest
    const double loss_sum = run.loss_sum, train_s = run.seconds;
    const size_t samples = run.samples;
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

}  // namespace

void runRank(braidComm_t* comm, int rank, int nranks, const Options& o, const ImageDataset& train,
             const ImageDataset& test) {
  try {
    if (o.elastic)
      trainElastic(comm, rank, nranks, o, train, test);
    else
      trainRank(*comm, rank, nranks, o, train, test);
  } catch (const std::exception& e) {
    fail(rank, e.what());
  }
}

}  // namespace braid::training::cli
