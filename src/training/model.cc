#include "training/model.h"

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

const Tensor& Sequential::forward(const Tensor& x) {
  if (layers_.empty()) throw std::logic_error("Sequential::forward: the model has no layers");
  activations_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (hooks.before_forward) hooks.before_forward(i);
    layers_[i]->forward(i == 0 ? x : activations_[i - 1], activations_[i]);
    if (hooks.after_forward) hooks.after_forward(i);
  }
  return activations_.back();
}

void Sequential::backward(const Tensor& dlogits) {
  const Tensor* dy = &dlogits;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (hooks.before_backward) hooks.before_backward(i);
    Tensor& dx = (dy == &grad_a_) ? grad_b_ : grad_a_;
    layers_[i]->backward(*dy, dx);
    dy = &dx;
    if (hooks.after_backward) hooks.after_backward(i);
  }
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
