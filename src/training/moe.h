// Mixture of experts: a Switch Transformer (Fedus et al., 2021; top-1) or GShard (Lepikhin et
// al., 2020; top-2) feed-forward layer whose E experts are spread over an expert-parallel
// group, tokens travelling to their experts' ranks and back with braidAllToAllv.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "training/layers.h"
#include "training/model.h"

namespace braid::training {

struct MoEOptions {
  size_t experts = 4;  ///< E, a multiple of the group's size
  size_t hidden = 64;  ///< each expert's FFN width: Linear(d, hidden) ReLU Linear(hidden, d)
  int top_k = 1;       ///< 1 (Switch) or 2 (GShard: the two gates renormalised)
  double capacity_factor = 1.25;  ///< per expert: ceil(factor * top_k * local tokens / E) slots
  float aux_loss_weight = 0.01f;  ///< alpha of Switch's load-balancing loss alpha * E * sum f_e P_e
};

/// x [T, d] -> y [T, d]: y[t] = sum over t's top-k experts e that had room of gate_e(t) *
/// expert_e(x[t]); a choice beyond its expert's capacity is dropped (it adds nothing, as in
/// Switch; a residual around the layer carries the token). Router: logits = x Wr^T (Wr [E, d],
/// no bias), softmax, top-k (ties to the lower expert).
///
/// Expert parallelism over `group` (n ranks, E/n experts each, expert e on rank e / (E/n)):
/// each forward and backward makes one all-to-all of per-expert counts and two all-to-all-v of
/// token rows (there and back), every rank taking part even with no tokens. The group's ranks
/// hold different tokens (data parallelism within the group), so after backward:
///  - sharedParameters() (the router) hold this rank's gradient and must be averaged over the
///    group with the model's other replicated parameters (DDP);
///  - expertParameters() hold the gradient of every token routed to them, already divided by
///    n, which makes them the group's average: they must not be averaged again.
/// The load-balancing loss uses f_e and P_e of the whole group (one all-reduce of 2E + 1
/// values), so n ranks on T tokens each train exactly as one rank on n*T tokens when nothing is
/// dropped. backward() adds the auxiliary loss's gradient itself: the caller's loss is the task
/// loss plus auxLoss().
class MoELayer : public Layer {
 public:
  /// group: the expert-parallel communicator (may have 1 rank, or be NULL: every expert here).
  /// Its calls are blocking on the calling thread: give the layer a communicator no other
  /// thread uses meanwhile (with DataParallel, a braidCommSplit of the engine's, whose stream
  /// runs the gradient all-reduces during backward). Throws std::invalid_argument
  /// for E not a multiple of its size, top_k not 1 or 2 (or above E), a capacity factor <= 0.
  MoELayer(size_t features, const MoEOptions& options, braidComm_t group, std::string name = "moe");
  ~MoELayer() override;
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  /// The router, then this rank's experts (each: fc1 weight, bias, fc2 weight, bias).
  std::vector<Parameter*> parameters() override;
  std::vector<Parameter*> sharedParameters();
  std::vector<Parameter*> expertParameters();
  /// Router U(-1/sqrt(d), 1/sqrt(d)); then for each expert e = 0..E-1 in turn one seed drawn
  /// from rng, which that expert's rank uses for its Linears, so every layout of the group
  /// starts from the same model.
  void initialize(std::mt19937_64& rng) override;

  /// Of the last forward: alpha * E * sum_e f_e P_e over the group's tokens.
  float auxLoss() const { return aux_loss_; }
  /// Of the last forward: this rank's token choices that found their expert full.
  size_t dropped() const { return dropped_; }
  /// Bytes this rank sent in the all-to-all-v of the last forward and backward (token rows,
  /// its own included; the counts' all-to-all adds 8 * E). Summed over the group: 4 * tokens
  /// * top_k * features * 4 when nothing drops (there and back, forward and backward).
  size_t alltoallBytes() const { return alltoall_bytes_; }
  size_t localExperts() const { return local_experts_; }

 private:
  struct Expert;
  // Sends rows [sum counts to r] to each rank r and receives theirs: rows of `features_`.
  void exchange(const std::vector<float>& send, const std::vector<size_t>& sendRows,
                std::vector<float>& recv, const std::vector<size_t>& recvRows);

  // Calls fn(local expert, its rows, their indices in rowsIn) for each local expert with rows:
  // rowsIn holds the received rows, by source rank, then local expert (recvCounts_).
  void forEachExpertBatch(
      const std::vector<float>& rowsIn,
      const std::function<void(size_t, const Tensor&, const std::vector<size_t>&)>& fn);

  size_t features_;
  MoEOptions o_;
  braidComm_t group_;
  int ranks_ = 1, rank_ = 0;
  size_t local_experts_ = 0;
  std::string name_;
  Parameter router_;
  std::vector<std::unique_ptr<Expert>> experts_;  // this rank's
  // The last forward, for backward.
  Tensor x_, probs_;
  std::vector<int32_t> choice_;              // [T, k]: expert, or -1 when dropped
  std::vector<int32_t> chosen_;              // [T, k]: expert before capacity
  std::vector<float> gate_;                  // [T, k]
  std::vector<size_t> order_;                // send slot -> t * k + j, grouped by rank then expert
  std::vector<size_t> sendRows_, recvRows_;  // rows per rank, there
  std::vector<int64_t> recvCounts_;          // [source rank, local expert]
  std::vector<float> out_;                   // expert outputs per send slot (returned)
  std::vector<float> f_, P_;                 // the group's f_e and P_e
  size_t tokens_ = 0;
  float aux_loss_ = 0;
  size_t dropped_ = 0, alltoall_bytes_ = 0;
  std::vector<float> own_values_, own_grads_;  // until a Sequential re-points the parameters
};

/// makeVit's ViT with each block's MLP replaced by a mixture of experts: pre-norm residual
/// blocks of [LayerNorm, self-attention] and [LayerNorm, MoELayer(dim, moe, group)], then
/// LayerNorm, mean over tokens and a linear head. Every token of every image is routed on its
/// own. The MoE layers are appended to *moes (may be NULL) in block order, for their
/// expertParameters() and auxiliary losses.
std::unique_ptr<Sequential> makeVitMoe(size_t height, size_t width, size_t patch, size_t dim,
                                       size_t heads, size_t depth, size_t classes,
                                       const MoEOptions& moe, braidComm_t group,
                                       std::vector<MoELayer*>* moes);

}  // namespace braid::training
