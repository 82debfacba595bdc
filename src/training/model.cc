#include "training/model.h"

#include <algorithm>
#include <stdexcept>

namespace braid::training {

void Sequential::add(std::unique_ptr<Layer> layer) {
  layer->needs_input_grad = !layers_.empty();
  layers_.push_back(std::move(layer));
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : layers_) {
    for (Parameter* p : l->parameters()) out.push_back(p);
  }
  return out;
}

size_t Sequential::numParameters() {
  size_t n = 0;
  for (Parameter* p : parameters()) n += p->numel;
  return n;
}

void Sequential::initialize(uint64_t seed) {
  const size_t n = numParameters();
  values_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
  size_t offset = 0;
  for (Parameter* p : parameters()) {
    p->value = values_.data() + offset;
    p->grad = grads_.data() + offset;
    offset += p->numel;
  }
  std::mt19937_64 rng(seed);
  for (auto& l : layers_) l->initialize(rng);
}

void Sequential::releaseStorage() {
  std::vector<float>().swap(values_);
  std::vector<float>().swap(grads_);
}

std::vector<float> Sequential::flatValues() {
  std::vector<float> out;
  for (Parameter* p : parameters()) {
    if (p->value == nullptr) {
      throw std::logic_error("Sequential::flatValues: " + p->name +
                             " is not materialised (a ZeRO-3 shard: use "
                             "DataParallel::fullParameters)");
    }
    out.insert(out.end(), p->value, p->value + p->numel);
  }
  return out;
}

size_t Sequential::cachedElements() const {
  size_t n = 0;
  for (const auto& l : layers_) n += l->cacheElements();
  return n;
}

size_t Sequential::checkpointElements() const {
  size_t n = 0;
  for (const Tensor& t : checkpoints_) n += t.numel();
  return n;
}

void Sequential::forwardRange(size_t first, size_t last, const Tensor& in, bool with_hooks) {
  for (size_t i = first; i < last; ++i) {
    if (with_hooks && hooks.before_forward) hooks.before_forward(i);
    layers_[i]->forward(i == first ? in : activations_[i - 1], activations_[i]);
    roundTo(precision_, activations_[i].data(), activations_[i].numel());
    if (with_hooks && hooks.after_forward) hooks.after_forward(i);
  }
}

const Tensor& Sequential::forward(const Tensor& x) {
  if (layers_.empty()) throw std::logic_error("Sequential::forward: the model has no layers");
  activations_.resize(layers_.size());
  const Tensor* in = &x;
  if (precision_ != Precision::kFp32) {
    input_ = x;
    roundTo(precision_, input_.data(), input_.numel());
    in = &input_;
  }
  if (!recompute_) {
    checkpoints_.clear();
    forwardRange(0, layers_.size(), *in, true);
    activation_elements_ = cachedElements();
    return activations_.back();
  }
  block_start_.clear();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i == 0 || !layers_[i]->parameters().empty()) block_start_.push_back(i);
  }
  checkpoints_.resize(block_start_.size());
  for (size_t b = 0; b < block_start_.size(); ++b) {
    const size_t first = block_start_[b];
    const size_t last = b + 1 < block_start_.size() ? block_start_[b + 1] : layers_.size();
    checkpoints_[b] = first == 0 ? *in : activations_[first - 1];
    forwardRange(first, last, checkpoints_[b], true);
    for (size_t i = first; i < last; ++i) layers_[i]->releaseCache();
  }
  activation_elements_ = cachedElements() + checkpointElements();
  return activations_.back();
}

void Sequential::backward(const Tensor& dlogits) {
  const Tensor* dy = &dlogits;
  peak_backward_elements_ = activation_elements_;
  auto backwardLayer = [&](size_t i, bool before_hook) {
    if (before_hook && hooks.before_backward) hooks.before_backward(i);
    Tensor& dx = (dy == &grad_a_) ? grad_b_ : grad_a_;
    layers_[i]->backward(*dy, dx);
    if (layers_[i]->needs_input_grad) roundTo(precision_, dx.data(), dx.numel());
    dy = &dx;
    if (hooks.after_backward) hooks.after_backward(i);
  };
  if (!recompute_ || checkpoints_.size() != block_start_.size() || checkpoints_.empty()) {
    for (size_t i = layers_.size(); i-- > 0;) backwardLayer(i, true);
    return;
  }
  for (size_t b = block_start_.size(); b-- > 0;) {
    const size_t first = block_start_[b];
    const size_t last = b + 1 < block_start_.size() ? block_start_[b + 1] : layers_.size();
    // The block's parameters must be in place (ZeRO-3 gathers them) before it runs again, so
    // its before-backward hooks run first, in the order backward would run them.
    for (size_t i = last; i-- > first;) {
      if (hooks.before_backward) hooks.before_backward(i);
    }
    forwardRange(first, last, checkpoints_[b], false);
    peak_backward_elements_ =
        std::max(peak_backward_elements_, cachedElements() + checkpointElements());
    for (size_t i = last; i-- > first;) backwardLayer(i, false);
    for (size_t i = first; i < last; ++i) layers_[i]->releaseCache();
    checkpoints_[b] = Tensor();
  }
  checkpoints_.clear();
}

void Sequential::zeroGrad() {
  for (Parameter* p : parameters()) {
    if (p->grad == nullptr) continue;
    for (size_t i = 0; i < p->numel; ++i) p->grad[i] = 0.0f;
  }
}

std::unique_ptr<Sequential> makeMlp(const std::vector<size_t>& widths) {
  if (widths.size() < 2) throw std::invalid_argument("makeMlp: needs at least 2 widths");
  auto m = std::make_unique<Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    m->add(std::make_unique<Linear>(widths[i], widths[i + 1], "fc" + std::to_string(i + 1)));
    if (i + 2 < widths.size()) m->add(std::make_unique<ReLU>());
  }
  return m;
}

}  // namespace braid::training
