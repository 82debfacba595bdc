// Pipeline parallelism (GPipe, Huang et al. 2019; 1F1B, PipeDream-Flush, Narayanan et al. 2021
// and Megatron-LM) and the process groups of a tp x pp x dp layout. A model is cut into p
// contiguous stages; stage s runs on rank s of the pipeline communicator. Activations go
// forward and their gradients backward with braidSend/braidRecv, each tensor preceded by a
// small header carrying its shape, so micro-batches of different sizes never mix up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.h"
#include "training/model.h"
#include "training/optimizer.h"

namespace braid::training {

/// Where a rank sits in a tp x pp x dp layout, Megatron-LM's order: tensor-parallel ranks are
/// adjacent (rank = (dp_rank * pp + pp_rank) * tp + tp_rank), then pipeline stages, then
/// data-parallel replicas.
struct ParallelLayout {
  int tp = 1, pp = 1, dp = 1;
  int rank = 0, world = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0;
};

/// The layout of `rank` in a world of `world` ranks with the given tp and pp; dp = world /
/// (tp * pp). Throws std::invalid_argument (naming --tp, --pp) when tp * pp does not divide
/// world or a size is below 1.
ParallelLayout makeLayout(int rank, int world, int tp, int pp);

/// The communicators of a layout. A group spanning the whole world is `world` itself; one of a
/// single rank is nullptr (nothing to communicate); others come from braidCommSplit and are
/// destroyed with this object.
class ParallelGroups {
 public:
  /// Collective over world: every rank calls it with the same tp and pp. Throws
  /// std::invalid_argument for a bad layout, std::runtime_error if a split fails.
  ParallelGroups(braidComm_t world, int tp, int pp);
  ~ParallelGroups();
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;

  const ParallelLayout& layout() const { return layout_; }
  braidComm_t tp() const { return tp_; }
  braidComm_t pp() const { return pp_; }
  braidComm_t dp() const { return dp_; }

 private:
  braidComm_t split(braidComm_t world, int size, int color, int key);
  ParallelLayout layout_;
  braidComm_t tp_ = nullptr, pp_ = nullptr, dp_ = nullptr;
  std::vector<braidComm_t> owned_;
};

enum class PipelineSchedule {
  /// All m forwards, then all m backwards (GPipe).
  kGPipe,
  /// One forward, one backward (PipeDream-Flush): stage s runs p - 1 - s warm-up forwards,
  /// then alternates forward and backward, then drains the remaining backwards; at most
  /// p - s micro-batches are in flight on stage s instead of m.
  k1F1B,
};
const char* scheduleName(PipelineSchedule s);

/// The stage boundaries: layers [cuts[s], cuts[s + 1]) form stage s. Contiguous, each stage
/// at least one layer, the heaviest stage by parameter count (a proxy for a Linear's flops) as
/// light as possible (the linear partition problem, by dynamic programming); parameter-free
/// layers stay with the layer before them. Throws std::invalid_argument when the model has
/// fewer layers than stages.
std::vector<size_t> stageCuts(Sequential& model, int stages);

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  /// Micro-batches per step (m); a batch smaller than m is cut into one-row micro-batches.
  size_t micro_batches = 1;
};

/// Time and counts of one or more steps on this stage.
struct PipelineCounters {
  double step_seconds = 0;  ///< wall time inside step() (forwards, backwards, transfers)
  double wait_seconds = 0;  ///< of which in braidSend/braidRecv and their groups (idle)
  size_t steps = 0;
  size_t recomputed_forwards = 0;  ///< micro-batch forwards run again before their backward
  uint64_t p2p_bytes = 0;          ///< bytes this stage sent (headers and tensors)
  /// The most activation elements held at once for backward (the layers' caches of every
  /// micro-batch in flight, and inputs kept for recomputation), over the steps.
  size_t peak_activation_elements = 0;
};

/// Makes an uninitialised copy of the model (same layers, same shapes), for a stage that keeps
/// several micro-batches' activations at once.
using ModelFactory = std::function<std::unique_ptr<Sequential>()>;

/// One pipeline stage of a model. It owns the parameters of its layers only: the model's
/// other layers are kept as shells with no storage.
///
/// A layer caches one micro-batch's activations. With a `replicas` factory the stage keeps
/// as many copies of its layers as micro-batches can be in flight (m under GPipe, min(p - s, m)
/// on stage s under 1F1B), all viewing the same parameters and gradients, so each micro-batch's
/// activations stay until its backward: the schedules then differ in activation memory as in
/// the papers. Without one, the stage keeps each micro-batch's input and, when a backward
/// finds the caches holding another micro-batch, runs that micro-batch's forward again first
/// (GPipe's re-materialisation). Either way gradients are the same.
class PipelineStage {
 public:
  /// `model` must be initialised (Sequential::initialize, same seed on every stage, so each
  /// stage holds its layers' share of one model). pp_comm: the pipeline's ranks, stage s at
  /// rank s (nullptr or a 1-rank communicator: one stage, the whole model).
  PipelineStage(std::unique_ptr<Sequential> model, braidComm_t pp_comm, PipelineOptions options,
                ModelFactory replicas = nullptr);

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool isFirst() const { return stage_ == 0; }
  bool isLast() const { return stage_ + 1 == stages_; }
  size_t firstLayer() const { return first_; }
  size_t lastLayer() const { return last_; }

  /// One step's forwards and backwards over the micro-batches of x [batch, features] (read on
  /// the first stage only) and labels (batch entries; read on the last stage only, but every
  /// stage must pass the same count). Gradients of the mean loss over the whole batch are
  /// added into this stage's parameter gradients (each micro-batch's loss gradient is scaled
  /// by its rows / batch). Returns the batch's mean loss on the last stage, 0 elsewhere.
  /// Collective over the pipeline communicator.
  double step(const Tensor& x, const std::vector<int32_t>& labels, SoftmaxCrossEntropy& loss);

  /// Forward only, the whole batch at once (evaluation). Returns the logits on the last stage,
  /// nullptr on the others. `x` is read on the first stage only.
  const Tensor* forward(const Tensor& x);

  /// Averages this stage's gradients over dp_comm (braidAvg; nullptr: no data parallelism),
  /// runs optimizer on its parameters, then zeroes the gradients.
  void optimizerStep(Optimizer& optimizer, braidComm_t dp_comm);

  /// This stage's parameters (forward order) and their count.
  const std::vector<Parameter*>& parameters() const { return params_; }
  size_t numParameters() const { return values_.size(); }
  /// This stage's parameter values, concatenated in forward order.
  const std::vector<float>& values() const { return values_; }

  /// The whole model's parameters (forward order), gathered from every stage to every stage.
  /// Collective over the pipeline communicator.
  std::vector<float> gatherParameters();

  /// The model (layers outside [firstLayer(), lastLayer()) hold no parameters).
  Sequential& model() { return *model_; }

  const PipelineCounters& counters() const { return counters_; }
  void resetCounters() { counters_ = PipelineCounters(); }

 private:
  void forwardMicro(size_t k);
  void backwardMicro(size_t k);
  void runForward(Sequential& m, const Tensor& in);
  void runBackward(Sequential& m, const Tensor& dy);
  // The copy of the layers that micro-batch k runs on.
  size_t slotOf(size_t k) const { return k % active_slots_; }
  void ensureSlots(size_t n);
  void notePeakActivations();
  // Point-to-point with the neighbouring stages; every call is timed as wait.
  void sendTensor(const Tensor& t, int peer);
  void recvTensor(Tensor& t, int peer);
  // Sends `out` to peer and receives `in` from it, in braidGroupStart/End pairs (header, then
  // data), so that neither side blocks the other.
  void exchange(const Tensor& out, Tensor& in, int peer);

  std::unique_ptr<Sequential> model_;
  ModelFactory replicas_;
  std::vector<std::unique_ptr<Sequential>> copies_;  // slots 1.. (slot 0 is model_)
  std::vector<long> slot_micro_;  // per slot: the micro-batch whose activations it holds
  size_t active_slots_ = 1;
  bool keep_inputs_ = false;  // fewer copies than micro-batches in flight: recompute from inputs
  braidComm_t comm_ = nullptr;
  PipelineOptions options_;
  int stage_ = 0, stages_ = 1;
  size_t first_ = 0, last_ = 0;
  std::vector<size_t> cuts_;
  std::vector<Parameter*> params_;
  std::vector<float> values_, grads_;

  // The current step's micro-batches.
  const Tensor* x_ = nullptr;
  const std::vector<int32_t>* labels_ = nullptr;
  SoftmaxCrossEntropy* loss_ = nullptr;
  std::vector<size_t> micro_first_, micro_rows_;
  size_t batch_rows_ = 0;
  double loss_sum_ = 0;
  std::vector<Tensor> inputs_;    // per micro-batch: the stage's input, kept until its backward
  std::vector<Tensor> outputs_;   // per micro-batch: the output to send, or dlogits (last stage)
  std::vector<Tensor> grads_in_;  // per micro-batch: the gradient received from the next stage
  std::vector<Tensor> acts_;
  Tensor dx_, dy_a_, dy_b_;
  PipelineCounters counters_;
  Optimizer* optimizer_ = nullptr;  // the optimizer whose state is sized for this stage
};

}  // namespace braid::training
