// Sequential models and the reference MLP. A model owns its layers; its parameters live in a
// flat fp32 buffer it allocates (forward order), unless a data-parallel engine re-points them
// into its own layout (buckets, shards).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "training/layers.h"

namespace braid::training {

/// Called around each layer's forward and backward with the layer's index: a data-parallel
/// engine gathers ZeRO-3 parameters before, and after backward launches the gradient buckets
/// whose last gradient the layer produced.
struct LayerHooks {
  std::function<void(size_t)> before_forward, after_forward, before_backward, after_backward;
};

class Sequential {
 public:
  void add(std::unique_ptr<Layer> layer);
  /// Allocates the local flat buffers (values and zeroed gradients) and draws initial values
  /// from a std::mt19937_64 seeded with `seed`, layer by layer in forward order, so every
  /// rank that uses the same seed holds the same model.
  void initialize(uint64_t seed);
  /// Frees the local flat buffers once an engine holds the values elsewhere.
  void releaseStorage();

  /// logits = layers applied to x in order. Hooks (if set) run around each layer.
  const Tensor& forward(const Tensor& x);
  /// Backward from dlogits through every layer in reverse; adds into parameter gradients.
  void backward(const Tensor& dlogits);
  void zeroGrad();

  size_t numLayers() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  /// All parameters in forward order (layer by layer, each layer's own order).
  std::vector<Parameter*> parameters();
  /// Total parameter count (psi in the ZeRO paper).
  size_t numParameters();
  /// The values in parameters() order, concatenated (reads through the current views).
  /// Throws std::logic_error for a parameter without values (outside a ZeRO-3 gather).
  std::vector<float> flatValues();

  /// Compute precision: the input and every layer's output are rounded to it in forward, and
  /// every layer's input gradient in backward (the parameters' values are the owner's to
  /// round: DataParallel points them at a rounded copy of its fp32 master weights).
  /// Parameter gradients accumulate in fp32.
  void setPrecision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

  /// Activation recomputation (Chen et al., "Training Deep Nets with Sublinear Memory Cost",
  /// 2016; torch.utils.checkpoint): forward keeps only each block's input, where a block is a
  /// layer with parameters and the parameter-free layers after it (Linear + ReLU in the MLP, a
  /// residual block in the ViT); backward runs each block's forward again from its input
  /// before the block's backward. Gradients are bit-identical to those without it.
  void setRecompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }
  /// Elements held for backward at the end of the last forward: every layer's cache plus,
  /// with recomputation, the blocks' inputs. (Each layer's output buffer is scratch that the
  /// next layer copies; it is not counted.) Times bytesPerElement(precision()) for the bytes
  /// a 16-bit implementation would hold.
  size_t activationElements() const { return activation_elements_; }
  /// The most elements held at once during the last backward (recomputation holds the
  /// checkpoints plus one block's caches).
  size_t peakBackwardActivationElements() const { return peak_backward_elements_; }

  LayerHooks hooks;

 private:
  // Runs layers [first, last) from `in`, rounding outputs; hooks only when `with_hooks`.
  void forwardRange(size_t first, size_t last, const Tensor& in, bool with_hooks);
  size_t cachedElements() const;
  size_t checkpointElements() const;

  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> activations_;  // activations_[i] is layer i's output
  Precision precision_ = Precision::kFp32;
  bool recompute_ = false;
  Tensor input_;                     // the rounded input (16-bit precisions)
  std::vector<size_t> block_start_;  // first layer of each recomputation block
  std::vector<Tensor> checkpoints_;  // each block's input, kept through backward
  size_t activation_elements_ = 0, peak_backward_elements_ = 0;
  Tensor grad_a_, grad_b_;
  std::vector<float> values_, grads_;
};

/// The reference MLP: Linear(in, h1) ReLU Linear(h1, h2) ReLU Linear(h2, classes); by default
/// 784-256-128-10 for 28x28 images and 10 classes.
std::unique_ptr<Sequential> makeMlp(const std::vector<size_t>& widths = {784, 256, 128, 10});

}  // namespace braid::training
