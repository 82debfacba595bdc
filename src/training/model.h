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

  LayerHooks hooks;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> activations_;  // activations_[i] is layer i's output
  Tensor grad_a_, grad_b_;
  std::vector<float> values_, grads_;
};

/// The reference MLP: Linear(in, h1) ReLU Linear(h1, h2) ReLU Linear(h2, classes); by default
/// 784-256-128-10 for 28x28 images and 10 classes.
std::unique_ptr<Sequential> makeMlp(const std::vector<size_t>& widths = {784, 256, 128, 10});

}  // namespace braid::training
