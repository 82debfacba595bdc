// The "braid" backend of torch.distributed (issue 33): a c10d process group whose collectives
// are Braid's, over the public header alone. braid_torch/__init__.py registers it and hands it
// the unique id through the c10d store; this file is the module braid_torch._C.
//
// Every call runs to its end inside the call (Braid's NULL stream: run now, return when done),
// on CPU tensors, one tensor per process (no multi-device lists). The Work a call returns is
// therefore complete: wait() returns at once, or rethrows Braid's error, and getFuture() is a
// completed c10::ivalue::Future holding the call's outputs. A wrong argument (dtype, op, shape)
// raises at the call itself, before anything moves; a failure of Braid (a peer gone, a timeout)
// is the Work's exception.
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <chrono>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "braid/braid.h"

// torch 2 splits the process group into a ProcessGroup front and Backends behind it; a
// third-party backend there derives from c10d::Backend, which has the same virtual calls.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace braid_torch {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "an unknown ReduceOp";
  }
}

// torch's dtype as Braid's. bool travels as uint8 (0 or 1): its reductions are mapped onto
// MAX and MIN below, so a result is 0 or 1 again.
braidDataType_t braidType(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kHalf:
      return braidFloat16;
    case at::kBFloat16:
      return braidBfloat16;
    case at::kFloat:
      return braidFloat32;
    case at::kDouble:
      return braidFloat64;
    case at::kChar:
      return braidInt8;
    case at::kByte:
    case at::kBool:
      return braidUint8;
    case at::kInt:
      return braidInt32;
    case at::kLong:
      return braidInt64;
    default:
      TORCH_CHECK(false, "braid backend: ", call, " does not support dtype ", t.scalar_type(),
                  " (Braid has float16, bfloat16, float32, float64, int8, uint8, int32, int64;"
                  " bool travels as uint8)");
  }
}

// torch's ReduceOp as Braid's. Braid has SUM, PRODUCT, MIN, MAX and AVG; on bool, SUM and BOR
// are a logical or (MAX of 0/1, as Gloo's bool sum) and PRODUCT and BAND a logical and (MIN).
braidRedOp_t braidOp(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const char* call) {
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(reduceOp);
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op) {
    case c10d::ReduceOp::SUM:
      return isBool ? braidMax : braidSum;
    case c10d::ReduceOp::PRODUCT:
      return isBool ? braidMin : braidProd;
    case c10d::ReduceOp::MIN:
      return braidMin;
    case c10d::ReduceOp::MAX:
      return braidMax;
    case c10d::ReduceOp::AVG:
      if (!isBool) return braidAvg;
      break;
    case c10d::ReduceOp::BAND:
      if (isBool) return braidMin;
      break;
    case c10d::ReduceOp::BOR:
      if (isBool) return braidMax;
      break;
    default:
      break;
  }
  TORCH_CHECK(false, "braid backend: ", call, " does not support ReduceOp.", opName(op), " on ",
              t.scalar_type(),
              " (Braid reduces with SUM, PRODUCT, MIN, MAX and AVG; BAND and BOR only on bool,"
              " as MIN and MAX; no BXOR or PREMUL_SUM yet)");
}

void checkTensor(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.defined(), "braid backend: ", call, " got an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "braid backend: ", call,
              " takes CPU tensors in this version (got one on ", t.device(), ")");
  TORCH_CHECK(t.layout() == at::kStrided, "braid backend: ", call,
              " takes dense (strided) tensors, not ", t.layout());
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "braid backend: ", call,
              " takes one tensor per process (got a list of ", tensors.size(), ")");
  checkTensor(tensors[0], call);
  return tensors[0];
}

void checkSameType(const at::Tensor& a, const at::Tensor& b, const char* call) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "braid backend: ", call,
              " needs one dtype for input and output (got ", a.scalar_type(), " and ",
              b.scalar_type(), ")");
}

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// A tensor as Braid reads or writes it: itself when contiguous, else a contiguous copy, which
// writeBack() copies into the caller's tensor after the call.
class Dense {
 public:
  explicit Dense(const at::Tensor& t) : user_(t), buf_(t.contiguous()) {}
  void* data() const { return buf_.numel() == 0 ? nullptr : buf_.data_ptr(); }
  const at::Tensor& buffer() const { return buf_; }
  void writeBack() {
    if (!buf_.is_same(user_)) user_.copy_(buf_);
  }

 private:
  at::Tensor user_;
  at::Tensor buf_;
};

// The outcome of one call: complete when made, with the outputs as its result and its future's
// value, or with Braid's error as its exception.
class BraidWork : public c10d::Work {
 public:
  BraidWork(int rank, OpType type, std::vector<at::Tensor> outputs, std::exception_ptr error)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class BraidProcessGroup : public BackendBase {
 public:
  BraidProcessGroup(const std::string& uniqueId, int rank, int size, double timeoutSec)
      : BackendBase(rank, size) {
    braidUniqueId id;
    TORCH_CHECK(
        braidUniqueIdFromString(uniqueId.c_str(), &id) == braidSuccess,
        "braid backend: the unique id from the store does not parse: ", braidGetLastError(nullptr));
    braidConfig_t config = BRAID_CONFIG_INITIALIZER;
    config.timeoutSec = timeoutSec;
    const braidResult_t r = braidCommInitRankConfig(&comm_, size, id, rank, &config);
    TORCH_CHECK(r == braidSuccess, "braid backend: rank ", rank, " of ", size,
                " could not join the communicator: ", braidGetErrorString(r), ": ",
                braidGetLastError(nullptr));
  }

  ~BraidProcessGroup() override {
    if (comm_ != nullptr) braidCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "braid"; }

  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    at::Tensor& t = single(tensors, "allreduce");
    const braidDataType_t type = braidType(t, "allreduce");
    const braidRedOp_t op = braidOp(opts.reduceOp, t, "allreduce");
    Dense d(t);
    const braidResult_t r = braidAllReduce(d.data(), d.data(), count(t), type, op, comm_, nullptr);
    return complete(OpType::ALLREDUCE, "allreduce", r, {t}, {&d});
  }

  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    // One all-reduce per tensor, in order: every rank passes the same list.
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      auto work = allreduce(one, opts);
      if (work->exception()) return work;
    }
    return complete(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", braidSuccess, tensors, {});
  }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    at::Tensor& t = single(tensors, "broadcast");
    checkRoot(opts.rootRank, "broadcast");
    const braidDataType_t type = braidType(t, "broadcast");
    Dense d(t);
    const braidResult_t r =
        braidBroadcast(d.data(), d.data(), count(t), type, opts.rootRank, comm_, nullptr);
    return complete(OpType::BROADCAST, "broadcast", r, {t}, {&d});
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    at::Tensor& t = single(tensors, "reduce");
    checkRoot(opts.rootRank, "reduce");
    const braidDataType_t type = braidType(t, "reduce");
    const braidRedOp_t op = braidOp(opts.reduceOp, t, "reduce");
    Dense d(t);
    // Only the root's tensor is written (as Gloo and NCCL: the others keep their input).
    const bool root = getRank() == static_cast<int>(opts.rootRank);
    const braidResult_t r = braidReduce(d.data(), root ? d.data() : nullptr, count(t), type, op,
                                        opts.rootRank, comm_, nullptr);
    return complete(OpType::REDUCE, "reduce", r, {t}, {&d});
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    (void)opts;
    at::Tensor& in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "braid backend: allgather takes one output list per process");
    std::vector<at::Tensor>& outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "braid backend: allgather needs ",
                getSize(), " output tensors (one per rank), got ", outs.size());
    for (const auto& o : outs) {
      checkTensor(o, "allgather");
      checkSameType(in, o, "allgather");
      TORCH_CHECK(o.numel() == in.numel(), "braid backend: allgather's outputs must have the ",
                  "input's ", in.numel(), " elements (got one of ", o.numel(), ")");
    }
    const braidDataType_t type = braidType(in, "allgather");
    Dense src(in);
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    const braidResult_t r = braidAllGather(src.data(), flat.numel() ? flat.data_ptr() : nullptr,
                                           count(in), type, comm_, nullptr);
    if (r == braidSuccess) {
      for (int i = 0; i < getSize(); ++i) {
        outs[i].copy_(flat.narrow(0, i * in.numel(), in.numel()).view(outs[i].sizes()));
      }
    }
    return complete(OpType::ALLGATHER, "allgather", r, outs, {});
  }

  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    (void)opts;
    checkTensor(output, "_allgather_base");
    checkTensor(input, "_allgather_base");
    checkSameType(input, output, "_allgather_base");
    TORCH_CHECK(output.numel() == getSize() * input.numel(), "braid backend: _allgather_base's ",
                "output must hold world size (", getSize(), ") times the input's ", input.numel(),
                " elements (got ", output.numel(), ")");
    const braidDataType_t type = braidType(input, "_allgather_base");
    Dense src(input);
    Dense dst(output);
    const braidResult_t r =
        braidAllGather(src.data(), dst.data(), count(input), type, comm_, nullptr);
    return complete(OpType::_ALLGATHER_BASE, "_allgather_base", r, {output}, {&dst});
  }

  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1,
                "braid backend: reduce_scatter takes one input list per process");
    std::vector<at::Tensor>& ins = inputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == getSize(), "braid backend: reduce_scatter needs ",
                getSize(), " input tensors (one per rank), got ", ins.size());
    for (const auto& i : ins) {
      checkTensor(i, "reduce_scatter");
      checkSameType(i, out, "reduce_scatter");
      TORCH_CHECK(i.numel() == out.numel(), "braid backend: reduce_scatter's inputs must have the ",
                  "output's ", out.numel(), " elements (got one of ", i.numel(), ")");
    }
    const braidDataType_t type = braidType(out, "reduce_scatter");
    const braidRedOp_t op = braidOp(opts.reduceOp, out, "reduce_scatter");
    at::Tensor flat = at::empty({getSize() * out.numel()}, out.options());
    for (int i = 0; i < getSize(); ++i) {
      flat.narrow(0, i * out.numel(), out.numel()).copy_(ins[i].reshape({-1}));
    }
    Dense dst(out);
    const braidResult_t r = braidReduceScatter(flat.numel() ? flat.data_ptr() : nullptr, dst.data(),
                                               count(out), type, op, comm_, nullptr);
    return complete(OpType::REDUCE_SCATTER, "reduce_scatter", r, {out}, {&dst});
  }

  WorkPtr _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    checkTensor(output, "_reduce_scatter_base");
    checkTensor(input, "_reduce_scatter_base");
    checkSameType(input, output, "_reduce_scatter_base");
    TORCH_CHECK(input.numel() == getSize() * output.numel(),
                "braid backend: ", "_reduce_scatter_base's input must hold world size (", getSize(),
                ") times the output's ", output.numel(), " elements (got ", input.numel(), ")");
    const braidDataType_t type = braidType(output, "_reduce_scatter_base");
    const braidRedOp_t op = braidOp(opts.reduceOp, output, "_reduce_scatter_base");
    Dense src(input);
    Dense dst(output);
    const braidResult_t r =
        braidReduceScatter(src.data(), dst.data(), count(output), type, op, comm_, nullptr);
    return complete(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", r, {output}, {&dst});
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override {
    (void)opts;
    return complete(OpType::BARRIER, "barrier", braidBarrier(comm_, nullptr), {}, {});
  }

  // Point to point: Braid matches the messages between two ranks in posting order, so the tag
  // is not used. Each call blocks until its message has moved (no batch_isend_irecv yet).
  WorkPtr send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override {
    (void)tag;
    at::Tensor& t = single(tensors, "send");
    checkPeer(dstRank, "send");
    const braidDataType_t type = braidType(t, "send");
    Dense d(t);
    const braidResult_t r = braidSend(d.data(), count(t), type, dstRank, comm_, nullptr);
    return complete(OpType::SEND, "send", r, {t}, {});
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override {
    (void)tag;
    at::Tensor& t = single(tensors, "recv");
    checkPeer(srcRank, "recv");
    const braidDataType_t type = braidType(t, "recv");
    Dense d(t);
    const braidResult_t r = braidRecv(d.data(), count(t), type, srcRank, comm_, nullptr);
    return complete(OpType::RECV, "recv", r, {t}, {&d});
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    at::Tensor& in = single(inputs, "gather");
    checkRoot(opts.rootRank, "gather");
    const bool root = getRank() == static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> outs;
    if (root) {
      TORCH_CHECK(outputs.size() == 1, "braid backend: gather takes one output list on the root");
      outs = outputs[0];
      checkBlocks(outs, in, "gather", "output");
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "braid backend: gather takes outputs on the root only");
    }
    const braidDataType_t type = braidType(in, "gather");
    Dense src(in);
    at::Tensor flat = at::empty({root ? getSize() * in.numel() : 0}, in.options());
    const braidResult_t r = braidGather(src.data(), flat.numel() ? flat.data_ptr() : nullptr,
                                        count(in), type, opts.rootRank, comm_, nullptr);
    if (r == braidSuccess && root) unflatten(flat, outs);
    return complete(OpType::GATHER, "gather", r, outs, {});
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    at::Tensor& out = single(outputs, "scatter");
    checkRoot(opts.rootRank, "scatter");
    const bool root = getRank() == static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (root) {
      TORCH_CHECK(inputs.size() == 1, "braid backend: scatter takes one input list on the root");
      checkBlocks(inputs[0], out, "scatter", "input");
      flat = flatten(inputs[0], out.options());
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "braid backend: scatter takes inputs on the root only");
    }
    const braidDataType_t type = braidType(out, "scatter");
    Dense dst(out);
    const braidResult_t r =
        braidScatter(root && flat.numel() ? flat.data_ptr() : nullptr, dst.data(), count(out), type,
                     opts.rootRank, comm_, nullptr);
    return complete(OpType::SCATTER, "scatter", r, {out}, {&dst});
  }

  // all_to_all_single: equal blocks (no split sizes) are braidAllToAll; split sizes count rows
  // of dim 0 and make it braidAllToAllv.
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                        std::vector<int64_t>& inputSplits,
                        const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    (void)opts;
    checkTensor(output, "alltoall_base");
    checkTensor(input, "alltoall_base");
    checkSameType(input, output, "alltoall_base");
    const braidDataType_t type = braidType(input, "alltoall_base");
    Dense src(input);
    Dense dst(output);
    braidResult_t r;
    if (outputSplits.empty() && inputSplits.empty()) {
      TORCH_CHECK(input.numel() == output.numel() && input.numel() % getSize() == 0,
                  "braid backend: alltoall_base without split sizes needs input and output of one "
                  "size, a multiple of the world size ",
                  getSize(), " (got ", input.numel(), " and ", output.numel(), ")");
      r = braidAllToAll(src.data(), dst.data(), count(input) / getSize(), type, comm_, nullptr);
    } else {
      std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
      rowBlocks(input, inputSplits, "input", sendCounts, sendDispls);
      rowBlocks(output, outputSplits, "output", recvCounts, recvDispls);
      r = braidAllToAllv(src.data(), sendCounts.data(), sendDispls.data(), dst.data(),
                         recvCounts.data(), recvDispls.data(), type, comm_, nullptr);
    }
    return complete(OpType::ALLTOALL_BASE, "alltoall_base", r, {output}, {&dst});
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    (void)opts;
    TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() &&
                    static_cast<int>(outputs.size()) == getSize(),
                "braid backend: alltoall needs ", getSize(), " input and output tensors (got ",
                inputs.size(), " and ", outputs.size(), ")");
    std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
    for (int j = 0; j < getSize(); ++j) {
      checkTensor(inputs[j], "alltoall");
      checkTensor(outputs[j], "alltoall");
      checkSameType(inputs[j], inputs[0], "alltoall");
      checkSameType(outputs[j], inputs[0], "alltoall");
      sendDispls.push_back(j ? sendDispls.back() + sendCounts.back() : 0);
      sendCounts.push_back(count(inputs[j]));
      recvDispls.push_back(j ? recvDispls.back() + recvCounts.back() : 0);
      recvCounts.push_back(count(outputs[j]));
    }
    const braidDataType_t type = braidType(inputs[0], "alltoall");
    at::Tensor in = flatten(inputs, inputs[0].options());
    at::Tensor out = at::empty({static_cast<int64_t>(recvDispls.back() + recvCounts.back())},
                               inputs[0].options());
    const braidResult_t r =
        braidAllToAllv(in.numel() ? in.data_ptr() : nullptr, sendCounts.data(), sendDispls.data(),
                       out.numel() ? out.data_ptr() : nullptr, recvCounts.data(), recvDispls.data(),
                       type, comm_, nullptr);
    if (r == braidSuccess) unflatten(out, outputs);
    return complete(OpType::ALLTOALL, "alltoall", r, outputs, {});
  }

  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
                              const c10d::AllgatherOptions& = c10d::AllgatherOptions()) override {
    notYet("allgather_coalesced");
  }
  WorkPtr recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK(false,
                "braid backend: recvAnysource is not supported: Braid's receives name "
                "their peer (braidRecv), as NCCL's do");
  }

 private:
  [[noreturn]] void notYet(const char* call) {
    TORCH_CHECK(false, "braid backend: ", call,
                " is not implemented yet (issue 33's first "
                "slice has allreduce, broadcast, reduce, allgather, _allgather_base, "
                "reduce_scatter, _reduce_scatter_base, gather, scatter, alltoall_base, "
                "alltoall, barrier, send and recv)");
  }

  // blocks: one tensor per rank, each of like's dtype and element count.
  void checkBlocks(const std::vector<at::Tensor>& blocks, const at::Tensor& like, const char* call,
                   const char* what) const {
    TORCH_CHECK(static_cast<int>(blocks.size()) == getSize(), "braid backend: ", call, " needs ",
                getSize(), " ", what, " tensors (one per rank), got ", blocks.size());
    for (const auto& b : blocks) {
      checkTensor(b, call);
      checkSameType(b, like, call);
      TORCH_CHECK(b.numel() == like.numel(), "braid backend: ", call, "'s ", what, "s must have ",
                  like.numel(), " elements each (got one of ", b.numel(), ")");
    }
  }

  // The tensors one after the other in one contiguous tensor, and back.
  static at::Tensor flatten(const std::vector<at::Tensor>& ts, const at::TensorOptions& options) {
    int64_t n = 0;
    for (const auto& t : ts) n += t.numel();
    at::Tensor flat = at::empty({n}, options);
    int64_t offset = 0;
    for (const auto& t : ts) {
      flat.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
      offset += t.numel();
    }
    return flat;
  }
  static void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& ts) {
    int64_t offset = 0;
    for (auto& t : ts) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }

  // alltoall_base's blocks in elements: split sizes count rows of dim 0; none means equal
  // blocks of the rows.
  void rowBlocks(const at::Tensor& t, const std::vector<int64_t>& splits, const char* what,
                 std::vector<size_t>& counts, std::vector<size_t>& displs) const {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> s = splits;
    if (s.empty()) {
      TORCH_CHECK(rows % getSize() == 0, "braid backend: alltoall_base's ", what, " has ", rows,
                  " rows, not a multiple of the world size ", getSize());
      s.assign(getSize(), rows / getSize());
    }
    TORCH_CHECK(static_cast<int>(s.size()) == getSize(), "braid backend: alltoall_base's ", what,
                " split sizes need ", getSize(), " entries (got ", s.size(), ")");
    int64_t sum = 0;
    for (int64_t v : s) {
      TORCH_CHECK(v >= 0, "braid backend: alltoall_base's ", what, " split sizes are negative");
      displs.push_back(static_cast<size_t>(sum * rowElems));
      counts.push_back(static_cast<size_t>(v * rowElems));
      sum += v;
    }
    TORCH_CHECK(sum == rows, "braid backend: alltoall_base's ", what, " split sizes add up to ",
                sum, ", not its ", rows, " rows");
  }

  void checkRoot(int64_t root, const char* call) const {
    TORCH_CHECK(root >= 0 && root < getSize(), "braid backend: ", call, "'s root ", root,
                " is not a rank of this group of ", getSize());
  }

  void checkPeer(int peer, const char* call) const {
    TORCH_CHECK(peer >= 0 && peer < getSize(), "braid backend: ", call, "'s peer ", peer,
                " is not a rank of this group of ", getSize());
  }

  // The Work of a call that has run: on success the dense copies are written back first.
  WorkPtr complete(OpType type, const char* call, braidResult_t r, std::vector<at::Tensor> outputs,
                   std::initializer_list<Dense*> written) {
    std::exception_ptr error;
    if (r == braidSuccess) {
      for (Dense* d : written) d->writeBack();
    } else {
      try {
        TORCH_CHECK(false, "braid backend: ", call, " failed on rank ", getRank(), ": ",
                    braidGetErrorString(r), ": ", braidGetLastError(comm_));
      } catch (...) {
        error = std::current_exception();
      }
    }
    return c10::make_intrusive<BraidWork>(getRank(), type, std::move(outputs), error);
  }

  braidComm_t comm_ = nullptr;
};

std::string uniqueId() {
  braidUniqueId id;
  braidResult_t r = braidGetUniqueId(&id);
  TORCH_CHECK(r == braidSuccess,
              "braid backend: braidGetUniqueId failed: ", braidGetLastError(nullptr));
  char text[2 * BRAID_UNIQUE_ID_BYTES + 1];
  r = braidUniqueIdToString(&id, text);
  TORCH_CHECK(r == braidSuccess,
              "braid backend: braidUniqueIdToString failed: ", braidGetLastError(nullptr));
  return text;
}

c10::intrusive_ptr<BackendBase> create(const std::string& id, int rank, int size,
                                       double timeoutSec) {
  return c10::make_intrusive<BraidProcessGroup>(id, rank, size, timeoutSec);
}

}  // namespace
}  // namespace braid_torch

PYBIND11_MODULE(_C, m) {
  m.doc() = "Braid's torch.distributed backend (import braid_torch, not this module)";
  m.def("unique_id", &braid_torch::uniqueId,
        "A new Braid unique id in text form; the calling process serves its bootstrap");
  m.def("create", &braid_torch::create, pybind11::arg("unique_id"), pybind11::arg("rank"),
        pybind11::arg("world_size"), pybind11::arg("timeout_sec"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "The process group of rank in world_size ranks that share unique_id");
}
