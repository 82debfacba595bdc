// Where a call's bytes are touched: the executor's two memory strategies. HostMemory copies and
// reduces on this core (the kernels); DeviceMemory on the communicator's CUDA device (device::
// Runtime's copies and kernels on its own stream, each waited for before its step counts as
// done). The executor's run is written once over a strategy and instantiated for each
// (executor.cc: Run<HostMemory>, Run<DeviceMemory>); a call takes one at its start from
// ExecContext::device, which only a communicator made with a device (braidComm::deviceDirect)
// sets, for device buffers. The strategy's constants and calls are resolved by the compiler,
// so the host path carries no test of the device and no indirect call per piece.
#pragma once

#include <cstring>
#include <vector>

#include "base/error.h"
#include "core/executor.h"
#include "device/device.h"
#include "kernels/reduce.h"

namespace braid {

struct HostMemory {
  static constexpr bool kDevice = false;
  // SendPiece::copy of a copied send: none, memcpy from host memory.
  static constexpr braidResult_t (*kStage)(void*, const void*, size_t) = nullptr;
  // Before the run: the scratch the plan's steps use.
  static braidResult_t begin(const ExecContext&, Plan& plan, char** scratch) {
    *scratch = plan.scratch.data();
    return braidSuccess;
  }
  // dst = src, for a local step (the regions may overlap).
  static braidResult_t copy(char* dst, const char* src, size_t bytes) {
    std::memmove(dst, src, bytes);
    return braidSuccess;
  }
  // dst = src / divisor, count elements (AVG's last step).
  static braidResult_t divide(const ExecContext& ctx, char* dst, const char* src, size_t count,
                              int divisor) {
    kernels::divide(ctx.dtype, dst, src, count, divisor);
    return braidSuccess;
  }
  // dst = op(src, data), n elements, every operand in this memory.
  static braidResult_t reduce(const ExecContext& ctx, char* dst, const char* src, const char* data,
                              size_t n, int divisor) {
    kernels::reduce(ctx.dtype, ctx.op, dst, src, data, n, divisor);
    return braidSuccess;
  }
  // The block of this memory through which a piece from the other memory is reduced.
  static braidResult_t foreignBlock(const ExecContext&, Plan& plan, size_t bytes, char** block) {
    if (plan.pullBlock.size() < bytes) plan.pullBlock.resize(bytes);
    *block = plan.pullBlock.data();
    return braidSuccess;
  }
  // The host block into which a piece in another process's memory is read (pulled).
  static std::vector<char>& pullBlock(Plan& plan) { return plan.pullBlock; }
};

struct DeviceMemory {
  static constexpr bool kDevice = true;
  // A copied send stages device memory into the connection's host memory.
  static braidResult_t stage(void* dst, const void* src, size_t bytes) {
    return device::runtime().copyOnOwnStream(dst, src, bytes);
  }
  static constexpr braidResult_t (*kStage)(void*, const void*, size_t) = stage;
  // A call made on the caller's thread first waits for the device's queued work, so it reads
  // what the caller's kernels wrote (a proxy's stream has already run up to it); the scratch
  // is the communicator's device scratch.
  static braidResult_t begin(const ExecContext& ctx, Plan& plan, char** scratch) {
    if (device::proxyDevice() == device::kNotProxy)
      BRAID_TRY(device::runtime().deviceSynchronize());
    *scratch = plan.scratch.data();
    if (!plan.scratch.empty()) {
      BRAID_TRY(ctx.deviceScratch->reserve(plan.scratch.size()));
      *scratch = ctx.deviceScratch->data();
    }
    return braidSuccess;
  }
  static braidResult_t copy(char* dst, const char* src, size_t bytes) {
    return bytes ? device::runtime().copyOnOwnStream(dst, src, bytes) : braidSuccess;
  }
  static braidResult_t divide(const ExecContext& ctx, char* dst, const char* src, size_t count,
                              int divisor) {
    return device::runtime().deviceDivide(dst, src, count, ctx.dtype, divisor);
  }
  static braidResult_t reduce(const ExecContext& ctx, char* dst, const char* src, const char* data,
                              size_t n, int divisor) {
    return device::runtime().deviceReduce(dst, src, data, n, ctx.dtype, ctx.op, divisor);
  }
  static braidResult_t foreignBlock(const ExecContext& ctx, Plan&, size_t bytes, char** block) {
    BRAID_TRY(ctx.deviceBlock->reserve(bytes));
    *block = ctx.deviceBlock->data();
    return braidSuccess;
  }
  // Not the plan's pullBlock: combine() may use the device block after this one.
  static std::vector<char>& pullBlock(Plan& plan) { return plan.hostBlock; }
};

}  // namespace braid
