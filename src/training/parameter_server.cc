// ParameterServer (parameter_server.h): shards, pushes, pulls and the servers' steps.
#include "training/parameter_server.h"

#include <stdexcept>
#include <string>

namespace braid::training {

void ParameterServer::check(braidResult_t r, const char* what) const {
  if (r != braidSuccess)
    throw std::runtime_error(std::string("parameter server: ") + what + ": " +
                             braidGetErrorString(r) + ": " + braidGetLastError(comm_));
}

ParameterServer::ParameterServer(Sequential& model, Optimizer& optimizer, braidComm_t comm,
                                 ParameterServerOptions options)
    : model_(model), optimizer_(optimizer), comm_(comm), options_(options) {
  check(braidCommCount(comm_, &nranks_), "braidCommCount");
  check(braidCommUserRank(comm_, &rank_), "braidCommUserRank");
  if (options_.servers < 1 || options_.servers >= nranks_)
    throw std::invalid_argument("parameter server: " + std::to_string(options_.servers) +
                                " servers of " + std::to_string(nranks_) +
                                " ranks: at least 1 server and 1 worker are needed");
  if (options_.staleness < 0)
    throw std::invalid_argument("parameter server: staleness " +
                                std::to_string(options_.staleness) + " must be >= 0");
  const std::vector<Parameter*> params = model_.parameters();
  if (params.empty()) throw std::invalid_argument("parameter server: the model has no parameters");
  values_ = params.front()->value;
  grads_ = params.front()->grad;
  for (const Parameter* p : params) {
    if (p->value != values_ + psi_ || p->grad != grads_ + psi_)
      throw std::invalid_argument("parameter server: " + p->name +
                                  " is not in the model's flat buffer (Sequential::initialize)");
    psi_ += p->numel;
  }
  const size_t S = static_cast<size_t>(options_.servers);
  for (size_t s = 0, off = 0; s < S; ++s) {
    const size_t n = psi_ / S + (s < psi_ % S ? 1 : 0);
    shard_offset_.push_back(off);
    shard_size_.push_back(n);
    off += n;
  }
  if (isServer()) {
    const size_t s = static_cast<size_t>(rank_);
    shard_.assign(values_ + shard_offset_[s], values_ + shard_offset_[s] + shard_size_[s]);
    pushed_.assign(static_cast<size_t>(workers()), std::vector<float>(shard_size_[s]));
    optimizer_.resize(shard_size_[s]);
  }
}

float ParameterServer::step(const Tensor& x, const std::vector<int32_t>& labels,
                            SoftmaxCrossEntropy& loss) {
  if (isServer()) throw std::logic_error("parameter server: step() on a server rank");
  model_.zeroGrad();
  const Tensor& logits = model_.forward(x);
  const float l = loss.forward(logits, labels);
  Tensor dlogits;
  loss.backward(dlogits);
  model_.backward(dlogits);
  check(braidGroupStart(), "braidGroupStart");
  for (int s = 0; s < options_.servers; ++s) {
    const size_t k = static_cast<size_t>(s);
    check(braidSend(grads_ + shard_offset_[k], shard_size_[k], braidFloat32, s, comm_, nullptr),
          "push");
    bytes_sent_ += shard_size_[k] * sizeof(float);
  }
  check(braidGroupEnd(), "push");
  if (pullsAt(clock_)) exchangeValues();
  ++clock_;
  return l;
}

void ParameterServer::serve() {
  if (!isServer()) throw std::logic_error("parameter server: serve() on a worker rank");
  const size_t s = static_cast<size_t>(rank_), n = shard_size_[s];
  const int first = options_.servers;
  check(braidGroupStart(), "braidGroupStart");
  for (int w = 0; w < workers(); ++w)
    check(braidRecv(pushed_[static_cast<size_t>(w)].data(), n, braidFloat32, first + w, comm_,
                    nullptr),
          "receive a push");
  check(braidGroupEnd(), "receive the pushes");
  // The mean over workers, summed in worker order (the same on every run).
  std::vector<float> mean(pushed_[0]);
  for (size_t w = 1; w < pushed_.size(); ++w)
    for (size_t i = 0; i < n; ++i) mean[i] += pushed_[w][i];
  const float inv = 1.0f / static_cast<float>(workers());
  for (float& g : mean) g *= inv;
  optimizer_.beginStep();
  optimizer_.update(shard_.data(), mean.data(), n, 0);
  if (pullsAt(clock_)) exchangeValues();
  ++clock_;
}

void ParameterServer::exchangeValues() {
  check(braidGroupStart(), "braidGroupStart");
  if (isServer()) {
    const size_t n = shard_.size();
    for (int w = 0; w < workers(); ++w) {
      check(braidSend(shard_.data(), n, braidFloat32, options_.servers + w, comm_, nullptr),
            "serve a pull");
      bytes_sent_ += n * sizeof(float);
    }
  } else {
    for (int s = 0; s < options_.servers; ++s) {
      const size_t k = static_cast<size_t>(s);
      check(braidRecv(values_ + shard_offset_[k], shard_size_[k], braidFloat32, s, comm_, nullptr),
            "pull");
    }
    ++pulls_;
  }
  check(braidGroupEnd(), "exchange the values");
}

void ParameterServer::synchronize() { exchangeValues(); }

}  // namespace braid::training
