// Data parallelism over a Braid communicator: PyTorch-DDP-style gradient buckets whose
// all-reduce overlaps backward, and ZeRO stages 1-3 (Rajbhandari et al., "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models", SC 2020).
//
// Every rank holds the same model (same seed; rank 0's values are broadcast at the start) and
// runs forward and backward on its own micro-batch. Parameters are laid out in "units" of a
// flat fp32 buffer:
//   stages 0-2: units are gradient buckets, filled in reverse parameter order (the order
//     backward produces gradients) up to a cap: first_bucket_bytes for the first bucket,
//     bucket_cap_bytes for the others (PyTorch DDP's 1 MiB and 25 MiB). A bucket's
//     collective is queued on the engine's Braid stream as soon as the layer that produces its
//     last gradient has finished backward, so the stream's worker communicates while the
//     compute thread goes on to the earlier layers.
//   stage 3: units are layers, the granularity at which parameters are gathered.
// Each unit is padded to a multiple of nranks; rank r owns slice r of every unit (its shard,
// 1/nranks of the parameters).
//
//   stage 0 (DDP)  all-reduce (braidAvg) each bucket's gradients; every rank steps the
//                  whole model. Per-rank volume 2 psi (reduce-scatter + all-gather).
//   stage 1        reduce-scatter (braidAvg) each bucket's gradients in place; each rank
//                  steps its shard with its shard of the optimizer state; all-gather the
//                  parameters. Volume 2 psi.
//   stage 2        as stage 1, but the full gradients live only during backward (a bucket's
//                  buffer until its reduce-scatter has run); between steps a rank keeps only
//                  its gradient shard. Volume 2 psi.
//   stage 3        a rank keeps only its parameter shard: each layer's parameters are
//                  all-gathered before its forward and again before its backward, and freed
//                  after; gradients are reduce-scattered per layer. Volume 3 psi.
// All collectives of a rank go through its one stream in the same order on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "braid/braid.h"
#include "training/layers.h"
#include "training/loss_scaler.h"
#include "training/model.h"
#include "training/optimizer.h"

namespace braid::training {

struct DataParallelOptions {
  int zero_stage = 0;                   ///< 0 (DDP), 1, 2 or 3
  size_t first_bucket_bytes = 1 << 20;  ///< cap of the first bucket (stages 0-2)
  size_t bucket_cap_bytes = 25u << 20;  ///< cap of the other buckets (stages 0-2)
  bool overlap = true;  ///< false: queue every bucket only once backward has finished
  /// braidFloat32, or braidBfloat16 to send gradients as bf16 (PyTorch DDP's
  /// bf16_compress_hook): each unit's gradients are rounded to bf16 when its collective is
  /// queued, reduced in bf16 (Braid sums bf16 in fp32 and rounds once per reduction step),
  /// and widened back to fp32 for the optimizer. Halves the gradient bytes; parameters,
  /// compute and optimizer state stay fp32 unless `compute` says otherwise. braidFloat16
  /// likewise (PyTorch's fp16_compress_hook; with loss scaling, since fp16 overflows at 65504).
  /// At stages 2 and 3 the fp32 gradients of a unit are freed as soon as they are rounded.
  braidDataType_t grad_dtype = braidFloat32;
  /// Mixed precision (Micikevicius et al. 2018): with kBf16 or kFp16, forward and backward
  /// run on a copy of the parameters rounded from the fp32 master weights after every step
  /// (at stage 3, each gathered layer is rounded), and the model rounds its activations and
  /// activation gradients (Sequential::setPrecision, which the engine calls). The optimizer
  /// updates the fp32 master weights with fp32 state. Parameter gathers (stages 1-3) carry
  /// the 16-bit working copy, in the compute precision's format.
  Precision compute = Precision::kFp32;
  /// Dynamic loss scaling (LossScaler): the loss gradient is multiplied by the scale before
  /// backward, gradients are divided by it before the step, and a step with an inf or NaN
  /// gradient on any rank (a braidMax all-reduce of the flag) is skipped on every rank.
  bool loss_scaling = false;
  LossScalerOptions scaler;
  /// Parameters this rank holds alone (a mixture of experts' experts, MoELayer::
  /// expertParameters): kept out of the broadcast and of every gradient collective, and
  /// stepped by this rank with the gradient its layer left (already the group's average).
  /// Stage 0, fp32 compute and gradients, no loss scaling, an optimizer that steps flat
  /// ranges; else std::invalid_argument. numParameters() and fullParameters() leave them out.
  std::vector<Parameter*> local_parameters;
  /// The ranks holding the same local parameters (with expert parallelism of width ep inside
  /// data parallelism of width dp: the dp / ep ranks with this rank's expert-parallel rank,
  /// Megatron's expert-data-parallel group). Before each step the local gradients are averaged
  /// over it (a blocking braidAllReduce on the calling thread: give it a communicator no
  /// other thread uses meanwhile). NULL or 1 rank: stepped as they are.
  braidComm_t local_comm = nullptr;
};

/// Bytes this rank holds between steps (fp32): the paper's 4 psi params, 4 psi grads, and the
/// optimizer's state (Adam 8 psi, SGD momentum 4 psi), divided by nranks where the stage
/// partitions them (padding of each unit to a multiple of nranks included). With a 16-bit
/// compute precision param_bytes adds the rounded working copy at 2 bytes per element
/// (stages 0-2; at stage 3 it exists only while a layer runs); gradients accumulate in fp32.
struct MemoryAccount {
  size_t param_bytes = 0, grad_bytes = 0, optim_bytes = 0;
};

class DataParallel {
 public:
  /// Takes over the parameters of `model` (initialised already, the same on every rank): they
  /// move into the engine's layout and rank 0's values are broadcast. `optimizer` gets its
  /// state sized for this rank's share. The engine creates one Braid stream on `comm`.
  /// @throws std::invalid_argument for a stage outside 0..3, a zero bucket cap, a gradient
  ///         dtype other than float, half and bfloat16, or an optimizer that needs whole parameters
  ///         (AdaFactor) at a stage that shards them (the model is left untouched);
  ///         std::runtime_error naming the Braid call and its message if one fails (the model's
  ///         parameters are then lost: rebuild it).
  DataParallel(Sequential& model, Optimizer& optimizer, braidComm_t comm,
               DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Forward, loss and backward on this rank's micro-batch x [batch, features]. With sync
  /// true, the gradients (added to those of earlier no-sync calls) are averaged over ranks
  /// during backward; with sync false (DDP's no_sync(), stages 0 and 1 only) they only
  /// accumulate locally. Returns this rank's mean loss.
  float forwardBackward(const Tensor& x, const std::vector<int32_t>& labels,
                        SoftmaxCrossEntropy& loss, bool sync = true);
  /// Waits for the gradient collectives, applies the optimizer to this rank's share, makes the
  /// parameters whole again (stages 1-2) and clears the gradients.
  void optimizerStep();
  /// forwardBackward + optimizerStep.
  float step(const Tensor& x, const std::vector<int32_t>& labels, SoftmaxCrossEntropy& loss) {
    const float l = forwardBackward(x, labels, loss, true);
    optimizerStep();
    return l;
  }
  /// Forward only (evaluation). Collective at stage 3 (parameters are gathered), so every rank
  /// must call it the same number of times (a batch may have 0 rows).
  const Tensor& forward(const Tensor& x);
  /// The fp32 master values of all parameters in the model's parameters() order. Collective at
  /// stage 3, and at stages 1-2 with a 16-bit compute precision (each rank then keeps only
  /// its slices of the master weights current between steps).
  std::vector<float> fullParameters();
  /// Stage 0, without local parameters: the optimizer's state (Optimizer::saveState) in the
  /// model's parameters() order, each of its per-element buffers in turn, without the padding
  /// of this engine's layout; and back, into this engine's layout (which may be for another
  /// rank count: an elastic job's survivors resynchronise so). Local, no collective.
  /// @throws std::logic_error at another stage, with local parameters, for an optimizer whose
  ///         state is not per element (AdaFactor), or a state of the wrong length.
  Optimizer::State optimizerState() const;
  void setOptimizerState(const Optimizer::State& state);
  /// Sums `values` over ranks in place (doubles) through the engine's stream.
  void allReduceSum(std::vector<double>& values);

  MemoryAccount memory() const;
  size_t numParameters() const { return psi_; }
  int nranks() const { return nranks_; }
  int rank() const { return rank_; }
  size_t numUnits() const;
  /// Seconds the compute thread has waited for communication, and the collectives' volume in
  /// bytes (all-reduce 2x its buffer, reduce-scatter and all-gather 1x their full buffer), since
  /// the last resetCounters().
  double commSeconds() const { return comm_seconds_; }
  uint64_t commVolumeBytes() const { return comm_volume_bytes_; }
  void resetCounters() {
    comm_seconds_ = 0.0;
    comm_volume_bytes_ = 0;
    skipped_steps_ = 0;
  }
  /// The current loss scale (1 without loss scaling).
  float lossScale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  /// Steps skipped for inf/NaN gradients since the last resetCounters().
  long skippedSteps() const { return skipped_steps_; }
  /// Whether the last optimizerStep() updated the parameters (false: skipped by the scaler).
  bool lastStepApplied() const { return last_step_applied_; }

 private:
  struct Unit;
  size_t flatOffsetOf(size_t param) const;
  size_t stateBuffers(const Optimizer::State& state, size_t flat) const;
  void check(braidResult_t r, const char* call);
  void synchronize();
  // local_parameters' gradients averaged over options_.local_comm.
  void averageLocalGradients();
  void launchGradients(size_t u);
  void gatherParameters(size_t u, bool for_compute = true);
  void releaseParameters(size_t u);
  void ensureGradients(size_t u);
  void onAfterBackward(size_t layer);
  void widenGradients();
  bool gradientsOverflowed();
  void refreshComputeCopy();
  void gatherComputeCopy();
  braidDataType_t computeWireType() const;
  void layOut();

  Sequential& model_;
  Optimizer& optimizer_;
  braidComm_t comm_;
  braidStream_t stream_ = nullptr;
  DataParallelOptions options_;
  int rank_ = 0, nranks_ = 1;
  size_t psi_ = 0;
  std::vector<Unit> units_;
  std::vector<std::vector<size_t>> layer_units_;   // units holding each layer's parameters
  std::vector<size_t> param_unit_;                 // model parameter index -> unit
  std::vector<std::vector<size_t>> layer_params_;  // each layer's model parameter indices
  std::vector<float> local_values_, local_grads_;  // local_parameters, in their order
  std::vector<Parameter*> model_params_;           // model_.parameters()
  std::vector<float> params_, grads_;              // full flat buffers (stages 0-2 / 0-1)
  std::vector<float> param_shard_, grad_shard_;    // this rank's shard (stage 3 / 2-3)
  std::vector<float> compute_params_;              // 16-bit compute: the rounded copy (stages 0-2)
  bool master_whole_ = true;  // false: params_ is current in this rank's slices only
  std::unique_ptr<LossScaler> scaler_;
  long skipped_steps_ = 0;
  bool last_step_applied_ = true;
  bool syncing_ = true;
  double comm_seconds_ = 0.0;
  uint64_t comm_volume_bytes_ = 0;
};

}  // namespace braid::training
