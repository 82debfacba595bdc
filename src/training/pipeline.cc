#include "training/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "training/check_call.h"

namespace braid::training {

namespace {

// The shape header sent before each tensor: its rank, then up to kMaxDims dimensions.
constexpr size_t kMaxDims = 8;
constexpr size_t kHeader = kMaxDims + 1;

void packHeader(const Tensor& t, int64_t* h) {
  if (t.rank() > kMaxDims) {
    throw std::invalid_argument("pipeline: cannot send a tensor of rank " +
                                std::to_string(t.rank()) + " (at most 8)");
  }
  std::fill(h, h + kHeader, 0);
  h[0] = static_cast<int64_t>(t.rank());
  for (size_t i = 0; i < t.rank(); ++i) h[i + 1] = static_cast<int64_t>(t.dim(i));
}

std::vector<size_t> unpackHeader(const int64_t* h, int peer) {
  if (h[0] < 0 || h[0] > static_cast<int64_t>(kMaxDims)) {
    throw std::runtime_error("pipeline: header from stage " + std::to_string(peer) +
                             " names rank " + std::to_string(h[0]) + " (stages out of step?)");
  }
  std::vector<size_t> shape;
  uint64_t numel = 1;
  for (int64_t i = 0; i < h[0]; ++i) {
    if (h[i + 1] < 0 || h[i + 1] > (int64_t{1} << 32)) {
      throw std::runtime_error("pipeline: header from stage " + std::to_string(peer) +
                               " names dimension " + std::to_string(h[i + 1]));
    }
    shape.push_back(static_cast<size_t>(h[i + 1]));
    numel *= static_cast<uint64_t>(h[i + 1]);
  }
  if (numel > (uint64_t{1} << 34)) {
    throw std::runtime_error("pipeline: header from stage " + std::to_string(peer) +
                             " names a tensor of " + std::to_string(numel) + " elements");
  }
  return shape;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

ParallelLayout makeLayout(int rank, int world, int tp, int pp) {
  if (tp < 1) throw std::invalid_argument("--tp " + std::to_string(tp) + ": must be >= 1");
  if (pp < 1) throw std::invalid_argument("--pp " + std::to_string(pp) + ": must be >= 1");
  if (world % (tp * pp) != 0) {
    throw std::invalid_argument("--tp " + std::to_string(tp) + " x --pp " + std::to_string(pp) +
                                " does not divide the " + std::to_string(world) +
                                " ranks (pp x tp x dp must equal the world size)");
  }
  ParallelLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = world / (tp * pp);
  l.rank = rank;
  l.world = world;
  l.tp_rank = rank % tp;
  l.pp_rank = (rank / tp) % pp;
  l.dp_rank = rank / (tp * pp);
  return l;
}

ParallelGroups::ParallelGroups(braidComm_t world, int tp, int pp) {
  int rank = 0, n = 1;
  checkCall(braidCommUserRank(world, &rank), world, "braidCommUserRank");
  checkCall(braidCommCount(world, &n), world, "braidCommCount");
  layout_ = makeLayout(rank, n, tp, pp);
  const ParallelLayout& l = layout_;
  // Every rank runs the same splits in the same order (the sizes are the same everywhere).
  try {
    tp_ = split(world, l.tp, l.dp_rank * l.pp + l.pp_rank, l.tp_rank);
    pp_ = split(world, l.pp, l.dp_rank * l.tp + l.tp_rank, l.pp_rank);
    dp_ = split(world, l.dp, l.pp_rank * l.tp + l.tp_rank, l.dp_rank);
  } catch (...) {
    for (braidComm_t c : owned_) braidCommDestroy(c);
    throw;
  }
}

braidComm_t ParallelGroups::split(braidComm_t world, int size, int color, int key) {
  if (size == 1) return nullptr;
  if (size == layout_.world) return world;
  braidComm_t sub = nullptr;
  checkCall(braidCommSplit(world, color, key, &sub, nullptr), world, "braidCommSplit");
  owned_.push_back(sub);
  return sub;
}

ParallelGroups::~ParallelGroups() {
  for (braidComm_t c : owned_) braidCommDestroy(c);
}

const char* scheduleName(PipelineSchedule s) {
  return s == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
}

std::vector<size_t> stageCuts(Sequential& model, int stages) {
  const size_t layers = model.numLayers();
  const size_t p = static_cast<size_t>(stages);
  if (stages < 1 || layers < p) {
    throw std::invalid_argument("--pp " + std::to_string(stages) + ": the model has " +
                                std::to_string(layers) + " layers, fewer than the stages");
  }
  std::vector<double> prefix(layers + 1, 0.0);
  std::vector<size_t> weight(layers, 0);
  for (size_t i = 0; i < layers; ++i) {
    for (Parameter* q : model.layer(i).parameters()) weight[i] += q->numel;
    prefix[i + 1] = prefix[i] + static_cast<double>(weight[i]);
  }
  // The linear partition problem: best[s][j] is the least possible heaviest stage when layers
  // [0, j) form s stages; from[s][j] is where the last of them starts.
  const double inf = 1e300;
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(layers + 1, inf));
  std::vector<std::vector<size_t>> from(p + 1, std::vector<size_t>(layers + 1, 0));
  best[0][0] = 0.0;
  for (size_t s = 1; s <= p; ++s) {
    for (size_t j = s; j <= layers; ++j) {
      for (size_t i = s - 1; i < j; ++i) {
        const double heaviest = std::max(best[s - 1][i], prefix[j] - prefix[i]);
        if (heaviest < best[s][j]) {
          best[s][j] = heaviest;
          from[s][j] = i;
        }
      }
    }
  }
  std::vector<size_t> cuts(p + 1, layers);
  for (size_t s = p; s > 0; --s) cuts[s - 1] = from[s][cuts[s]];
  // Parameter-free layers (activations) stay with the layer before them.
  for (size_t s = 1; s < p; ++s) {
    while (cuts[s] + 1 < cuts[s + 1] && weight[cuts[s]] == 0) ++cuts[s];
  }
  return cuts;
}

PipelineStage::PipelineStage(std::unique_ptr<Sequential> model, braidComm_t pp_comm,
                             PipelineOptions options, ModelFactory replicas)
    : model_(std::move(model)), replicas_(std::move(replicas)), comm_(pp_comm), options_(options) {
  if (options_.micro_batches < 1) {
    throw std::invalid_argument("--microbatches 0: at least one micro-batch per step");
  }
  if (comm_ != nullptr) {
    checkCall(braidCommUserRank(comm_, &stage_), comm_, "braidCommUserRank");
    checkCall(braidCommCount(comm_, &stages_), comm_, "braidCommCount");
  }
  cuts_ = stageCuts(*model_, stages_);
  first_ = cuts_[stage_];
  last_ = cuts_[stage_ + 1];
  size_t n = 0;
  for (size_t i = first_; i < last_; ++i) {
    for (Parameter* q : model_->layer(i).parameters()) {
      params_.push_back(q);
      n += q->numel;
    }
  }
  values_.resize(n);
  grads_.assign(n, 0.0f);
  size_t offset = 0;
  for (Parameter* q : params_) {
    std::memcpy(values_.data() + offset, q->value, q->numel * sizeof(float));
    q->value = values_.data() + offset;
    q->grad = grads_.data() + offset;
    offset += q->numel;
  }
  // The other stages' layers keep no storage here.
  for (size_t i = 0; i < model_->numLayers(); ++i) {
    if (i >= first_ && i < last_) continue;
    for (Parameter* q : model_->layer(i).parameters()) q->value = q->grad = nullptr;
  }
  model_->releaseStorage();
  acts_.resize(model_->numLayers());
  slot_micro_.assign(1, -1);
}

void PipelineStage::ensureSlots(size_t n) {
  while (1 + copies_.size() < n) {
    std::unique_ptr<Sequential> copy = replicas_();
    if (copy->numLayers() != model_->numLayers()) {
      throw std::logic_error("PipelineStage: the replica factory made a model of another depth");
    }
    // The copy's layers view this stage's parameters and gradients; it holds none of its own.
    for (size_t i = 0; i < copy->numLayers(); ++i) {
      const std::vector<Parameter*> mine = copy->layer(i).parameters();
      const std::vector<Parameter*> ours = model_->layer(i).parameters();
      for (size_t j = 0; j < mine.size(); ++j) {
        if (mine[j]->numel != ours[j]->numel) {
          throw std::logic_error("PipelineStage: replica parameter " + mine[j]->name +
                                 " differs in size");
        }
        mine[j]->value = ours[j]->value;
        mine[j]->grad = ours[j]->grad;
      }
    }
    copy->releaseStorage();
    copies_.push_back(std::move(copy));
    slot_micro_.push_back(-1);
  }
}

void PipelineStage::notePeakActivations() {
  size_t n = 0;
  for (size_t slot = 0; slot < active_slots_; ++slot) {
    Sequential& m = slot == 0 ? *model_ : *copies_[slot - 1];
    for (size_t i = first_; i < last_; ++i) n += m.layer(i).cacheElements();
  }
  for (const Tensor& t : inputs_) n += t.numel();
  counters_.peak_activation_elements = std::max(counters_.peak_activation_elements, n);
}

void PipelineStage::sendTensor(const Tensor& t, int peer) {
  const auto t0 = Clock::now();
  int64_t h[kHeader];
  packHeader(t, h);
  checkCall(braidSend(h, kHeader, braidInt64, peer, comm_, nullptr), comm_, "braidSend (header)");
  checkCall(braidSend(t.data(), t.numel(), braidFloat32, peer, comm_, nullptr), comm_, "braidSend");
  counters_.p2p_bytes += sizeof(h) + t.numel() * sizeof(float);
  counters_.wait_seconds += since(t0);
}

void PipelineStage::recvTensor(Tensor& t, int peer) {
  const auto t0 = Clock::now();
  int64_t h[kHeader];
  checkCall(braidRecv(h, kHeader, braidInt64, peer, comm_, nullptr), comm_, "braidRecv (header)");
  t.resize(unpackHeader(h, peer));
  checkCall(braidRecv(t.data(), t.numel(), braidFloat32, peer, comm_, nullptr), comm_, "braidRecv");
  counters_.wait_seconds += since(t0);
}

void PipelineStage::exchange(const Tensor& out, Tensor& in, int peer) {
  const auto t0 = Clock::now();
  int64_t hs[kHeader], hr[kHeader];
  packHeader(out, hs);
  // A call refused inside the group is reported after its End, so the group always closes.
  checkCall(braidGroupStart(), comm_, "braidGroupStart");
  braidResult_t sent = braidSend(hs, kHeader, braidInt64, peer, comm_, nullptr);
  braidResult_t received = braidRecv(hr, kHeader, braidInt64, peer, comm_, nullptr);
  checkCall(braidGroupEnd(), comm_, "braidGroupEnd (shape headers)");
  checkCall(sent, comm_, "braidSend (header)");
  checkCall(received, comm_, "braidRecv (header)");
  in.resize(unpackHeader(hr, peer));
  checkCall(braidGroupStart(), comm_, "braidGroupStart");
  sent = braidSend(out.data(), out.numel(), braidFloat32, peer, comm_, nullptr);
  received = braidRecv(in.data(), in.numel(), braidFloat32, peer, comm_, nullptr);
  checkCall(braidGroupEnd(), comm_, "braidGroupEnd (tensors)");
  checkCall(sent, comm_, "braidSend");
  checkCall(received, comm_, "braidRecv");
  counters_.p2p_bytes += sizeof(hs) + out.numel() * sizeof(float);
  counters_.wait_seconds += since(t0);
}

void PipelineStage::runForward(Sequential& m, const Tensor& in) {
  for (size_t i = first_; i < last_; ++i) {
    m.layer(i).forward(i == first_ ? in : acts_[i - 1], acts_[i]);
  }
}

void PipelineStage::forwardMicro(size_t k) {
  if (isFirst()) {
    const size_t cols = x_->cols(), r0 = micro_first_[k], rows = micro_rows_[k];
    std::vector<size_t> shape = x_->shape();
    shape[0] = rows;
    inputs_[k] =
        Tensor(shape, std::vector<float>(x_->data() + r0 * cols, x_->data() + (r0 + rows) * cols));
  }
  const size_t slot = slotOf(k);
  runForward(slot == 0 ? *model_ : *copies_[slot - 1], inputs_[k]);
  slot_micro_[slot] = static_cast<long>(k);
  // With a copy of the layers per micro-batch in flight nothing runs twice: the input goes.
  if (!keep_inputs_) inputs_[k] = Tensor();
  notePeakActivations();
  const Tensor& out = acts_[last_ - 1];
  if (!isLast()) {
    outputs_[k] = out;
    return;
  }
  // The loss of micro-batch k is its rows' mean; the batch's is the rows-weighted mean, so
  // its gradient is the micro-batch's scaled by rows / batch.
  const size_t r0 = micro_first_[k], rows = micro_rows_[k];
  const std::vector<int32_t> labels(labels_->begin() + static_cast<long>(r0),
                                    labels_->begin() + static_cast<long>(r0 + rows));
  const double share = static_cast<double>(rows) / static_cast<double>(batch_rows_);
  loss_sum_ += loss_->forward(out, labels) * share;
  loss_->backward(outputs_[k]);
  const float s = static_cast<float>(share);
  for (size_t i = 0; i < outputs_[k].numel(); ++i) outputs_[k][i] *= s;
}

void PipelineStage::runBackward(Sequential& m, const Tensor& dy) {
  const Tensor* g = &dy;
  for (size_t i = last_; i-- > first_;) {
    Tensor& dx = (g == &dy_a_) ? dy_b_ : dy_a_;
    m.layer(i).backward(*g, dx);
    g = &dx;
  }
  if (!isFirst()) dx_ = *g;
}

void PipelineStage::backwardMicro(size_t k) {
  const size_t slot = slotOf(k);
  Sequential& m = slot == 0 ? *model_ : *copies_[slot - 1];
  if (slot_micro_[slot] != static_cast<long>(k)) {
    runForward(m, inputs_[k]);
    slot_micro_[slot] = static_cast<long>(k);
    ++counters_.recomputed_forwards;
    notePeakActivations();
  }
  runBackward(m, isLast() ? outputs_[k] : grads_in_[k]);
  for (size_t i = first_; i < last_; ++i) m.layer(i).releaseCache();
  slot_micro_[slot] = -1;
  inputs_[k] = Tensor();
  outputs_[k] = Tensor();
  grads_in_[k] = Tensor();
}

double PipelineStage::step(const Tensor& x, const std::vector<int32_t>& labels,
                           SoftmaxCrossEntropy& loss) {
  const auto t0 = Clock::now();
  x_ = &x;
  labels_ = &labels;
  loss_ = &loss;
  batch_rows_ = labels.size();
  if (isFirst() && x.rows() != batch_rows_) {
    throw std::invalid_argument("PipelineStage::step: " + std::to_string(x.rows()) +
                                " input rows but " + std::to_string(batch_rows_) + " labels");
  }
  const size_t m = std::min(options_.micro_batches, batch_rows_);
  micro_first_.assign(m, 0);
  micro_rows_.assign(m, 0);
  for (size_t k = 0, r = 0; k < m; ++k) {
    micro_first_[k] = r;
    micro_rows_[k] = batch_rows_ / m + (k < batch_rows_ % m ? 1 : 0);
    r += micro_rows_[k];
  }
  inputs_.assign(m, Tensor());
  outputs_.assign(m, Tensor());
  grads_in_.assign(m, Tensor());
  loss_sum_ = 0.0;
  // Micro-batches in flight at once: all m under GPipe; under 1F1B stage s holds its p - 1 - s
  // warm-up forwards and the one in progress. A copy of the layers for each, if we can.
  const size_t in_flight = options_.schedule == PipelineSchedule::kGPipe
                               ? m
                               : std::min(m, static_cast<size_t>(stages_ - stage_));
  active_slots_ = 1;
  if (replicas_ && in_flight > 1) {
    ensureSlots(in_flight);
    active_slots_ = in_flight;
  }
  keep_inputs_ = active_slots_ < in_flight;
  std::fill(slot_micro_.begin(), slot_micro_.end(), -1);
  const int prev = stage_ - 1, next = stage_ + 1;

  auto forwardStep = [&](size_t k, bool send) {
    forwardMicro(k);
    if (send && !isLast()) sendTensor(outputs_[k], next);
  };
  auto receiveInput = [&](size_t k) {
    if (!isFirst()) recvTensor(inputs_[k], prev);
  };
  auto backwardStep = [&](size_t k, bool send) {
    backwardMicro(k);
    if (send && !isFirst()) sendTensor(dx_, prev);
  };

  if (options_.schedule == PipelineSchedule::kGPipe) {
    for (size_t k = 0; k < m; ++k) {
      receiveInput(k);
      forwardStep(k, true);
    }
    for (size_t k = 0; k < m; ++k) {
      if (!isLast()) recvTensor(grads_in_[k], next);
      backwardStep(k, true);
    }
  } else {
    // Megatron-LM's forward_backward_pipelining_without_interleaving.
    const size_t warmup = std::min(static_cast<size_t>(stages_ - stage_ - 1), m);
    const size_t steady = m - warmup;
    for (size_t k = 0; k < warmup; ++k) {
      receiveInput(k);
      forwardStep(k, true);
    }
    if (steady > 0) receiveInput(warmup);
    for (size_t i = 0; i < steady; ++i) {
      const size_t kf = warmup + i;
      forwardStep(kf, false);
      // Send micro-batch kf's activations and receive micro-batch i's gradient together.
      if (!isLast()) exchange(outputs_[kf], grads_in_[i], next);
      backwardStep(i, false);
      if (isFirst()) continue;
      if (i + 1 == steady) {
        sendTensor(dx_, prev);
      } else {
        exchange(dx_, inputs_[kf + 1], prev);
      }
    }
    for (size_t k = steady; k < m; ++k) {
      if (!isLast()) recvTensor(grads_in_[k], next);
      backwardStep(k, true);
    }
  }
  counters_.step_seconds += since(t0);
  ++counters_.steps;
  return isLast() ? loss_sum_ : 0.0;
}

const Tensor* PipelineStage::forward(const Tensor& x) {
  const PipelineCounters saved = counters_;  // evaluation is not a training step
  Tensor in;
  if (!isFirst()) recvTensor(in, stage_ - 1);
  runForward(*model_, isFirst() ? x : in);
  slot_micro_[0] = -1;
  counters_ = saved;
  if (!isLast()) {
    sendTensor(acts_[last_ - 1], stage_ + 1);
    counters_ = saved;
    return nullptr;
  }
  return &acts_[last_ - 1];
}

void PipelineStage::optimizerStep(Optimizer& optimizer, braidComm_t dp_comm) {
  if (dp_comm != nullptr && !grads_.empty()) {
    checkCall(braidAllReduce(grads_.data(), grads_.data(), grads_.size(), braidFloat32, braidAvg,
                             dp_comm, nullptr),
              dp_comm, "braidAllReduce (data-parallel gradients)");
  }
  if (optimizer_ != &optimizer) {
    optimizer.resize(values_.size());
    if (optimizer.needsWholeParameters()) {
      std::vector<ParameterSlot> slots;
      size_t offset = 0;
      for (Parameter* q : params_) {
        const size_t rows = q->shape.size() >= 2 ? q->shape[0] : 1;
        slots.push_back({offset, rows, q->numel / rows});
        offset += q->numel;
      }
      optimizer.setSlots(slots);
    }
    optimizer_ = &optimizer;
  }
  optimizer.beginStep();
  if (!values_.empty()) optimizer.update(values_.data(), grads_.data(), values_.size(), 0);
  std::fill(grads_.begin(), grads_.end(), 0.0f);
}

std::vector<float> PipelineStage::gatherParameters() {
  if (comm_ == nullptr || stages_ == 1) return values_;
  std::vector<int64_t> sizes(static_cast<size_t>(stages_));
  const int64_t mine = static_cast<int64_t>(values_.size());
  checkCall(braidAllGather(&mine, sizes.data(), 1, braidInt64, comm_, nullptr), comm_,
            "braidAllGather (stage sizes)");
  const size_t most = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<float> padded(most, 0.0f), all(most * static_cast<size_t>(stages_));
  std::copy(values_.begin(), values_.end(), padded.begin());
  checkCall(braidAllGather(padded.data(), all.data(), most, braidFloat32, comm_, nullptr), comm_,
            "braidAllGather (stage parameters)");
  std::vector<float> out;
  for (size_t s = 0; s < static_cast<size_t>(stages_); ++s) {
    out.insert(out.end(), all.begin() + static_cast<long>(s * most),
               all.begin() + static_cast<long>(s * most + static_cast<size_t>(sizes[s])));
  }
  return out;
}

}  // namespace braid::training
