// The braid backend's process group (process_group.h): each c10d call checked, put in Braid's
// terms (convert.h) and launched, with what remains once its data has moved (write-backs of
// dense copies, unpacking of packed blocks, bitwise folds) run before its Work completes.
#include "process_group.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "braid/braid.h"
#include "convert.h"
#include "work.h"

namespace braid_torch {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;
// Braid's part of a call: run now, or deferred inside a group (then only checked).
using Start = std::function<braidResult_t()>;
// What a call does once its data has moved.
using After = std::function<void()>;

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
    // Calls are compared across ranks before each collective (BRAID_CHECK), so shapes or dtypes
    // that differ fail every rank naming each rank's call, unless BRAID_CHECK says otherwise.
    config.checkCalls = std::getenv("BRAID_CHECK") ? -1 : 1;
    const braidResult_t r = braidCommInitRankConfig(&comm_, size, id, rank, &config);
    TORCH_CHECK(r == braidSuccess, "braid backend: rank ", rank, " of ", size,
                " could not join the communicator: ", braidGetErrorString(r), ": ",
                braidGetLastError(nullptr));
  }

  ~BraidProcessGroup() override {
    if (comm_ != nullptr) braidCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "braid"; }

  // batch_isend_irecv's block: one Braid group. Blocks nest; the outermost end launches. Its
  // calls' Works complete then; so does the Work of the end (torch >= 2.1 waits on that one).
  void startCoalescing() override {
    braidGroupStart();
    ++coalescing_;
  }

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  WorkPtr endCoalescing() override { return endGroup(); }
#else
  void endCoalescing(std::vector<WorkPtr>& reqs) override {
    (void)reqs;  // the block's Works are pending_'s
    endGroup();
  }
#endif

  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    at::Tensor& t = single(tensors, "allreduce");
    const Reduction red = reduction(opts.reduceOp, t, "allreduce");
    const braidDataType_t type = braidType(t, "allreduce");
    Dense d(t);
    if (red.kind == Reduction::kFold) {
      at::Tensor blocks = at::empty({getSize(), t.numel()}, t.options());
      return launch(
          OpType::ALLREDUCE, "allreduce", {t},
          [=, this] {
            return braidAllGather(d.data(), dataOrNull(blocks), count(t), type, comm_, nullptr);
          },
          [=] { foldInto(blocks, red, t); });
    }
    auto op = braidOp(red, t, "allreduce");
    return launch(
        OpType::ALLREDUCE, "allreduce", {t},
        [=, this] {
          return braidAllReduce(d.data(), d.data(), count(t), type, *op, comm_, nullptr);
        },
        [d, op] { d.writeBack(); });
  }

  // One Braid group of all-reduces, one per tensor: every rank passes the same list.
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    for (auto& t : tensors) {
      checkTensor(t, "allreduce_coalesced");
      reduction(opts.reduceOp, t, "allreduce_coalesced");
      braidType(t, "allreduce_coalesced");
    }
    return grouped(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, [&] {
      for (auto& t : tensors) {
        std::vector<at::Tensor> one{t};
        allreduce(one, opts);
      }
    });
  }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    at::Tensor& t = single(tensors, "broadcast");
    checkRank(opts.rootRank, "broadcast", "root");
    const braidDataType_t type = braidType(t, "broadcast");
    const int root = static_cast<int>(opts.rootRank);
    Dense d(t);
    return launch(
        OpType::BROADCAST, "broadcast", {t},
        [=, this] {
          return braidBroadcast(d.data(), d.data(), count(t), type, root, comm_, nullptr);
        },
        [d] { d.writeBack(); });
  }

  // Only the root's tensor is written (as Gloo's and NCCL's: the others keep their input).
  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    at::Tensor& t = single(tensors, "reduce");
    checkRank(opts.rootRank, "reduce", "root");
    const Reduction red = reduction(opts.reduceOp, t, "reduce");
    const braidDataType_t type = braidType(t, "reduce");
    const int root = static_cast<int>(opts.rootRank);
    const bool isRoot = getRank() == root;
    Dense d(t);
    if (red.kind == Reduction::kFold) {
      at::Tensor blocks = at::empty({isRoot ? getSize() : 0, t.numel()}, t.options());
      return launch(
          OpType::REDUCE, "reduce", {t},
          [=, this] {
            return braidGather(d.data(), dataOrNull(blocks), count(t), type, root, comm_, nullptr);
          },
          [=] {
            if (isRoot) foldInto(blocks, red, t);
          });
    }
    auto op = braidOp(red, t, "reduce");
    return launch(
        OpType::REDUCE, "reduce", {t},
        [=, this] {
          return braidReduce(d.data(), isRoot ? d.data() : nullptr, count(t), type, *op, root,
                             comm_, nullptr);
        },
        [d, op] { d.writeBack(); });
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    (void)opts;
    at::Tensor& in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "braid backend: allgather takes one output list per process");
    const std::vector<at::Tensor>& outs = outputs[0];
    checkBlocks(outs, in, "allgather", "output");
    return gatherInto(OpType::ALLGATHER, "allgather", in, outs);
  }

  // allgather_coalesced: outputs[i][j] gets rank i's inputs[j]; one Braid group of all-gathers.
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    (void)opts;
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(),
                "braid backend: ", "allgather_coalesced needs ", getSize(),
                " output lists (one per rank), got ", outputs.size());
    std::vector<std::vector<at::Tensor>> perInput(inputs.size());
    for (size_t j = 0; j < inputs.size(); ++j) {
      checkTensor(inputs[j], "allgather_coalesced");
      braidType(inputs[j], "allgather_coalesced");
      for (auto& list : outputs) {
        TORCH_CHECK(list.size() == inputs.size(), "braid backend: allgather_coalesced's output ",
                    "lists need ", inputs.size(), " tensors (one per input), got ", list.size());
        perInput[j].push_back(list[j]);
      }
      checkBlocks(perInput[j], inputs[j], "allgather_coalesced", "output");
    }
    std::vector<at::Tensor> all;
    for (const auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
    return grouped(OpType::ALLGATHER_COALESCED, "allgather_coalesced", all, [&] {
      for (size_t j = 0; j < inputs.size(); ++j) {
        gatherInto(OpType::ALLGATHER, "allgather_coalesced", inputs[j], perInput[j]);
      }
    });
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
    return launch(
        OpType::_ALLGATHER_BASE, "_allgather_base", {output},
        [=, this] {
          return braidAllGather(src.data(), dst.data(), count(input), type, comm_, nullptr);
        },
        [src, dst] { dst.writeBack(); });
  }

  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1,
                "braid backend: reduce_scatter takes one input list per process");
    checkBlocks(inputs[0], out, "reduce_scatter", "input");
    at::Tensor flat = flatten(inputs[0], out.options());
    return scatterReduce(OpType::REDUCE_SCATTER, "reduce_scatter", flat, out, opts);
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
    return scatterReduce(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", input.contiguous(),
                         output, opts);
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override {
    (void)opts;
    return launch(
        OpType::BARRIER, "barrier", {}, [=, this] { return braidBarrier(comm_, nullptr); }, [] {});
  }

  // Point to point: Braid matches the messages between two ranks in posting order, so the tag
  // is not used. Outside a coalescing block each call blocks until its message has moved.
  WorkPtr send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override {
    (void)tag;
    at::Tensor& t = single(tensors, "send");
    checkRank(dstRank, "send", "peer");
    const braidDataType_t type = braidType(t, "send");
    Dense d(t);
    return launch(
        OpType::SEND, "send", {t},
        [=, this] { return braidSend(d.data(), count(t), type, dstRank, comm_, nullptr); }, [d] {});
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override {
    (void)tag;
    at::Tensor& t = single(tensors, "recv");
    checkRank(srcRank, "recv", "peer");
    const braidDataType_t type = braidType(t, "recv");
    Dense d(t);
    return launch(
        OpType::RECV, "recv", {t},
        [=, this] { return braidRecv(d.data(), count(t), type, srcRank, comm_, nullptr); },
        [d] { d.writeBack(); });
  }

  WorkPtr recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK(false,
                "braid backend: recv without a source (recvAnysource) is not supported: Braid's "
                "receives name their peer (braidRecv), as NCCL's do; pass src=");
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    at::Tensor& in = single(inputs, "gather");
    checkRank(opts.rootRank, "gather", "root");
    const int root = static_cast<int>(opts.rootRank);
    const bool isRoot = getRank() == root;
    std::vector<at::Tensor> outs;
    if (isRoot) {
      TORCH_CHECK(outputs.size() == 1, "braid backend: gather takes one output list on the root");
      outs = outputs[0];
      checkBlocks(outs, in, "gather", "output");
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "braid backend: gather takes outputs on the root only");
    }
    const braidDataType_t type = braidType(in, "gather");
    Dense src(in);
    at::Tensor flat = at::empty({isRoot ? getSize() * in.numel() : 0}, in.options());
    return launch(
        OpType::GATHER, "gather", outs,
        [=, this] {
          return braidGather(src.data(), dataOrNull(flat), count(in), type, root, comm_, nullptr);
        },
        [=] {
          if (isRoot) unflatten(flat, outs);
        });
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    at::Tensor& out = single(outputs, "scatter");
    checkRank(opts.rootRank, "scatter", "root");
    const int root = static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (getRank() == root) {
      TORCH_CHECK(inputs.size() == 1, "braid backend: scatter takes one input list on the root");
      checkBlocks(inputs[0], out, "scatter", "input");
      flat = flatten(inputs[0], out.options());
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "braid backend: scatter takes inputs on the root only");
    }
    const braidDataType_t type = braidType(out, "scatter");
    Dense dst(out);
    return launch(
        OpType::SCATTER, "scatter", {out},
        [=, this] {
          return braidScatter(flat.defined() ? dataOrNull(flat) : nullptr, dst.data(), count(out),
                              type, root, comm_, nullptr);
        },
        [dst] { dst.writeBack(); });
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
    if (outputSplits.empty() && inputSplits.empty()) {
      TORCH_CHECK(input.numel() == output.numel() && input.numel() % getSize() == 0,
                  "braid backend: alltoall_base without split sizes needs input and output of one "
                  "size, a multiple of the world size ",
                  getSize(), " (got ", input.numel(), " and ", output.numel(), ")");
      const size_t block = count(input) / getSize();
      return launch(
          OpType::ALLTOALL_BASE, "alltoall_base", {output},
          [=, this] { return braidAllToAll(src.data(), dst.data(), block, type, comm_, nullptr); },
          [src, dst] { dst.writeBack(); });
    }
    auto blocks = std::make_shared<std::vector<size_t>>();  // send counts, displs, recv ...
    rowBlocks(input, inputSplits, "input", *blocks);
    rowBlocks(output, outputSplits, "output", *blocks);
    const size_t n = getSize();
    return launch(
        OpType::ALLTOALL_BASE, "alltoall_base", {output},
        [=, this] {
          const size_t* b = blocks->data();
          return braidAllToAllv(src.data(), b, b + n, dst.data(), b + 2 * n, b + 3 * n, type, comm_,
                                nullptr);
        },
        [src, dst, blocks] { dst.writeBack(); });
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    (void)opts;
    TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() &&
                    static_cast<int>(outputs.size()) == getSize(),
                "braid backend: alltoall needs ", getSize(), " input and output tensors (got ",
                inputs.size(), " and ", outputs.size(), ")");
    auto blocks = std::make_shared<std::vector<size_t>>(4 * getSize());
    const size_t n = getSize();
    size_t* b = blocks->data();
    for (size_t j = 0; j < n; ++j) {
      checkTensor(inputs[j], "alltoall");
      checkTensor(outputs[j], "alltoall");
      checkSameType(inputs[j], inputs[0], "alltoall");
      checkSameType(outputs[j], inputs[0], "alltoall");
      b[j] = count(inputs[j]);
      b[n + j] = j ? b[n + j - 1] + b[j - 1] : 0;
      b[2 * n + j] = count(outputs[j]);
      b[3 * n + j] = j ? b[3 * n + j - 1] + b[2 * n + j - 1] : 0;
    }
    const braidDataType_t type = braidType(inputs[0], "alltoall");
    at::Tensor in = flatten(inputs, inputs[0].options());
    at::Tensor out =
        at::empty({static_cast<int64_t>(b[4 * n - 1] + b[3 * n - 1])}, inputs[0].options());
    const std::vector<at::Tensor> outs = outputs;
    return launch(
        OpType::ALLTOALL, "alltoall", outs,
        [=, this] {
          const size_t* c = blocks->data();
          return braidAllToAllv(dataOrNull(in), c, c + n, dataOrNull(out), c + 2 * n, c + 3 * n,
                                type, comm_, nullptr);
        },
        [=] { unflatten(out, outs); });
  }

 private:
  // A call launched in a group: start and after hold its buffers until the group has run.
  struct Pending {
    c10::intrusive_ptr<BraidWork> work;
    const char* call;
    Start start;
    After after;
  };

  // A call's Work: start() now, after() once the data has moved, or both deferred to the end
  // of the coalescing block the call is in.
  WorkPtr launch(OpType type, const char* call, std::vector<at::Tensor> outputs, Start start,
                 After after) {
    Pending p{c10::make_intrusive<BraidWork>(getRank(), type, std::move(outputs)), call,
              std::move(start), std::move(after)};
    const braidResult_t r = p.start();
    if (coalescing_ > 0 && r == braidSuccess) {
      pending_.push_back(p);
    } else {
      finish(p, r);
    }
    return p.work;
  }

  // A call made of several Braid calls in one group (body makes them through launch); its Work
  // completes with the group.
  WorkPtr grouped(OpType type, const char* call, std::vector<at::Tensor> outputs,
                  const std::function<void()>& body) {
    startCoalescing();
    std::exception_ptr thrown;
    try {
      body();
    } catch (...) {
      thrown = std::current_exception();
    }
    auto work = c10::make_intrusive<BraidWork>(getRank(), type, std::move(outputs));
    pending_.push_back(Pending{work, call, Start(), After()});
    endGroup();
    if (thrown) std::rethrow_exception(thrown);
    return work;
  }

  // The end of a coalescing block: the outermost one runs the group and completes its calls.
  // Its own Work is complete when the group is.
  WorkPtr endGroup() {
    TORCH_CHECK(coalescing_ > 0, "braid backend: endCoalescing without startCoalescing");
    const braidResult_t r = braidGroupEnd();
    Pending end{
        c10::make_intrusive<BraidWork>(getRank(), OpType::UNKNOWN, std::vector<at::Tensor>()),
        "a coalesced block", Start(), After()};
    if (--coalescing_ > 0) {
      pending_.push_back(end);
      return end.work;
    }
    std::vector<Pending> done;
    done.swap(pending_);
    done.push_back(end);
    for (auto& p : done) finish(p, r);
    return end.work;
  }

  void finish(Pending& p, braidResult_t r) {
    std::exception_ptr error;
    try {
      TORCH_CHECK(r == braidSuccess, "braid backend: ", p.call, " failed on rank ", getRank(),
                  " of ", getSize(), ": ", braidGetErrorString(r), ": ", braidGetLastError(comm_));
      if (p.after) p.after();
    } catch (...) {
      error = std::current_exception();
    }
    p.work->complete(error);
  }

  // in all-gathered into outs (one tensor per rank) through one packed buffer.
  WorkPtr gatherInto(OpType type, const char* call, const at::Tensor& in,
                     const std::vector<at::Tensor>& outs) {
    const braidDataType_t dt = braidType(in, call);
    Dense src(in);
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    return launch(
        type, call, outs,
        [=, this] {
          return braidAllGather(src.data(), dataOrNull(flat), count(in), dt, comm_, nullptr);
        },
        [=] { unflatten(flat, outs); });
  }

  // Reduce-scatter of flat (contiguous, world size blocks of out's size) into out.
  WorkPtr scatterReduce(OpType type, const char* call, const at::Tensor& flat,
                        const at::Tensor& out, const c10d::ReduceScatterOptions& opts) {
    const Reduction red = reduction(opts.reduceOp, out, call);
    const braidDataType_t dt = braidType(out, call);
    Dense dst(out);
    if (red.kind == Reduction::kFold) {
      // Each rank's block for this rank, then the fold.
      at::Tensor blocks = at::empty({getSize(), out.numel()}, out.options());
      return launch(
          type, call, {out},
          [=, this] {
            return braidAllToAll(dataOrNull(flat), dataOrNull(blocks), count(out), dt, comm_,
                                 nullptr);
          },
          [=] { foldInto(blocks, red, out); });
    }
    auto op = braidOp(red, out, call);
    return launch(
        type, call, {out},
        [=, this] {
          return braidReduceScatter(dataOrNull(flat), dst.data(), count(out), dt, *op, comm_,
                                    nullptr);
        },
        [dst, op] { dst.writeBack(); });
  }

  static void foldInto(const at::Tensor& blocks, const Reduction& red, const at::Tensor& out) {
    at::Tensor(out).copy_(fold(blocks, red.torchOp).view(out.sizes()));
  }

  // Braid's op for a kBraid or kPreMulSum reduction, held by the call until it is done: a
  // PREMUL_SUM op is made for the call (its factor in the tensor's dtype) and destroyed with
  // the last holder.
  std::shared_ptr<braidRedOp_t> braidOp(const Reduction& red, const at::Tensor& t,
                                        const char* call) {
    if (red.kind != Reduction::kPreMulSum) return std::make_shared<braidRedOp_t>(red.op);
    at::Tensor scalar = at::scalar_tensor(red.factor, t.options());
    braidRedOp_t op;
    const braidResult_t r = braidRedOpCreatePreMulSum(&op, scalar.data_ptr(), braidType(t, call),
                                                      braidScalarHostImmediate, comm_);
    TORCH_CHECK(r == braidSuccess, "braid backend: ", call,
                "'s PREMUL_SUM: ", braidGetErrorString(r), ": ", braidGetLastError(comm_));
    braidComm_t comm = comm_;
    return std::shared_ptr<braidRedOp_t>(new braidRedOp_t(op), [comm](braidRedOp_t* p) {
      braidRedOpDestroy(*p, comm);
      delete p;
    });
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

  // alltoall_base's blocks in elements, appended to out as counts then displacements: split
  // sizes count rows of dim 0; none means equal blocks of the rows.
  void rowBlocks(const at::Tensor& t, const std::vector<int64_t>& splits, const char* what,
                 std::vector<size_t>& out) const {
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
    std::vector<size_t> displs;
    int64_t sum = 0;
    for (int64_t v : s) {
      TORCH_CHECK(v >= 0, "braid backend: alltoall_base's ", what, " split sizes are negative");
      displs.push_back(static_cast<size_t>(sum * rowElems));
      out.push_back(static_cast<size_t>(v * rowElems));
      sum += v;
    }
    TORCH_CHECK(sum == rows, "braid backend: alltoall_base's ", what, " split sizes add up to ",
                sum, ", not its ", rows, " rows");
    out.insert(out.end(), displs.begin(), displs.end());
  }

  // rank (a root or a peer) names a rank of this group.
  void checkRank(int64_t rank, const char* call, const char* what) const {
    TORCH_CHECK(rank >= 0 && rank < getSize(), "braid backend: ", call, "'s ", what, " ", rank,
                " is not a rank of this group of ", getSize());
  }

  braidComm_t comm_ = nullptr;
  int coalescing_ = 0;            // depth of startCoalescing blocks
  std::vector<Pending> pending_;  // their calls, completed by the outermost end
};

}  // namespace

std::string newUniqueId() {
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

c10::intrusive_ptr<BackendBase> createProcessGroup(const std::string& uniqueId, int rank, int size,
                                                   double timeoutSec) {
  return c10::make_intrusive<BraidProcessGroup>(uniqueId, rank, size, timeoutSec);
}

}  // namespace braid_torch
