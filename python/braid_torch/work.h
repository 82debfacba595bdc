// The Work a braid backend call returns (process_group.h). A call made outside a coalescing
// block has run when its Work is made, so the Work is complete at once; one made inside
// (batch_isend_irecv's block, Braid's group) completes when the block ends. Complete means: the
// outputs written, or the error set, and the future (getFuture) holding the outputs or the
// error, as DDP's communication hooks read it.
#pragma once

#include <exception>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

namespace braid_torch {

class BraidWork : public c10d::Work {
 public:
  BraidWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  // Marks the call done: error null for success. Once only.
  void complete(std::exception_ptr error) {
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

}  // namespace braid_torch
