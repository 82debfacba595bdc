// Layers with forward and backward on host tensors [batch, features]: Linear, ReLU, GELU,
// LayerNorm, and the softmax cross-entropy loss. Each layer caches what its backward needs
// during forward, so forward(x) must precede backward(dy) for the same batch.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "training/tensor.h"

namespace braid::training {

/// A trainable parameter: `numel` fp32 values and their gradient, stored elsewhere (the
/// model's flat buffer, or a data-parallel engine's layout), so `value` and `grad` are views
/// that the owner may re-point between steps. Shapes follow PyTorch (Linear weight [out, in]).
struct Parameter {
  std::string name;
  std::vector<size_t> shape;
  size_t numel = 0;
  float* value = nullptr;
  float* grad = nullptr;  ///< backward adds into it (+=), so gradients accumulate until zeroed
};

/// A layer maps x [batch, in] to y [batch, out]. backward(dy) writes dx and adds the
/// parameters' gradients into Parameter::grad.
class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  virtual void forward(const Tensor& x, Tensor& y) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  /// Draws initial parameter values from rng (PyTorch's defaults for the layer).
  virtual void initialize(std::mt19937_64& rng) { (void)rng; }
  /// Elements the layer keeps from its last forward for its backward (its activations).
  virtual size_t cacheElements() const { return 0; }
  /// Frees what forward kept (activation recomputation: forward runs again before backward).
  virtual void releaseCache() {}
  /// False when nothing consumes dx (the first layer): backward may then leave dx unset and
  /// skip its product, as autograd does for inputs that need no gradient.
  bool needs_input_grad = true;
};

/// A layer whose backward needs its last input only: forward keeps it in x_.
class InputCachingLayer : public Layer {
 public:
  size_t cacheElements() const override { return x_.numel(); }
  void releaseCache() override { x_ = Tensor(); }

 protected:
  Tensor x_;
};

/// y = x W^T + b, W [out, in], b [out] (torch.nn.Linear). Initialised U(-1/sqrt(in), 1/sqrt(in))
/// for both W and b, as PyTorch does. Products through BLAS.
class Linear : public InputCachingLayer {
 public:
  Linear(size_t in, size_t out, std::string name = "linear");
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  void initialize(std::mt19937_64& rng) override;
  size_t in() const { return in_; }
  size_t out() const { return out_; }

 private:
  size_t in_, out_;
  std::string name_;
  Parameter weight_, bias_;
};

/// y = max(x, 0); the gradient at 0 is taken as 0 (PyTorch's).
class ReLU : public InputCachingLayer {
 public:
  std::string name() const override { return "relu"; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
};

/// y = x * Phi(x) with Phi the standard normal CDF (exact erf form, torch's default GELU).
class GELU : public InputCachingLayer {
 public:
  std::string name() const override { return "gelu"; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
};

/// Per row: y = (x - mean) / sqrt(var + eps) * gamma + beta, over the last dimension of size
/// `features` (biased variance, torch.nn.LayerNorm). gamma starts at 1, beta at 0.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(size_t features, float eps = 1e-5f, std::string name = "layernorm");
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  void initialize(std::mt19937_64& rng) override;
  size_t cacheElements() const override { return xhat_.numel() + rstd_.size(); }
  void releaseCache() override {
    xhat_ = Tensor();
    std::vector<float>().swap(rstd_);
  }

 private:
  size_t features_;
  float eps_;
  std::string name_;
  Parameter gamma_, beta_;
  Tensor xhat_;
  std::vector<float> rstd_;
};

/// Softmax cross-entropy over logits [batch, classes] and integer labels in [0, classes):
/// loss = mean over rows of -log softmax(logits)[label] (torch.nn.CrossEntropyLoss).
class SoftmaxCrossEntropy {
 public:
  /// Returns the mean loss; throws std::invalid_argument for a label out of range or a
  /// label count that differs from the batch.
  float forward(const Tensor& logits, const std::vector<int32_t>& labels);
  /// dlogits = (softmax - onehot(label)) / batch: the gradient of the mean loss.
  void backward(Tensor& dlogits) const;
  /// Rows of the last forward whose arg-max logit is the label.
  size_t correct() const { return correct_; }

 private:
  Tensor probs_;
  std::vector<int32_t> labels_;
  size_t correct_ = 0;
};

}  // namespace braid::training
