// torch's arguments in Braid's terms (convert.h).
#include "convert.h"

#include <ATen/ATen.h>

namespace braid_torch {

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

namespace {

Reduction braidReduction(braidRedOp_t op) {
  Reduction r;
  r.op = op;
  return r;
}

Reduction foldReduction(c10d::ReduceOp::RedOpType op) {
  Reduction r;
  r.kind = Reduction::kFold;
  r.torchOp = op;
  return r;
}

// The factor of a PREMUL_SUM op: a double, or a one-element tensor (read now: CPU tensors).
double preMulFactor(const c10d::ReduceOp& reduceOp, const char* call) {
  const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
  TORCH_CHECK(s != nullptr, "braid backend: ", call,
              "'s ReduceOp.PREMUL_SUM carries no factor (make it with "
              "torch.distributed._make_nccl_premul_sum)");
  if (s->tensor_factors.empty()) return s->double_factor;
  TORCH_CHECK(s->tensor_factors.size() == 1 && s->tensor_factors[0].numel() == 1,
              "braid backend: ", call, "'s PREMUL_SUM factor must be one one-element tensor");
  return s->tensor_factors[0].item<double>();
}

}  // namespace

Reduction reduction(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const char* call) {
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(reduceOp);
  const bool isBool = t.scalar_type() == at::kBool;
  const bool isFloat = at::isFloatingType(t.scalar_type());
  switch (op) {
    case c10d::ReduceOp::SUM:
      return braidReduction(isBool ? braidMax : braidSum);
    case c10d::ReduceOp::PRODUCT:
      return braidReduction(isBool ? braidMin : braidProd);
    case c10d::ReduceOp::MIN:
      return braidReduction(braidMin);
    case c10d::ReduceOp::MAX:
      return braidReduction(braidMax);
    case c10d::ReduceOp::AVG:
      if (!isBool) return braidReduction(braidAvg);
      break;
    case c10d::ReduceOp::BAND:
      if (isBool) return braidReduction(braidMin);
      if (!isFloat) return foldReduction(op);
      break;
    case c10d::ReduceOp::BOR:
      if (isBool) return braidReduction(braidMax);
      if (!isFloat) return foldReduction(op);
      break;
    case c10d::ReduceOp::BXOR:
      if (!isFloat) return foldReduction(op);
      break;
    case c10d::ReduceOp::PREMUL_SUM:
      if (isFloat) {
        Reduction r;
        r.kind = Reduction::kPreMulSum;
        r.factor = preMulFactor(reduceOp, call);
        return r;
      }
      break;
    default:
      break;
  }
  TORCH_CHECK(false, "braid backend: ", call, " does not support ReduceOp.", opName(op), " on ",
              t.scalar_type(),
              " (SUM, PRODUCT, MIN and MAX run on every dtype; AVG on all but bool; BAND, BOR "
              "and BXOR on integers and bool; PREMUL_SUM on floating dtypes)");
}

at::Tensor fold(const at::Tensor& blocks, c10d::ReduceOp::RedOpType op) {
  at::Tensor acc = blocks[0].clone();
  for (int64_t i = 1; i < blocks.size(0); ++i) {
    switch (op) {
      case c10d::ReduceOp::BAND:
        acc.bitwise_and_(blocks[i]);
        break;
      case c10d::ReduceOp::BOR:
        acc.bitwise_or_(blocks[i]);
        break;
      default:
        acc.bitwise_xor_(blocks[i]);
        break;
    }
  }
  return acc;
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

at::Tensor flatten(const std::vector<at::Tensor>& ts, const at::TensorOptions& options) {
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

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t offset = 0;
  for (const auto& t : ts) {
    at::Tensor(t).copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace braid_torch
