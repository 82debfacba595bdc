#include "training/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

namespace braid::training {

struct DataParallel::Unit {
  std::vector<size_t> params;   // model parameter indices, in the order they are laid out
  std::vector<size_t> offsets;  // each one's offset within the unit
  size_t numel = 0, padded = 0, slice = 0;
  size_t flat_offset = 0, shard_offset = 0;
  size_t pending = 0;              // gradients still to come in this backward
  std::vector<float> full_params;  // stage 3: the gathered values while a layer runs
  std::vector<float> full_grads;   // stages 2-3: the unit's gradients during backward
  std::vector<uint16_t> wire;      // 16-bit gradients while their collective is queued
};

namespace {
size_t roundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// The 16-bit wire formats: braidBfloat16 or braidFloat16 (Bf16 and Fp16 are one uint16_t).
void toWire(braidDataType_t dtype, const float* in, uint16_t* out, size_t n) {
  static_assert(sizeof(Bf16) == 2 && sizeof(Fp16) == 2);
  if (dtype == braidBfloat16) {
    toBf16(in, reinterpret_cast<Bf16*>(out), n);
  } else {
    toFp16(in, reinterpret_cast<Fp16*>(out), n);
  }
}

void fromWire(braidDataType_t dtype, const uint16_t* in, float* out, size_t n) {
  if (dtype == braidBfloat16) {
    fromBf16(reinterpret_cast<const Bf16*>(in), out, n);
  } else {
    fromFp16(reinterpret_cast<const Fp16*>(in), out, n);
  }
}
}  // namespace

void DataParallel::check(braidResult_t r, const char* call) {
  if (r != braidSuccess) {
    throw std::runtime_error(std::string(call) + " failed on rank " + std::to_string(rank_) + ": " +
                             braidGetErrorString(r) + ": " + braidGetLastError(comm_));
  }
}

void DataParallel::synchronize() {
  const auto t0 = std::chrono::steady_clock::now();
  check(braidStreamSynchronize(stream_), "braidStreamSynchronize");
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

DataParallel::DataParallel(Sequential& model, Optimizer& optimizer, braidComm_t comm,
                           DataParallelOptions options)
    : model_(model), optimizer_(optimizer), comm_(comm), options_(options) {
  if (options_.zero_stage < 0 || options_.zero_stage > 3) {
    throw std::invalid_argument("DataParallel: ZeRO stage " + std::to_string(options_.zero_stage) +
                                " is not one of 0, 1, 2, 3");
  }
  if (options_.grad_dtype != braidFloat32 && options_.grad_dtype != braidBfloat16 &&
      options_.grad_dtype != braidFloat16) {
    throw std::invalid_argument(
        std::string("DataParallel: gradients travel as float, half or bfloat16, not ") +
        braidTypeName(options_.grad_dtype));
  }
  if (options_.loss_scaling) scaler_ = std::make_unique<LossScaler>(options_.scaler);
  if (options_.first_bucket_bytes == 0 || options_.bucket_cap_bytes == 0) {
    throw std::invalid_argument("DataParallel: bucket caps must be at least 1 byte");
  }
  if (optimizer_.needsWholeParameters() && options_.zero_stage != 0) {
    throw std::invalid_argument("DataParallel: " + optimizer_.name() +
                                " steps whole parameters (it factors matrices); ZeRO stage " +
                                std::to_string(options_.zero_stage) + " shards them: use stage 0");
  }
  if (!options_.local_parameters.empty()) {
    if (options_.zero_stage != 0 || options_.compute != Precision::kFp32 ||
        options_.grad_dtype != braidFloat32 || options_.loss_scaling ||
        optimizer_.needsWholeParameters())
      throw std::invalid_argument(
          "DataParallel: local (expert) parameters need ZeRO stage 0, fp32 compute and "
          "gradients, no loss scaling and an optimizer that steps flat ranges (not " +
          optimizer_.name() + ")");
    // Into storage of the engine's own: the model's flat buffer is released below.
    size_t n = 0;
    for (Parameter* p : options_.local_parameters) n += p->numel;
    local_values_.resize(n);
    local_grads_.assign(n, 0.0f);
    size_t off = 0;
    for (Parameter* p : options_.local_parameters) {
      std::copy_n(p->value, p->numel, local_values_.data() + off);
      p->value = local_values_.data() + off;
      p->grad = local_grads_.data() + off;
      off += p->numel;
    }
  }
  check(braidCommCount(comm_, &nranks_), "braidCommCount");
  check(braidCommUserRank(comm_, &rank_), "braidCommUserRank");
  check(braidStreamCreate(&stream_), "braidStreamCreate");
  try {
    layOut();
  } catch (...) {
    braidStreamDestroy(stream_);
    throw;
  }
}

// Builds the units, moves the parameters into them and installs the layer hooks.
void DataParallel::layOut() {
  const size_t n = static_cast<size_t>(nranks_);
  const int stage = options_.zero_stage;

  const auto& locals = options_.local_parameters;
  auto isLocal = [&](const Parameter* p) {
    return std::find(locals.begin(), locals.end(), p) != locals.end();
  };
  for (Parameter* p : model_.parameters())
    if (!isLocal(p)) model_params_.push_back(p);
  const std::vector<Parameter*>& params = model_params_;
  std::vector<size_t> param_order_offset(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    param_order_offset[i] = psi_;
    psi_ += params[i]->numel;
  }
  layer_params_.resize(model_.numLayers());
  auto& layer_params = layer_params_;
  for (size_t l = 0, i = 0; l < model_.numLayers(); ++l) {
    for (Parameter* p : model_.layer(l).parameters())
      if (!isLocal(p)) layer_params[l].push_back(i++);
  }

  // Units in reverse parameter order: buckets (stages 0-2) or layers (stage 3).
  if (stage < 3) {
    Unit cur;
    for (size_t i = params.size(); i-- > 0;) {
      cur.params.push_back(i);
      cur.numel += params[i]->numel;
      const size_t cap = units_.empty() ? options_.first_bucket_bytes : options_.bucket_cap_bytes;
      if (cur.numel * sizeof(float) >= cap) units_.push_back(std::exchange(cur, Unit{}));
    }
    if (!cur.params.empty()) units_.push_back(std::move(cur));
  } else {
    for (size_t l = model_.numLayers(); l-- > 0;) {
      if (layer_params[l].empty()) continue;
      Unit u;
      for (size_t i : layer_params[l]) {
        u.params.push_back(i);
        u.numel += params[i]->numel;
      }
      units_.push_back(std::move(u));
    }
  }
  size_t flat = 0, shard = 0;
  param_unit_.assign(params.size(), 0);
  for (size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    size_t off = 0;
    for (size_t i : unit.params) {
      unit.offsets.push_back(off);
      off += params[i]->numel;
      param_unit_[i] = u;
    }
    unit.padded = roundUp(unit.numel, n);
    unit.slice = unit.padded / n;
    unit.flat_offset = flat;
    unit.shard_offset = shard;
    flat += unit.padded;
    shard += unit.slice;
  }
  layer_units_.resize(model_.numLayers());
  for (size_t l = 0; l < model_.numLayers(); ++l) {
    for (size_t i : layer_params[l]) {
      auto& lu = layer_units_[l];
      if (std::find(lu.begin(), lu.end(), param_unit_[i]) == lu.end()) lu.push_back(param_unit_[i]);
    }
  }

  // Rank 0's initial values, laid out in units.
  std::vector<float> initial;
  initial.reserve(psi_);
  for (const Parameter* p : params) initial.insert(initial.end(), p->value, p->value + p->numel);
  check(braidBroadcast(initial.data(), initial.data(), initial.size(), braidFloat32, 0, comm_,
                       stream_),
        "braidBroadcast");
  synchronize();
  std::vector<float> laid_out(flat, 0.0f);
  for (const Unit& unit : units_) {
    for (size_t k = 0; k < unit.params.size(); ++k) {
      const size_t i = unit.params[k];
      std::copy_n(initial.data() + param_order_offset[i], params[i]->numel,
                  laid_out.data() + unit.flat_offset + unit.offsets[k]);
    }
  }
  model_.releaseStorage();
  for (Parameter* p : params) p->value = p->grad = nullptr;

  if (stage < 3) {
    params_ = std::move(laid_out);
    // Forward and backward read the rounded copy when compute is 16-bit, else the master.
    if (options_.compute != Precision::kFp32) compute_params_.assign(params_.size(), 0.0f);
    float* seen = compute_params_.empty() ? params_.data() : compute_params_.data();
    for (const Unit& unit : units_) {
      for (size_t k = 0; k < unit.params.size(); ++k) {
        params[unit.params[k]]->value = seen + unit.flat_offset + unit.offsets[k];
      }
    }
    refreshComputeCopy();
  } else {
    param_shard_.assign(shard, 0.0f);
    for (const Unit& unit : units_) {
      std::copy_n(laid_out.data() + unit.flat_offset + static_cast<size_t>(rank_) * unit.slice,
                  unit.slice, param_shard_.data() + unit.shard_offset);
    }
  }
  if (stage < 2) {
    grads_.assign(flat, 0.0f);
    for (const Unit& unit : units_) {
      for (size_t k = 0; k < unit.params.size(); ++k) {
        params[unit.params[k]]->grad = grads_.data() + unit.flat_offset + unit.offsets[k];
      }
    }
  } else {
    grad_shard_.assign(shard, 0.0f);
  }
  optimizer_.resize(stage == 0 ? flat + local_values_.size() : shard);
  if (optimizer_.needsWholeParameters()) {
    std::vector<ParameterSlot> slots;
    for (const Unit& unit : units_) {
      for (size_t k = 0; k < unit.params.size(); ++k) {
        const Parameter& p = *params[unit.params[k]];
        const size_t rows = p.shape.size() >= 2 ? p.shape[0] : 1;
        slots.push_back(ParameterSlot{unit.flat_offset + unit.offsets[k], rows, p.numel / rows});
      }
    }
    optimizer_.setSlots(slots);
  }

  model_.setPrecision(options_.compute);
  model_.hooks.before_forward = [this](size_t l) {
    if (options_.zero_stage == 3) {
      for (size_t u : layer_units_[l]) gatherParameters(u);
    }
  };
  model_.hooks.after_forward = [this](size_t l) {
    if (options_.zero_stage == 3) {
      for (size_t u : layer_units_[l]) releaseParameters(u);
    }
  };
  model_.hooks.before_backward = [this](size_t l) {
    for (size_t u : layer_units_[l]) {
      if (options_.zero_stage == 3) gatherParameters(u);
      if (options_.zero_stage >= 2) ensureGradients(u);
    }
  };
  model_.hooks.after_backward = [this](size_t l) { onAfterBackward(l); };
}

braidDataType_t DataParallel::computeWireType() const {
  return options_.compute == Precision::kBf16 ? braidBfloat16 : braidFloat16;
}

// Stages 1-2 with 16-bit compute: each rank rounds its updated slice of the master weights
// and the ranks all-gather the 16-bit values straight into the working copy (ZeRO's
// mixed-precision gather: half the bytes of gathering fp32). The other ranks' slices of
// params_ are then stale; fullParameters gathers them when asked.
void DataParallel::gatherComputeCopy() {
  const size_t r = static_cast<size_t>(rank_);
  const braidDataType_t dt = computeWireType();
  std::vector<uint16_t> wire(params_.size());
  for (const Unit& unit : units_) {
    uint16_t* w = wire.data() + unit.flat_offset;
    toWire(dt, params_.data() + unit.flat_offset + r * unit.slice, w + r * unit.slice, unit.slice);
    check(braidAllGather(w + r * unit.slice, w, unit.slice, dt, comm_, stream_), "braidAllGather");
    comm_volume_bytes_ += unit.padded * sizeof(uint16_t);
  }
  synchronize();
  fromWire(dt, wire.data(), compute_params_.data(), wire.size());
  master_whole_ = false;
}

void DataParallel::refreshComputeCopy() {
  if (compute_params_.empty()) return;
  std::copy(params_.begin(), params_.end(), compute_params_.begin());
  roundTo(options_.compute, compute_params_.data(), compute_params_.size());
}

DataParallel::~DataParallel() {
  model_.hooks = LayerHooks{};
  if (stream_) braidStreamDestroy(stream_);
}

void DataParallel::gatherParameters(size_t u, bool for_compute) {
  Unit& unit = units_[u];
  const std::vector<Parameter*>& params = model_params_;
  if (for_compute && options_.compute != Precision::kFp32) {
    // The working copy travels in 16 bits: rounding before the gather gives the same values
    // as rounding after it, for half the bytes.
    const size_t r = static_cast<size_t>(rank_);
    const braidDataType_t dt = computeWireType();
    std::vector<uint16_t> wire(unit.padded);
    toWire(dt, param_shard_.data() + unit.shard_offset, wire.data() + r * unit.slice, unit.slice);
    check(braidAllGather(wire.data() + r * unit.slice, wire.data(), unit.slice, dt, comm_, stream_),
          "braidAllGather");
    comm_volume_bytes_ += unit.padded * sizeof(uint16_t);
    synchronize();
    unit.full_params.resize(unit.padded);
    fromWire(dt, wire.data(), unit.full_params.data(), unit.padded);
    for (size_t k = 0; k < unit.params.size(); ++k) {
      params[unit.params[k]]->value = unit.full_params.data() + unit.offsets[k];
    }
    return;
  }
  unit.full_params.assign(unit.padded, 0.0f);
  check(braidAllGather(param_shard_.data() + unit.shard_offset, unit.full_params.data(), unit.slice,
                       braidFloat32, comm_, stream_),
        "braidAllGather");
  comm_volume_bytes_ += unit.padded * sizeof(float);
  synchronize();
  for (size_t k = 0; k < unit.params.size(); ++k) {
    params[unit.params[k]]->value = unit.full_params.data() + unit.offsets[k];
  }
}

void DataParallel::releaseParameters(size_t u) {
  Unit& unit = units_[u];
  const std::vector<Parameter*>& params = model_params_;
  for (size_t i : unit.params) params[i]->value = nullptr;
  std::vector<float>().swap(unit.full_params);
}

void DataParallel::ensureGradients(size_t u) {
  Unit& unit = units_[u];
  if (!unit.full_grads.empty()) return;
  unit.full_grads.assign(unit.padded, 0.0f);
  const std::vector<Parameter*>& params = model_params_;
  for (size_t k = 0; k < unit.params.size(); ++k) {
    params[unit.params[k]]->grad = unit.full_grads.data() + unit.offsets[k];
  }
}

void DataParallel::launchGradients(size_t u) {
  Unit& unit = units_[u];
  const size_t r = static_cast<size_t>(rank_);
  const braidDataType_t wire = options_.grad_dtype;
  if (wire != braidFloat32) {
    // Round into the wire buffer; the collective runs on it in place.
    const float* g =
        options_.zero_stage < 2 ? grads_.data() + unit.flat_offset : unit.full_grads.data();
    unit.wire.resize(unit.padded);
    toWire(wire, g, unit.wire.data(), unit.padded);
    if (options_.zero_stage >= 2) {
      for (size_t i : unit.params) model_params_[i]->grad = nullptr;
      std::vector<float>().swap(unit.full_grads);
    }
    if (options_.zero_stage == 0) {
      check(braidAllReduce(unit.wire.data(), unit.wire.data(), unit.numel, wire, braidAvg, comm_,
                           stream_),
            "braidAllReduce");
      comm_volume_bytes_ += 2 * unit.numel * sizeof(uint16_t);
    } else {
      check(braidReduceScatter(unit.wire.data(), unit.wire.data() + r * unit.slice, unit.slice,
                               wire, braidAvg, comm_, stream_),
            "braidReduceScatter");
      comm_volume_bytes_ += unit.padded * sizeof(uint16_t);
    }
    return;
  }
  switch (options_.zero_stage) {
    case 0:
      check(braidAllReduce(grads_.data() + unit.flat_offset, grads_.data() + unit.flat_offset,
                           unit.numel, braidFloat32, braidAvg, comm_, stream_),
            "braidAllReduce");
      comm_volume_bytes_ += 2 * unit.numel * sizeof(float);
      break;
    case 1:
      check(braidReduceScatter(grads_.data() + unit.flat_offset,
                               grads_.data() + unit.flat_offset + r * unit.slice, unit.slice,
                               braidFloat32, braidAvg, comm_, stream_),
            "braidReduceScatter");
      comm_volume_bytes_ += unit.padded * sizeof(float);
      break;
    default:
      check(braidReduceScatter(unit.full_grads.data(), grad_shard_.data() + unit.shard_offset,
                               unit.slice, braidFloat32, braidAvg, comm_, stream_),
            "braidReduceScatter");
      comm_volume_bytes_ += unit.padded * sizeof(float);
      break;
  }
}

void DataParallel::onAfterBackward(size_t l) {
  for (size_t u : layer_units_[l]) {
    Unit& unit = units_[u];
    size_t mine = 0;
    for (size_t i : layer_params_[l]) mine += param_unit_[i] == u ? 1 : 0;
    unit.pending -= std::min(unit.pending, mine);
    if (options_.zero_stage == 3) releaseParameters(u);
    if (unit.pending == 0 && syncing_ && options_.overlap) launchGradients(u);
  }
}

float DataParallel::forwardBackward(const Tensor& x, const std::vector<int32_t>& labels,
                                    SoftmaxCrossEntropy& loss, bool sync) {
  if (!sync && options_.zero_stage >= 2) {
    throw std::invalid_argument(
        "DataParallel: no-sync gradient accumulation needs whole gradients (stages 0 and 1); "
        "stage " +
        std::to_string(options_.zero_stage) + " keeps only a shard");
  }
  syncing_ = sync;
  for (Unit& unit : units_) unit.pending = unit.params.size();
  const Tensor& logits = model_.forward(x);
  const float l = loss.forward(logits, labels);
  Tensor dlogits;
  loss.backward(dlogits);
  if (scaler_) {
    const float s = scaler_->scale();
    for (size_t i = 0; i < dlogits.numel(); ++i) dlogits[i] *= s;
  }
  model_.backward(dlogits);
  if (sync && !options_.overlap) {
    for (size_t u = 0; u < units_.size(); ++u) launchGradients(u);
  }
  return l;
}

// bf16 gradients back into the fp32 buffers the optimizer reads: the whole unit (stage 0) or
// this rank's slice.
void DataParallel::widenGradients() {
  const size_t r = static_cast<size_t>(rank_);
  for (Unit& unit : units_) {
    if (unit.wire.empty()) continue;
    switch (options_.zero_stage) {
      case 0:
        fromWire(options_.grad_dtype, unit.wire.data(), grads_.data() + unit.flat_offset,
                 unit.numel);
        break;
      case 1:
        fromWire(options_.grad_dtype, unit.wire.data() + r * unit.slice,
                 grads_.data() + unit.flat_offset + r * unit.slice, unit.slice);
        break;
      default:
        fromWire(options_.grad_dtype, unit.wire.data() + r * unit.slice,
                 grad_shard_.data() + unit.shard_offset, unit.slice);
        break;
    }
    std::vector<uint16_t>().swap(unit.wire);
  }
}

// Unscales this rank's share of the averaged gradients and returns whether any rank's share
// holds an inf or NaN: the flag is all-reduced with braidMax, so every rank gets the same
// verdict (at stages 1-3 a rank sees only its own slices).
bool DataParallel::gradientsOverflowed() {
  const size_t r = static_cast<size_t>(rank_);
  const float inv = 1.0f / scaler_->scale();
  bool finite = true;
  auto unscale = [&](float* g, size_t n) {
    for (size_t i = 0; i < n; ++i) g[i] *= inv;
    finite = allFinite(g, n) && finite;
  };
  switch (options_.zero_stage) {
    case 0:
      unscale(grads_.data(), grads_.size());
      break;
    case 1:
      for (const Unit& unit : units_)
        unscale(grads_.data() + unit.flat_offset + r * unit.slice, unit.slice);
      break;
    default:
      unscale(grad_shard_.data(), grad_shard_.size());
      break;
  }
  float flag = finite ? 0.0f : 1.0f;
  check(braidAllReduce(&flag, &flag, 1, braidFloat32, braidMax, comm_, stream_), "braidAllReduce");
  comm_volume_bytes_ += 2 * sizeof(float);
  synchronize();
  return flag != 0.0f;
}

void DataParallel::averageLocalGradients() {
  int n = 1;
  if (local_grads_.empty() || options_.local_comm == nullptr) return;
  check(braidCommCount(options_.local_comm, &n), "braidCommCount (local_comm)");
  if (n == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  check(braidAllReduce(local_grads_.data(), local_grads_.data(), local_grads_.size(), braidFloat32,
                       braidAvg, options_.local_comm, nullptr),
        "braidAllReduce (local parameters' gradients)");
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  comm_volume_bytes_ += 2 * local_grads_.size() * sizeof(float);  // as the buckets' all-reduce
}

void DataParallel::optimizerStep() {
  synchronize();
  widenGradients();
  last_step_applied_ = !scaler_ || scaler_->update(gradientsOverflowed());
  if (!last_step_applied_) ++skipped_steps_;
  const size_t r = static_cast<size_t>(rank_);
  if (last_step_applied_) optimizer_.beginStep();
  switch (last_step_applied_ ? options_.zero_stage : -1) {
    case 0:
      optimizer_.update(params_.data(), grads_.data(), params_.size(), 0);
      averageLocalGradients();
      if (!local_values_.empty())  // its state after the shared parameters'
        optimizer_.update(local_values_.data(), local_grads_.data(), local_values_.size(),
                          params_.size());
      break;
    case 1:
    case 2:
      for (const Unit& unit : units_) {
        float* p = params_.data() + unit.flat_offset + r * unit.slice;
        const float* g = options_.zero_stage == 1
                             ? grads_.data() + unit.flat_offset + r * unit.slice
                             : grad_shard_.data() + unit.shard_offset;
        optimizer_.update(p, g, unit.slice, unit.shard_offset);
      }
      if (!compute_params_.empty()) {
        gatherComputeCopy();
        break;
      }
      for (const Unit& unit : units_) {
        check(braidAllGather(params_.data() + unit.flat_offset + r * unit.slice,
                             params_.data() + unit.flat_offset, unit.slice, braidFloat32, comm_,
                             stream_),
              "braidAllGather");
        comm_volume_bytes_ += unit.padded * sizeof(float);
      }
      synchronize();
      break;
    case 3:
      optimizer_.update(param_shard_.data(), grad_shard_.data(), param_shard_.size(), 0);
      break;
    default:  // skipped: the parameters stay as they are on every rank
      break;
  }
  if (last_step_applied_ && options_.zero_stage == 0) refreshComputeCopy();
  if (options_.zero_stage < 2) {
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    std::fill(local_grads_.begin(), local_grads_.end(), 0.0f);
  } else {
    const std::vector<Parameter*>& params = model_params_;
    for (Unit& unit : units_) {
      for (size_t i : unit.params) params[i]->grad = nullptr;
      std::vector<float>().swap(unit.full_grads);
    }
  }
}

const Tensor& DataParallel::forward(const Tensor& x) { return model_.forward(x); }

// Where parameter i of the model's order starts in the stage-0 layout (flat, padded).
size_t DataParallel::flatOffsetOf(size_t i) const {
  const Unit& unit = units_[param_unit_[i]];
  const size_t k = static_cast<size_t>(std::find(unit.params.begin(), unit.params.end(), i) -
                                       unit.params.begin());
  return unit.flat_offset + unit.offsets[k];
}

// The number of per-element buffers in `state` for a layout of `flat` elements.
size_t DataParallel::stateBuffers(const Optimizer::State& state, size_t flat) const {
  if (options_.zero_stage != 0 || !local_values_.empty())
    throw std::logic_error(
        "DataParallel: the optimizer state moves between layouts at stage 0, "
        "without local parameters, only");
  if (optimizer_.needsWholeParameters() ||
      (flat == 0 ? !state.values.empty() : state.values.size() % flat != 0))
    throw std::logic_error("DataParallel: " + optimizer_.name() +
                           "'s state is not one value per element and buffer");
  return flat == 0 ? 0 : state.values.size() / flat;
}

Optimizer::State DataParallel::optimizerState() const {
  const Optimizer::State mine = optimizer_.saveState();
  const size_t flat = params_.size(), buffers = stateBuffers(mine, flat);
  Optimizer::State out{{}, mine.step};
  out.values.reserve(buffers * psi_);
  for (size_t b = 0; b < buffers; ++b)
    for (size_t i = 0; i < model_params_.size(); ++i) {
      const float* p = mine.values.data() + b * flat + flatOffsetOf(i);
      out.values.insert(out.values.end(), p, p + model_params_[i]->numel);
    }
  return out;
}

void DataParallel::setOptimizerState(const Optimizer::State& state) {
  const size_t flat = params_.size();
  Optimizer::State laid{std::vector<float>(stateBuffers(optimizer_.saveState(), flat) * flat),
                        state.step};
  if (state.values.size() * flat != laid.values.size() * psi_)
    throw std::logic_error("DataParallel: an optimizer state of " +
                           std::to_string(state.values.size()) + " values for " +
                           std::to_string(psi_) + " parameters");
  size_t at = 0;
  for (size_t b = 0; flat && b < laid.values.size() / flat; ++b)
    for (size_t i = 0; i < model_params_.size(); ++i) {
      std::copy_n(state.values.data() + at, model_params_[i]->numel,
                  laid.values.data() + b * flat + flatOffsetOf(i));
      at += model_params_[i]->numel;
    }
  if (!optimizer_.loadState(laid)) throw std::logic_error("DataParallel: optimizer state size");
}

std::vector<float> DataParallel::fullParameters() {
  if (options_.zero_stage < 3) {
    if (!master_whole_) {
      const size_t r = static_cast<size_t>(rank_);
      for (const Unit& unit : units_) {
        check(braidAllGather(params_.data() + unit.flat_offset + r * unit.slice,
                             params_.data() + unit.flat_offset, unit.slice, braidFloat32, comm_,
                             stream_),
              "braidAllGather");
      }
      synchronize();
      master_whole_ = true;
    }
    // The fp32 master values (the model's views may point at the rounded copy).
    std::vector<float> out;
    out.reserve(psi_);
    for (size_t i = 0; i < model_params_.size(); ++i) {
      const float* p = params_.data() + flatOffsetOf(i);
      out.insert(out.end(), p, p + model_params_[i]->numel);
    }
    return out;
  }
  for (size_t u = 0; u < units_.size(); ++u) gatherParameters(u, false);
  std::vector<float> out = model_.flatValues();
  for (size_t u = 0; u < units_.size(); ++u) releaseParameters(u);
  return out;
}

void DataParallel::allReduceSum(std::vector<double>& values) {
  check(braidAllReduce(values.data(), values.data(), values.size(), braidFloat64, braidSum, comm_,
                       stream_),
        "braidAllReduce");
  synchronize();
}

size_t DataParallel::numUnits() const { return units_.size(); }

MemoryAccount DataParallel::memory() const {
  MemoryAccount m;
  m.param_bytes = (params_.size() + param_shard_.size()) * sizeof(float) +
                  compute_params_.size() * bytesPerElement(options_.compute);
  m.grad_bytes = (grads_.size() + grad_shard_.size()) * sizeof(float);
  m.optim_bytes = optimizer_.stateBytes();
  return m;
}

}  // namespace braid::training
