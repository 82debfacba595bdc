// Vision-transformer pieces: patch embedding and multi-head self-attention (Dosovitskiy et
// al., "An Image is Worth 16x16 Words", ICLR 2021; Vaswani et al., "Attention Is All You
// Need", 2017). Activations are [batch * tokens, dim]: token t of image b is row b * T + t.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "training/layers.h"
#include "training/model.h"

namespace braid::training {

/// Cuts each single-channel image x [batch, height * width] (row-major pixels) into
/// non-overlapping patch x patch squares, T = (height / patch) * (width / patch) tokens in
/// row-major patch order, and maps each to dim features: y[b * T + t] = W p(b, t) + bias +
/// position[t], W [dim, patch * patch], position [T, dim] (learned; initialised N(0, 0.02^2)
/// as in ViT, W and bias as Linear). Throws std::invalid_argument if patch does not divide
/// height and width.
class PatchEmbedding : public Layer {
 public:
  PatchEmbedding(size_t height, size_t width, size_t patch, size_t dim,
                 std::string name = "patch_embed");
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_, &position_}; }
  void initialize(std::mt19937_64& rng) override;
  size_t cacheElements() const override { return patches_.numel(); }
  void releaseCache() override { patches_ = Tensor(); }
  size_t tokens() const { return tokens_; }

 private:
  // Pixel index (in an image) of element k of patch t.
  size_t pixel(size_t t, size_t k) const;
  size_t height_, width_, patch_, dim_, tokens_;
  std::string name_;
  Parameter weight_, bias_, position_;
  Tensor patches_;  // [batch * T, patch * patch]
};

/// The per-head core of multi-head self-attention, shared by MultiHeadSelfAttention and its
/// tensor-parallel split: qkv [batch * tokens, 3 heads dh] holds every head's queries, then
/// every head's keys, then values (head h at columns h dh of each third); per sequence and head,
/// O_h = softmax(Q_h K_h^T / sqrt(dh)) V_h into o [batch * tokens, heads dh], and the softmax
/// into probs [batch, heads, tokens, tokens] (kept for backward).
void attentionCoreForward(const Tensor& qkv, size_t tokens, size_t heads, Tensor& o,
                          std::vector<float>& probs);
/// The core's backward: from dout [batch * tokens, heads dh] and what forward read and kept,
/// writes dqkv [batch * tokens, 3 heads dh] (same layout as qkv).
void attentionCoreBackward(const Tensor& qkv, const std::vector<float>& probs, const Tensor& dout,
                           size_t tokens, size_t heads, Tensor& dqkv);

/// Multi-head self-attention over sequences of `tokens` rows: x [batch * tokens, dim] ->
/// [q k v] = x Wqkv^T + bqkv (Wqkv [3 dim, dim]); per head h (dim / heads features each)
/// O_h = softmax(Q_h K_h^T / sqrt(dim / heads)) V_h; y = O Wo^T + bo (Wo [dim, dim]).
/// No mask and no dropout. Throws std::invalid_argument if heads does not divide dim or the
/// input's rows are not a multiple of tokens.
class MultiHeadSelfAttention : public Layer {
 public:
  MultiHeadSelfAttention(size_t dim, size_t heads, size_t tokens, std::string name = "attn");
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&wqkv_, &bqkv_, &wo_, &bo_}; }
  void initialize(std::mt19937_64& rng) override;
  size_t cacheElements() const override {
    return x_.numel() + qkv_.numel() + o_.numel() + probs_.size();
  }
  void releaseCache() override;

 private:
  size_t dim_, heads_, tokens_, head_dim_;
  std::string name_;
  Parameter wqkv_, bqkv_, wo_, bo_;
  Tensor x_, qkv_, o_;
  std::vector<float> probs_;  // [batch, heads, T, T]
};

/// y = x + f(x), f the given layers applied in order (a pre-norm transformer sub-block when f
/// starts with LayerNorm). f must keep the shape. Its parameters are the layers' parameters.
/// Throws std::invalid_argument for no layers, or (in forward) layers that change the shape.
class Residual : public Layer {
 public:
  explicit Residual(std::vector<std::unique_ptr<Layer>> layers, std::string name = "residual");
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override;
  void initialize(std::mt19937_64& rng) override;
  size_t cacheElements() const override;
  void releaseCache() override;
  size_t numLayers() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::string name_;
  std::vector<Tensor> outputs_;
};

/// Mean over each sequence's `tokens` rows: [batch * tokens, dim] -> [batch, dim] (the
/// classification read-out of a ViT without a class token).
class TokenMeanPool : public Layer {
 public:
  explicit TokenMeanPool(size_t tokens) : tokens_(tokens) {}
  std::string name() const override { return "token_mean_pool"; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  size_t tokens_;
};

/// The feed-forward part of one ViT block, given the block's name ("block0", ...): the layers
/// after its LayerNorm, inside the residual.
using VitFeedForward = std::function<std::vector<std::unique_ptr<Layer>>(const std::string&)>;

/// The attention of one ViT block, given its name ("block0.attn") and the tokens per sequence:
/// the layer after the block's first LayerNorm, inside the residual.
using VitAttention = std::function<std::unique_ptr<Layer>(const std::string&, size_t)>;

/// A small ViT for single-channel images: patch embedding (patch x patch, dim features), then
/// `depth` pre-norm blocks [x + MHSA(LN(x)); x + FFN(LN(x))], LayerNorm, mean over tokens,
/// Linear(dim, classes). FFN is `ffn`'s layers, by default the MLP Linear(dim, 2 dim) GELU
/// Linear(2 dim, dim) (makeVitMoe gives a mixture of experts instead); MHSA is `attention`'s
/// layer, by default MultiHeadSelfAttention(dim, heads) (makeTensorParallelVit splits it).
std::unique_ptr<Sequential> makeVit(size_t height, size_t width, size_t patch, size_t dim,
                                    size_t heads, size_t depth, size_t classes,
                                    const VitFeedForward& ffn = {},
                                    const VitAttention& attention = {});

}  // namespace braid::training
