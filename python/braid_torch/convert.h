// What the braid backend (process_group.h) does to torch's arguments before Braid sees them:
// dtype and ReduceOp in Braid's terms, the checks every call makes, and dense copies of
// non-contiguous tensors. Over the public header alone.
#pragma once

#include <cstddef>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "braid/braid.h"

namespace braid_torch {

// c10d's name of a ReduceOp ("SUM", "BXOR", ...), for messages.
const char* opName(c10d::ReduceOp::RedOpType op);

// torch's dtype as Braid's: float16, bfloat16, float32, float64, int8, uint8, int32, int64, and
// bool as uint8 (0 or 1). Any other dtype raises, naming call.
braidDataType_t braidType(const at::Tensor& t, const char* call);

// How a torch ReduceOp runs on a tensor of t's dtype.
//  - kBraid: one of Braid's ops (SUM, PRODUCT, MIN, MAX, AVG). On bool, SUM and BOR are a
//    logical or (MAX of 0/1, as Gloo's bool sum) and PRODUCT and BAND a logical and (MIN).
//  - kFold: BAND, BOR or BXOR on an integer dtype (or BXOR on bool), which Braid has no op
//    for (NCCL neither): the call all-gathers the inputs and folds them with torch's bitwise
//    op, in rank order. Exact; it moves world-size times the bytes of a reduction.
//  - kPreMulSum: PREMUL_SUM (torch.distributed._make_nccl_premul_sum) on a floating dtype, with
//    its factor; the call makes it with braidRedOpCreatePreMulSum.
// Anything else (AVG on integers but Braid's, BXOR on floats, ...) raises, naming call.
struct Reduction {
  enum Kind { kBraid, kFold, kPreMulSum } kind = kBraid;
  braidRedOp_t op = braidSum;                               // kBraid
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;  // kFold
  double factor = 1.0;                                      // kPreMulSum
};
Reduction reduction(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const char* call);

// kFold's reduction: blocks is [ranks, n]; the result (n elements) is block 0 op block 1 ...
at::Tensor fold(const at::Tensor& blocks, c10d::ReduceOp::RedOpType op);

// A defined, dense (strided) CPU tensor, else raises naming call.
void checkTensor(const at::Tensor& t, const char* call);
// The one tensor of a per-process list (c10d's lists hold one tensor per device; a CPU process
// group has one), checked as checkTensor.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call);
// a and b of one dtype, else raises naming call.
void checkSameType(const at::Tensor& a, const at::Tensor& b, const char* call);

inline size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }
// A tensor's first element, or NULL for an empty one (Braid takes NULL with count 0).
inline void* dataOrNull(const at::Tensor& t) { return t.numel() == 0 ? nullptr : t.data_ptr(); }

// A tensor as Braid reads or writes it: itself when contiguous, else a contiguous copy, which
// writeBack() copies into the caller's tensor once the call's data has moved. Copyable: a copy
// shares both tensors.
class Dense {
 public:
  explicit Dense(const at::Tensor& t) : user_(t), buf_(t.contiguous()) {}
  void* data() const { return dataOrNull(buf_); }
  const at::Tensor& buffer() const { return buf_; }
  void writeBack() const {
    if (!buf_.is_same(user_)) user_.copy_(buf_);
  }

 private:
  at::Tensor user_;
  at::Tensor buf_;
};

// The tensors one after another in one contiguous 1-D tensor of options, and back.
at::Tensor flatten(const std::vector<at::Tensor>& ts, const at::TensorOptions& options);
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts);

}  // namespace braid_torch
