// The collective entry points (braidAllReduce ... braidBarrier), point-to-point (braidSend,
// braidRecv) and PreMulSum ops (braidRedOpCreatePreMulSum, braidRedOpDestroy). Each call's
// arguments are checked in one place (checkCall: refused before anything moves, naming the
// argument); device buffers are staged through host memory unless the call goes device to
// device; then the call runs now, goes to a stream, or is deferred to the open group
// (groups.cc). calls.cc runs it: the algorithm, the plan, the executor.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/call_check.h"
#include "core/comm.h"
#include "core/device_staging.h"
#include "core/entry_points.h"
#include "core/stream.h"
#include "device/device.h"
#include "kernels/reduce.h"

using braid::checkComm;
using braid::Collective;
using braid::deviceDirect;
using braid::fail;
using braid::Pending;
using braid::record;
using braid::runP2PStaged;
using braid::Staged;
using braid::stageIn;
using braid::stageOut;
using braid::t_groupDepth;
using braid::t_groupError;
using braid::t_groupErrorMessage;
using braid::t_groupErrorRank;
using braid::t_pending;

namespace {

// record() for a call of `kind` (stallKindLabel) this rank refuses before it starts, its
// arguments being wrong: the ranks of its host left waiting in it name the refusal
// (publishRefusal). comm has passed checkComm.
braidResult_t refuse(braidComm* comm, braidResult_t res, uint32_t kind,
                     braidStream_t stream = nullptr) {
  if (res == braidSuccess) return res;
  braid::publishRefusal(comm, kind, stream);
  if (braid::insideGroup() && t_groupError == braidSuccess) {
    t_groupError = res;
    t_groupErrorRank = comm->rank;
    t_groupErrorMessage = braid::withoutRankPrefix(braid::lastError(), comm->rank);
  }
  return record(comm, res);
}

// checkComm for a call: inside a group a refused communicator refuses the group too (its
// braidGroupEnd runs nothing and returns this error), as NCCL's group does.
braidResult_t checkCallComm(const braidComm* comm, const char* fn) {
  const braidResult_t res = checkComm(comm, fn);
  if (res != braidSuccess && braid::insideGroup() && t_groupError == braidSuccess) {
    t_groupError = res;
    t_groupErrorRank = -1;
    t_groupErrorMessage = braid::lastError();
  }
  return res;
}

constexpr uint32_t kAllToAllvKind = static_cast<uint32_t>(Collective::kAllToAllv) + 1;

// What one call asks for, checked in one place.
struct Call {
  const char* fn;
  braidComm* comm;
  Collective coll;
  braidDataType_t dtype;
  size_t count;
  size_t sendElems;  // elements the send buffer must hold on this rank (0: unused)
  size_t recvElems;  // elements the receive buffer must hold on this rank (0: unused)
  bool usesOp = false;
  braidRedOp_t op = braidSum;
  bool usesRoot = false;
  int root = 0;
};

braidResult_t checkCall(const Call& c, const void* sendbuff, const void* recvbuff) {
  if (const int dtype = braid::rawValue(c.dtype); dtype < 0 || dtype >= braidNumTypes)
    return fail(braidInvalidArgument, "%s: datatype %d is not a braidDataType_t (0..%d)", c.fn,
                dtype, braidNumTypes - 1);
  if (c.usesOp) {
    int op = braid::rawValue(c.op);
    bool builtin = op >= 0 && op < braidNumOps;
    size_t k = static_cast<size_t>(op) - braidNumOps;
    bool premul = op >= braidNumOps && k < c.comm->preMulSums.size() && c.comm->preMulSums[k].live;
    if (!builtin && !premul)
      return fail(braidInvalidArgument,
                  "%s: op %d is not a braidRedOp_t (0..%d) nor a live PreMulSum op of this comm",
                  c.fn, op, braidNumOps - 1);
    if (premul && c.comm->preMulSums[k].dtype != c.dtype)
      return fail(braidInvalidArgument,
                  "%s: PreMulSum op %d was created for datatype %s, the call uses %s", c.fn, op,
                  braidTypeName(c.comm->preMulSums[k].dtype), braidTypeName(c.dtype));
  }
  if (c.usesRoot && (c.root < 0 || c.root >= c.comm->nranks))
    return fail(braidInvalidArgument, "%s: root %d is out of range [0, nranks=%d)", c.fn, c.root,
                c.comm->nranks);
  const size_t size = braidTypeSize(c.dtype);
  const size_t n = static_cast<size_t>(c.comm->nranks);
  if (c.count > SIZE_MAX / size / n / 2)
    return fail(braidInvalidArgument,
                "%s: count %zu of %zu-byte elements times nranks %zu overflows the address space",
                c.fn, c.count, size, n);
  if (c.sendElems > 0 && !sendbuff)
    return fail(braidInvalidArgument, "%s: sendbuff is NULL with %zu elements to send", c.fn,
                c.sendElems);
  if (c.recvElems > 0 && !recvbuff)
    return fail(braidInvalidArgument, "%s: recvbuff is NULL with %zu elements to receive", c.fn,
                c.recvElems);
  // Buffers may share memory only as schedule.h allows (the in-place forms, gather's and
  // scatter's own slot); any other overlap would read elements the call has already
  // overwritten (silently wrong results). All-to-all-v's extents reach its largest
  // displacement plus count, as MPI_Alltoallv's buffers may not alias at all.
  if (c.sendElems > 0 && c.recvElems > 0) {
    const auto s = reinterpret_cast<uintptr_t>(sendbuff);
    const auto r = reinterpret_cast<uintptr_t>(recvbuff);
    const size_t sendBytes = c.sendElems * size, recvBytes = c.recvElems * size;
    if (s < r + recvBytes && r < s + sendBytes &&
        !sharesMemoryAllowed(c.coll, c.comm->rank, c.count, size, sendbuff, recvbuff)) {
      std::string form = c.coll == Collective::kGather
                             ? "shares memory only with sendbuff == recvbuff + rank * count"
                         : c.coll == Collective::kScatter
                             ? "shares memory only with recvbuff == sendbuff + rank * count"
                             : "has no in-place form";
      if (hasInPlace(c.coll))
        form = c.coll == Collective::kReduceScatter
                   ? "is in place only with recvbuff == sendbuff + rank * recvcount"
               : c.coll == Collective::kAllGather
                   ? "is in place only with sendbuff == recvbuff + rank * sendcount"
                   : "is in place only with sendbuff == recvbuff";
      return fail(braidInvalidArgument,
                  "%s: sendbuff %p (%zu bytes in use) and recvbuff %p (%zu bytes in use) overlap "
                  "on rank %d, "
                  "and %s %s",
                  c.fn, sendbuff, sendBytes, recvbuff, recvBytes, c.comm->rank,
                  collectiveLabel(c.coll), form.c_str());
    }
  }
  return braidSuccess;
}

braidResult_t submit(braidComm* comm, braidStream_t stream, std::function<braidResult_t()> work) {
  if (t_groupDepth > 0) {
    t_pending.push_back({comm, stream, false, {}, std::move(work)});
    return braidSuccess;
  }
  if (stream) return braid::enqueueOnStream(comm, stream, std::move(work));
  return record(comm, work());
}

// Work runs now on the calling thread unless a group is open or a stream is given; only
// then is it wrapped in a std::function (an allocation), so a plain call allocates nothing.
template <typename Work>
braidResult_t submit(braidComm* comm, braidStream_t stream, Work&& work) {
  if (t_groupDepth == 0 && !stream) return record(comm, work());
  return submit(comm, stream, std::function<braidResult_t()>(std::forward<Work>(work)));
}

// A PreMulSum op as captured when the call is made: destroying or re-creating the op
// afterwards does not change a call already queued (NCCL's rule).
struct PreMul {
  bool active = false;
  std::vector<char> scalar;         // host-immediate value, copied
  const void* scalarPtr = nullptr;  // "device" residence: read when the call runs
};

PreMul capturePreMul(braidComm* comm, braidRedOp_t op) {
  PreMul pm;
  if (static_cast<int>(op) < braidNumOps) return pm;
  std::lock_guard<std::mutex> lock(comm->mu);
  const braidComm::PreMulSum& src = comm->preMulSums[static_cast<size_t>(op) - braidNumOps];
  pm.active = true;
  pm.scalar = src.scalar;
  pm.scalarPtr = src.scalarPtr;
  return pm;
}

// sum over ranks of (scalar * x): scale a copy of the input, then sum it.
template <typename Run>
braidResult_t withPreMulSum(const PreMul& pm, braidRedOp_t op, braidDataType_t dtype,
                            const void* sendbuff, size_t elems, const Run& run) {
  if (!pm.active) return run(sendbuff, op);
  const size_t size = braidTypeSize(dtype);
  const void* scalar = pm.scalarPtr ? pm.scalarPtr : pm.scalar.data();
  char deviceScalar[16];  // braidScalarDevice with device memory: read it through a copy
  if (pm.scalarPtr && braid::device::runtime().isDevice(pm.scalarPtr)) {
    BRAID_TRY(braid::device::stageToHost(deviceScalar, pm.scalarPtr, size));
    scalar = deviceScalar;
  }
  constexpr size_t kBlock = 1024;
  std::vector<char> scalars(kBlock * size), scaled(elems * size);
  for (size_t i = 0; i < kBlock; ++i) std::memcpy(&scalars[i * size], scalar, size);
  for (size_t i = 0; i < elems; i += kBlock) {
    size_t m = std::min(kBlock, elems - i);
    braid::kernels::reduce(dtype, braidProd, &scaled[i * size],
                           static_cast<const char*>(sendbuff) + i * size, scalars.data(), m);
  }
  return run(scaled.data(), braidSum);
}

braidResult_t collective(const Call& c, const void* sendbuff, void* recvbuff, braidStream_t stream,
                         size_t preMulElems = 0, const size_t* a2avArrays[4] = nullptr) {
  BRAID_TRY(checkCallComm(c.comm, c.fn));
  braid::LogRankScope rankScope(c.comm->rank);  // a refusal's log line and message name it
  braid::InFlight running(c.comm);
  // Nothing moves: a successful no-op on every rank (after BRAID_CHECK's comparison).
  const bool nothing =
      c.coll != Collective::kBarrier && c.coll != Collective::kAllToAllv && c.count == 0;
  // A refused no-op would have had no number (without BRAID_CHECK): nothing to publish.
  // BRAID_CALL_CHECK=0 restores NCCL's silent no-op (which pairs a peer's call of another
  // count with this rank's next call: a plausible wrong answer).
  const bool meets = c.comm->checkCalls || c.comm->fingerprints;
  if (const braidResult_t res = checkCall(c, sendbuff, recvbuff); res != braidSuccess)
    return nothing && !meets ? record(c.comm, res)
                             : refuse(c.comm, res, static_cast<uint32_t>(c.coll) + 1, stream);
  if (nothing && !meets) return braidSuccess;
  braid::CollArgs args;
  args.coll = c.coll;
  args.count = c.count;
  args.dtype = c.dtype;
  args.op = c.usesOp ? c.op : braidSum;
  args.root = c.root;
  std::vector<size_t> arrays;
  if (a2avArrays) {  // copied: the caller's arrays may change before a deferred call runs
    const size_t n = static_cast<size_t>(c.comm->nranks);
    for (int k = 0; k < 4; ++k) arrays.insert(arrays.end(), a2avArrays[k], a2avArrays[k] + n);
  }
  braidComm* comm = c.comm;
  const PreMul pm = capturePreMul(comm, args.op);
  const size_t elemBytes = braidTypeSize(c.dtype);
  const size_t sendBytes = c.sendElems * elemBytes, recvBytes = c.recvElems * elemBytes;
  const bool deferred = t_groupDepth > 0;
  const braidResult_t res = submit(comm, stream, [=]() {
    braid::CollArgs a = args;
    if (!arrays.empty()) {
      const size_t n = arrays.size() / 4;
      a.sendCounts = arrays.data();
      a.sendDispls = arrays.data() + n;
      a.recvCounts = arrays.data() + 2 * n;
      a.recvDispls = arrays.data() + 3 * n;
    }
    // A count-0 call moves nothing; its fingerprint still meets the peers' calls.
    if (nothing && !comm->checkCalls) return braid::exchangeFingerprint(comm, a);
    // PreMulSum scales a host copy of the input: such calls are staged.
    if (!pm.active && deviceDirect(comm, sendbuff, sendBytes, recvbuff, recvBytes)) {
      if (comm->checkCalls) BRAID_TRY(braid::checkCallsMatch(comm, a));
      return braid::runCollective(comm, a, sendbuff, recvbuff, nullptr, /*device=*/true);
    }
    Staged st;
    BRAID_TRY(stageIn(sendbuff, sendBytes, recvbuff, recvBytes, args.coll == Collective::kAllToAllv,
                      &st));
    BRAID_TRY(withPreMulSum(pm, args.op, args.dtype, st.send, preMulElems,
                            [&](const void* send, braidRedOp_t op) {
                              a.op = op;
                              if (comm->checkCalls) BRAID_TRY(braid::checkCallsMatch(comm, a));
                              if (nothing) return braidSuccess;
                              return braid::runCollective(comm, a, send, st.recv);
                            }));
    return stageOut(st);
  });
  // What braidGroupSimulateEnd predicts the deferred call from.
  if (deferred && res == braidSuccess && !nothing && !t_pending.empty()) {
    braid::CollArgs shape = args;
    shape.rank = comm->rank;
    shape.nranks = comm->nranks;
    if (!arrays.empty()) {  // all-to-all-v: the mean of the blocks this rank sends
      const size_t n = arrays.size() / 4;
      size_t total = 0;
      for (size_t k = 0; k < n; ++k) total += arrays[k];
      shape.count = total / n;
    }
    t_pending.back().call = shape;
  }
  return res;
}

braidResult_t p2p(const char* fn, bool isSend, void* buff, size_t count, braidDataType_t dtype,
                  int peer, braidComm_t comm, braidStream_t stream) {
  BRAID_TRY(checkCallComm(comm, fn));
  braid::LogRankScope rankScope(comm->rank);
  braid::InFlight running(comm);
  Call c{fn, comm, Collective::kAllToAll, dtype, count, isSend ? count : 0, isSend ? 0 : count};
  BRAID_TRY(refuse(comm, checkCall(c, buff, buff), 0, stream));
  if (peer < 0 || peer >= comm->nranks)
    return refuse(comm,
                  fail(braidInvalidArgument, "%s: peer %d is out of range [0, nranks=%d)", fn, peer,
                       comm->nranks),
                  0, stream);
  braid::P2POp op{isSend, peer, buff, count * braidTypeSize(dtype)};
  if (t_groupDepth > 0) {
    t_pending.push_back({comm, stream, true, op, nullptr});
    return braidSuccess;
  }
  if (peer == comm->rank && count > 0)
    return record(comm, fail(braidInvalidUsage,
                             "%s to self outside a group would wait forever; put the send and "
                             "the receive in one braidGroupStart/End",
                             fn));
  std::vector<braid::P2POp> ops{op};
  if (stream)
    return braid::enqueueOnStream(comm, stream, [comm, ops] { return runP2PStaged(comm, ops); });
  return record(comm, runP2PStaged(comm, ops));
}

}  // namespace

extern "C" {

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                             braidStream_t stream) {
  return braid::guardApi("braidAllReduce", [&]() -> braidResult_t {
    Call c{"braidAllReduce", comm, Collective::kAllReduce, datatype, count, count, count, true, op};
    return collective(c, sendbuff, recvbuff, stream, count);
  });
}

braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                                 braidStream_t stream) {
  return braid::guardApi("braidReduceScatter", [&]() -> braidResult_t {
    size_t n = comm && comm->magic == braidComm::kMagic ? comm->nranks : 1;
    Call c{"braidReduceScatter",
           comm,
           Collective::kReduceScatter,
           datatype,
           recvcount,
           n * recvcount,
           recvcount,
           true,
           op};
    return collective(c, sendbuff, recvbuff, stream, n * recvcount);
  });
}

braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             braidDataType_t datatype, braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidAllGather", [&]() -> braidResult_t {
    size_t n = comm && comm->magic == braidComm::kMagic ? comm->nranks : 1;
    Call c{"braidAllGather", comm,      Collective::kAllGather, datatype,
           sendcount,        sendcount, n * sendcount};
    return collective(c, sendbuff, recvbuff, stream);
  });
}

braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm,
                             braidStream_t stream) {
  return braid::guardApi("braidBroadcast", [&]() -> braidResult_t {
    bool isRoot = comm && comm->magic == braidComm::kMagic && comm->rank == root;
    Call c{"braidBroadcast",
           comm,
           Collective::kBroadcast,
           datatype,
           count,
           isRoot ? count : 0,
           count,
           false,
           braidSum,
           true,
           root};
    return collective(c, sendbuff, recvbuff, stream);
  });
}

braidResult_t braidBcast(void* buff, size_t count, braidDataType_t datatype, int root,
                         braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidBcast", [&]() -> braidResult_t {
    return braidBroadcast(buff, buff, count, datatype, root, comm, stream);
  });
}

braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, braidRedOp_t op, int root, braidComm_t comm,
                          braidStream_t stream) {
  return braid::guardApi("braidReduce", [&]() -> braidResult_t {
    bool isRoot = comm && comm->magic == braidComm::kMagic && comm->rank == root;
    Call c{"braidReduce",
           comm,
           Collective::kReduce,
           datatype,
           count,
           count,
           isRoot ? count : 0,
           true,
           op,
           true,
           root};
    return collective(c, sendbuff, recvbuff, stream, count);
  });
}

braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            braidDataType_t datatype, braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidAllToAll", [&]() -> braidResult_t {
    size_t n = comm && comm->magic == braidComm::kMagic ? comm->nranks : 1;
    Call c{"braidAllToAll", comm, Collective::kAllToAll, datatype, count, n * count, n * count};
    return collective(c, sendbuff, recvbuff, stream);
  });
}

braidResult_t braidAllToAllv(const void* sendbuff, const size_t sendcounts[],
                             const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
                             const size_t rdispls[], braidDataType_t datatype, braidComm_t comm,
                             braidStream_t stream) {
  return braid::guardApi("braidAllToAllv", [&]() -> braidResult_t {
    BRAID_TRY(checkCallComm(comm, "braidAllToAllv"));
    braid::LogRankScope rankScope(comm->rank);
    if (!sendcounts || !sdispls || !recvcounts || !rdispls)
      return refuse(comm,
                    fail(braidInvalidArgument, "braidAllToAllv: %s is NULL",
                         !sendcounts   ? "sendcounts"
                         : !sdispls    ? "sdispls"
                         : !recvcounts ? "recvcounts"
                                       : "rdispls"),
                    kAllToAllvKind, stream);
    size_t sendElems = 0, recvElems = 0, maxCount = 0;
    const size_t size = braidTypeSize(datatype);
    for (int j = 0; j < comm->nranks; ++j) {
      for (size_t v : {sendcounts[j], sdispls[j], recvcounts[j], rdispls[j]})
        if (size != 0 && v > SIZE_MAX / size / 4)
          return refuse(
              comm,
              fail(braidInvalidArgument,
                   "braidAllToAllv: count or displacement %zu for peer %d overflows", v, j),
              kAllToAllvKind, stream);
      // Only non-empty blocks need memory: all-zero counts with NULL buffers are fine (MPI).
      if (sendcounts[j] > 0) sendElems = std::max(sendElems, sdispls[j] + sendcounts[j]);
      if (recvcounts[j] > 0) recvElems = std::max(recvElems, rdispls[j] + recvcounts[j]);
      maxCount = std::max({maxCount, sendcounts[j], recvcounts[j]});
    }
    Call c{"braidAllToAllv", comm,     Collective::kAllToAllv, datatype, maxCount,
           sendElems,        recvElems};
    const size_t* arrays[4] = {sendcounts, sdispls, recvcounts, rdispls};
    return collective(c, sendbuff, recvbuff, stream, 0, arrays);
  });
}

braidResult_t braidGather(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, int root, braidComm_t comm,
                          braidStream_t stream) {
  return braid::guardApi("braidGather", [&]() -> braidResult_t {
    bool isRoot = comm && comm->magic == braidComm::kMagic && comm->rank == root;
    size_t n = comm && comm->magic == braidComm::kMagic ? comm->nranks : 1;
    Call c{"braidGather",
           comm,
           Collective::kGather,
           datatype,
           count,
           count,
           isRoot ? n * count : 0,
           false,
           braidSum,
           true,
           root};
    return collective(c, sendbuff, recvbuff, stream);
  });
}

braidResult_t braidScatter(const void* sendbuff, void* recvbuff, size_t count,
                           braidDataType_t datatype, int root, braidComm_t comm,
                           braidStream_t stream) {
  return braid::guardApi("braidScatter", [&]() -> braidResult_t {
    bool isRoot = comm && comm->magic == braidComm::kMagic && comm->rank == root;
    size_t n = comm && comm->magic == braidComm::kMagic ? comm->nranks : 1;
    Call c{"braidScatter", comm,  Collective::kScatter,
           datatype,       count, isRoot ? n * count : 0,
           count,          false, braidSum,
           true,           root};
    return collective(c, sendbuff, recvbuff, stream);
  });
}

braidResult_t braidBarrier(braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidBarrier", [&]() -> braidResult_t {
    Call c{"braidBarrier", comm, Collective::kBarrier, braidUint8, 0, 0, 0};
    return collective(c, nullptr, nullptr, stream);
  });
}

braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidSend", [&]() -> braidResult_t {
    return p2p("braidSend", true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
  });
}

braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidRecv", [&]() -> braidResult_t {
    return p2p("braidRecv", false, recvbuff, count, datatype, peer, comm, stream);
  });
}

braidResult_t braidRedOpCreatePreMulSum(braidRedOp_t* op, void* scalar, braidDataType_t datatype,
                                        braidScalarResidence_t residence, braidComm_t comm) {
  return braid::guardApi("braidRedOpCreatePreMulSum", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidRedOpCreatePreMulSum"));
    if (!op)
      return record(comm, fail(braidInvalidArgument, "braidRedOpCreatePreMulSum: op is NULL"));
    if (!scalar)
      return record(comm, fail(braidInvalidArgument, "braidRedOpCreatePreMulSum: scalar is NULL"));
    if (static_cast<int>(datatype) < 0 || datatype >= braidNumTypes)
      return record(comm, fail(braidInvalidArgument,
                               "braidRedOpCreatePreMulSum: datatype %d is not a braidDataType_t",
                               static_cast<int>(datatype)));
    if (residence != braidScalarDevice && residence != braidScalarHostImmediate)
      return record(comm, fail(braidInvalidArgument,
                               "braidRedOpCreatePreMulSum: residence %d is not a "
                               "braidScalarResidence_t",
                               static_cast<int>(residence)));
    std::lock_guard<std::mutex> lock(comm->mu);
    braidComm::PreMulSum pm;
    pm.dtype = datatype;
    pm.live = true;
    const size_t size = braidTypeSize(datatype);
    if (residence == braidScalarHostImmediate)
      pm.scalar.assign(static_cast<char*>(scalar), static_cast<char*>(scalar) + size);
    else
      pm.scalarPtr = scalar;  // host memory here; read when the collective runs
    size_t slot = comm->preMulSums.size();
    for (size_t k = 0; k < comm->preMulSums.size(); ++k)
      if (!comm->preMulSums[k].live) slot = k;
    if (slot == comm->preMulSums.size())
      comm->preMulSums.push_back(pm);
    else
      comm->preMulSums[slot] = pm;
    *op = static_cast<braidRedOp_t>(braidNumOps + static_cast<int>(slot));
    return braidSuccess;
  });
}

braidResult_t braidRedOpDestroy(braidRedOp_t op, braidComm_t comm) {
  return braid::guardApi("braidRedOpDestroy", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidRedOpDestroy"));
    std::lock_guard<std::mutex> lock(comm->mu);
    size_t k = static_cast<size_t>(op) - braidNumOps;
    if (static_cast<int>(op) < braidNumOps || k >= comm->preMulSums.size() ||
        !comm->preMulSums[k].live)
      return record(comm, fail(braidInvalidArgument,
                               "braidRedOpDestroy: op %d is not a live PreMulSum op of this comm",
                               static_cast<int>(op)));
    comm->preMulSums[k].live = false;
    return braidSuccess;
  });
}

}  // extern "C"
