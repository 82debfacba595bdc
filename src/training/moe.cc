// MoELayer (moe.h): routing, capacity, the two all-to-all-v exchanges and the experts'
// forward and backward, with the gradients of the gates and of Switch's auxiliary loss.
#include "training/moe.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/attention.h"
#include "training/model.h"

namespace braid::training {

struct MoELayer::Expert {
  Expert(size_t d, size_t h, const std::string& name)
      : fc1(d, h, name + ".fc1"), fc2(h, d, name + ".fc2") {}
  std::vector<Parameter*> parameters() {
    auto p = fc1.parameters(), q = fc2.parameters();
    p.insert(p.end(), q.begin(), q.end());
    return p;
  }
  Linear fc1;
  ReLU act;
  Linear fc2;
};

namespace {

void check(braidResult_t r, const char* what) {
  if (r != braidSuccess)
    throw std::runtime_error(std::string("MoE ") + what + ": " + braidGetErrorString(r) + ": " +
                             braidGetLastError(nullptr));
}

}  // namespace

MoELayer::MoELayer(size_t features, const MoEOptions& options, braidComm_t group, std::string name)
    : features_(features), o_(options), group_(group), name_(std::move(name)) {
  if (group_) {
    check(braidCommCount(group_, &ranks_), "group size");
    check(braidCommUserRank(group_, &rank_), "group rank");
  }
  const size_t n = static_cast<size_t>(ranks_);
  if (o_.experts == 0 || o_.experts % n != 0)
    throw std::invalid_argument(name_ + ": " + std::to_string(o_.experts) +
                                " experts cannot be split evenly over " + std::to_string(n) +
                                " expert-parallel ranks");
  if (o_.top_k != 1 && o_.top_k != 2)
    throw std::invalid_argument(name_ + ": top_k must be 1 or 2, not " + std::to_string(o_.top_k));
  if (static_cast<size_t>(o_.top_k) > o_.experts)
    throw std::invalid_argument(name_ + ": top_k " + std::to_string(o_.top_k) + " exceeds " +
                                std::to_string(o_.experts) + " experts");
  if (!(o_.capacity_factor > 0))
    throw std::invalid_argument(name_ + ": the capacity factor must be > 0");
  local_experts_ = o_.experts / n;
  router_.name = name_ + ".router.weight";
  router_.shape = {o_.experts, features_};
  router_.numel = o_.experts * features_;
  for (size_t l = 0; l < local_experts_; ++l)
    experts_.push_back(std::make_unique<Expert>(
        features_, o_.hidden,
        name_ + ".expert" + std::to_string(static_cast<size_t>(rank_) * local_experts_ + l)));
  // Storage of its own, so that the layer also works outside a Sequential (which re-points
  // the parameters into its flat buffers).
  size_t total = 0;
  for (Parameter* p : parameters()) total += p->numel;
  own_values_.assign(total, 0.0f);
  own_grads_.assign(total, 0.0f);
  size_t offset = 0;
  for (Parameter* p : parameters()) {
    p->value = own_values_.data() + offset;
    p->grad = own_grads_.data() + offset;
    offset += p->numel;
  }
}

MoELayer::~MoELayer() = default;

std::vector<Parameter*> MoELayer::sharedParameters() { return {&router_}; }

std::vector<Parameter*> MoELayer::expertParameters() {
  std::vector<Parameter*> out;
  for (auto& e : experts_)
    for (Parameter* p : e->parameters()) out.push_back(p);
  return out;
}

std::vector<Parameter*> MoELayer::parameters() {
  std::vector<Parameter*> out = sharedParameters();
  for (Parameter* p : expertParameters()) out.push_back(p);
  return out;
}

void MoELayer::initialize(std::mt19937_64& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(features_));
  uniformFill(rng, -bound, bound, router_.value, router_.numel);
  const size_t first = static_cast<size_t>(rank_) * local_experts_;
  for (size_t e = 0; e < o_.experts; ++e) {
    const uint64_t seed = rng();
    if (e < first || e >= first + local_experts_) continue;
    std::mt19937_64 expertRng(seed);
    experts_[e - first]->fc1.initialize(expertRng);
    experts_[e - first]->fc2.initialize(expertRng);
  }
}

void MoELayer::exchange(const std::vector<float>& send, const std::vector<size_t>& sendRows,
                        std::vector<float>& recv, const std::vector<size_t>& recvRows) {
  const size_t n = static_cast<size_t>(ranks_), d = features_;
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t s = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    sc[i] = sendRows[i] * d;
    sd[i] = s;
    s += sc[i];
    rc[i] = recvRows[i] * d;
    rd[i] = r;
    r += rc[i];
  }
  recv.assign(r, 0.0f);
  alltoall_bytes_ += s * sizeof(float);
  if (!group_) {  // one rank, no communicator: the rows stay here
    recv = send;
    return;
  }
  // Every rank calls, also with nothing to send or receive (zero counts, NULL-free buffers).
  check(braidAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                       braidFloat32, group_, nullptr),
        "all-to-all-v");
}

void MoELayer::forward(const Tensor& x, Tensor& y) {
  const size_t T = x.rows(), d = features_, E = o_.experts, K = static_cast<size_t>(o_.top_k);
  const size_t n = static_cast<size_t>(ranks_), El = local_experts_;
  if (x.cols() != d)
    throw std::invalid_argument(name_ + ": input " + x.shapeString() + " does not have " +
                                std::to_string(d) + " features");
  x_ = x;
  tokens_ = T;
  alltoall_bytes_ = 0;
  // Router probabilities.
  probs_ = Tensor({T, E});
  if (T > 0) gemm(false, true, T, E, d, 1.0f, x.data(), router_.value, 0.0f, probs_.data());
  for (size_t t = 0; t < T; ++t) {
    float* p = probs_.data() + t * E;
    const float m = *std::max_element(p, p + E);
    float sum = 0;
    for (size_t e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - m));
    for (size_t e = 0; e < E; ++e) p[e] /= sum;
  }
  // Top-k choices and their gates.
  chosen_.assign(T * K, -1);
  gate_.assign(T * K, 0.0f);
  for (size_t t = 0; t < T; ++t) {
    const float* p = probs_.data() + t * E;
    size_t e1 = 0;
    for (size_t e = 1; e < E; ++e)
      if (p[e] > p[e1]) e1 = e;
    chosen_[t * K] = static_cast<int32_t>(e1);
    if (K == 1) {
      gate_[t] = p[e1];
    } else {
      size_t e2 = e1 == 0 ? 1 : 0;
      for (size_t e = 0; e < E; ++e)
        if (e != e1 && p[e] > p[e2]) e2 = e;
      chosen_[t * K + 1] = static_cast<int32_t>(e2);
      const float s = p[e1] + p[e2];
      gate_[t * K] = p[e1] / s;
      gate_[t * K + 1] = p[e2] / s;
    }
  }
  // The group's f_e (share of first choices) and P_e (mean probability), for the aux loss.
  std::vector<double> stats(2 * E + 1, 0.0);
  for (size_t t = 0; t < T; ++t) {
    stats[static_cast<size_t>(chosen_[t * K])] += 1.0;
    for (size_t e = 0; e < E; ++e) stats[E + e] += probs_[t * E + e];
  }
  stats[2 * E] = static_cast<double>(T);
  if (group_)
    check(braidAllReduce(stats.data(), stats.data(), stats.size(), braidFloat64, braidSum, group_,
                         nullptr),
          "load statistics");
  const double Tg = std::max(stats[2 * E], 1.0);
  f_.assign(E, 0.0f);
  P_.assign(E, 0.0f);
  double aux = 0;
  for (size_t e = 0; e < E; ++e) {
    f_[e] = static_cast<float>(stats[e] / Tg);
    P_[e] = static_cast<float>(stats[E + e] / Tg);
    aux += stats[e] / Tg * (stats[E + e] / Tg);
  }
  aux_loss_ = static_cast<float>(o_.aux_loss_weight * static_cast<double>(E) * aux);
  // Capacity: first choices first (GShard), each in token order. K * T slots hold every choice,
  // so a larger factor is clamped there (before the cast: 1e300 does not fit a size_t).
  const size_t cap = static_cast<size_t>(std::min(
      std::ceil(o_.capacity_factor * static_cast<double>(K * T) / E), static_cast<double>(K * T)));
  std::vector<size_t> load(E, 0);
  choice_.assign(T * K, -1);
  dropped_ = 0;
  for (size_t j = 0; j < K; ++j)
    for (size_t t = 0; t < T; ++t) {
      const auto e = static_cast<size_t>(chosen_[t * K + j]);
      if (load[e] < cap) {
        choice_[t * K + j] = static_cast<int32_t>(e);
        ++load[e];
      } else {
        ++dropped_;
      }
    }
  // Send order: by expert (so by rank), then as assigned.
  order_.clear();
  for (size_t e = 0; e < E; ++e)
    for (size_t j = 0; j < K; ++j)
      for (size_t t = 0; t < T; ++t)
        if (choice_[t * K + j] == static_cast<int32_t>(e)) order_.push_back(t * K + j);
  sendRows_.assign(n, 0);
  for (size_t e = 0; e < E; ++e) sendRows_[e / El] += load[e];
  // Per-expert counts to each expert's rank: rank r gets [source][its El experts].
  std::vector<int64_t> sendCounts(load.begin(), load.end());
  recvCounts_.assign(n * El, 0);
  if (group_)
    check(braidAllToAll(sendCounts.data(), recvCounts_.data(), El, braidInt64, group_, nullptr),
          "counts");
  else
    recvCounts_ = sendCounts;
  recvRows_.assign(n, 0);
  for (size_t s = 0; s < n; ++s)
    for (size_t l = 0; l < El; ++l) recvRows_[s] += static_cast<size_t>(recvCounts_[s * El + l]);
  // Tokens there.
  std::vector<float> send(order_.size() * d), recv;
  for (size_t i = 0; i < order_.size(); ++i)
    std::copy_n(x.data() + (order_[i] / K) * d, d, send.data() + i * d);
  exchange(send, sendRows_, recv, recvRows_);
  // Each local expert on its rows from every source, in source order.
  std::vector<float> back(recv.size());
  forEachExpertBatch(recv, [&](size_t l, const Tensor& in, const std::vector<size_t>& rows) {
    Expert& ex = *experts_[l];
    Tensor h1, h2, out;
    ex.fc1.forward(in, h1);
    ex.act.forward(h1, h2);
    ex.fc2.forward(h2, out);
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(out.data() + i * d, d, back.data() + rows[i] * d);
  });
  // Outputs back, combined with their gates.
  exchange(back, recvRows_, out_, sendRows_);
  y = Tensor({T, d});
  for (size_t i = 0; i < order_.size(); ++i) {
    const size_t a = order_[i], t = a / K;
    const float g = gate_[a];
    for (size_t c = 0; c < d; ++c) y[t * d + c] += g * out_[i * d + c];
  }
}

void MoELayer::forEachExpertBatch(
    const std::vector<float>& rowsIn,
    const std::function<void(size_t, const Tensor&, const std::vector<size_t>&)>& fn) {
  const size_t n = static_cast<size_t>(ranks_), El = local_experts_, d = features_;
  // Row index in the received buffer of (source s, local expert l)'s first row.
  std::vector<size_t> start(n * El);
  size_t at = 0;
  for (size_t s = 0; s < n; ++s)
    for (size_t l = 0; l < El; ++l) {
      start[s * El + l] = at;
      at += static_cast<size_t>(recvCounts_[s * El + l]);
    }
  for (size_t l = 0; l < El; ++l) {
    std::vector<size_t> rows;
    for (size_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < recvCounts_[s * El + l]; ++i)
        rows.push_back(start[s * El + l] + static_cast<size_t>(i));
    if (rows.empty()) continue;  // an expert without tokens this step
    Tensor in({rows.size(), d});
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(rowsIn.data() + rows[i] * d, d, in.data() + i * d);
    fn(l, in, rows);
  }
}

void MoELayer::backward(const Tensor& dy, Tensor& dx) {
  const size_t T = tokens_, d = features_, E = o_.experts, K = static_cast<size_t>(o_.top_k);
  // Gradients of the expert outputs (to the experts) and of the gates (stay here).
  std::vector<float> dOut(order_.size() * d), dRecv;
  std::vector<float> dGate(T * K, 0.0f);
  for (size_t i = 0; i < order_.size(); ++i) {
    const size_t a = order_[i], t = a / K;
    float dot = 0;
    for (size_t c = 0; c < d; ++c) {
      dOut[i * d + c] = gate_[a] * dy[t * d + c];
      dot += dy[t * d + c] * out_[i * d + c];
    }
    dGate[a] = dot;
  }
  exchange(dOut, sendRows_, dRecv, recvRows_);
  // Experts backward; their parameter gradients are the group's average: divided by its size.
  std::vector<float> dBack(dRecv.size());
  const float scale = 1.0f / static_cast<float>(ranks_);
  forEachExpertBatch(dRecv, [&](size_t l, const Tensor& g, const std::vector<size_t>& rows) {
    // The expert's layers still hold their inputs from forward: the same rows, same order.
    Expert& ex = *experts_[l];
    std::vector<Parameter*> params = ex.parameters();
    std::vector<std::vector<float>> scratch;
    std::vector<float*> real;
    for (Parameter* p : params) {
      scratch.emplace_back(p->numel, 0.0f);
      real.push_back(p->grad);
      p->grad = scratch.back().data();
    }
    Tensor dh2, dh1, dIn;
    ex.fc2.backward(g, dh2);
    ex.act.backward(dh2, dh1);
    ex.fc1.backward(dh1, dIn);
    for (size_t k = 0; k < params.size(); ++k) {
      params[k]->grad = real[k];
      for (size_t i = 0; i < params[k]->numel; ++i) real[k][i] += scale * scratch[k][i];
    }
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(dIn.data() + i * d, d, dBack.data() + rows[i] * d);
  });
  std::vector<float> dIn;
  exchange(dBack, recvRows_, dIn, sendRows_);
  dx = Tensor({T, d});
  for (size_t i = 0; i < order_.size(); ++i) {
    const size_t t = order_[i] / K;
    for (size_t c = 0; c < d; ++c) dx[t * d + c] += dIn[i * d + c];
  }
  // Router: gates -> probabilities (top-2 renormalised), plus the auxiliary loss, whose
  // gradient through P_e is alpha * E * f_e / T per token here (this rank's tokens are 1/n of
  // the group's, and the group averages the router's gradient).
  Tensor dp({T, E});
  const float auxScale =
      T > 0 ? o_.aux_loss_weight * static_cast<float>(E) / static_cast<float>(T) : 0.0f;
  for (size_t t = 0; t < T; ++t) {
    float* g = dp.data() + t * E;
    const float* p = probs_.data() + t * E;
    const auto e1 = static_cast<size_t>(chosen_[t * K]);
    if (K == 1) {
      g[e1] += dGate[t];
    } else {
      const auto e2 = static_cast<size_t>(chosen_[t * K + 1]);
      const float s = p[e1] + p[e2], dg1 = dGate[t * K], dg2 = dGate[t * K + 1];
      g[e1] += (dg1 - dg2) * p[e2] / (s * s);
      g[e2] += (dg2 - dg1) * p[e1] / (s * s);
    }
    for (size_t e = 0; e < E; ++e) g[e] += auxScale * f_[e];
    float dot = 0;
    for (size_t e = 0; e < E; ++e) dot += p[e] * g[e];
    for (size_t e = 0; e < E; ++e) g[e] = p[e] * (g[e] - dot);  // softmax backward: dlogits
  }
  if (T > 0) {
    gemm(true, false, E, d, T, 1.0f, dp.data(), x_.data(), 1.0f, router_.grad);
    gemm(false, false, T, d, E, 1.0f, dp.data(), router_.value, 1.0f, dx.data());
  }
}

std::unique_ptr<Sequential> makeVitMoe(size_t height, size_t width, size_t patch, size_t dim,
                                       size_t heads, size_t depth, size_t classes,
                                       const MoEOptions& moe, braidComm_t group,
                                       std::vector<MoELayer*>* moes) {
  return makeVit(height, width, patch, dim, heads, depth, classes, [&](const std::string& block) {
    auto layer = std::make_unique<MoELayer>(dim, moe, group, block + ".moe");
    if (moes) moes->push_back(layer.get());
    std::vector<std::unique_ptr<Layer>> ffn;
    ffn.push_back(std::move(layer));
    return ffn;
  });
}

}  // namespace braid::training
