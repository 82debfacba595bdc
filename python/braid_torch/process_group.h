// The "braid" backend of torch.distributed (issue 33): a c10d process group whose collectives
// are Braid's, over the public header alone. braid_torch/__init__.py registers it and hands it
// the unique id through the c10d store; module.cc makes the module braid_torch._C.
//
// Tensors: CPU, dense, one per process (no multi-device lists); non-contiguous ones go through
// a contiguous copy; every dtype of braidType (convert.h). Calls: every one of c10d's but
// recvAnysource (Braid's receives name their peer, as NCCL's). A call outside a coalescing
// block (batch_isend_irecv's) runs to its end inside the call (Braid's NULL stream), so its
// Work is complete when returned; calls inside one are one Braid group (braidGroupStart/End:
// sends and receives in any order cannot deadlock) and their Works complete when it ends. A
// wrong argument (dtype, op, shape, rank) raises at the call, before anything moves; a failure
// of Braid (a peer gone, the timeout, a mismatch Braid finds) is the Work's exception.
#pragma once

#include <torch/version.h>

#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

// torch 2 splits the process group into a ProcessGroup front and Backends behind it; a
// third-party backend there derives from c10d::Backend, which has the same virtual calls.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace braid_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// A new Braid unique id in text form (braidUniqueIdToString); the calling process serves its
// bootstrap.
std::string newUniqueId();

// The process group of rank in size ranks that share uniqueId; timeoutSec bounds every wait
// (braidConfig_t::timeoutSec). Raises if the communicator cannot be made.
c10::intrusive_ptr<BackendBase> createProcessGroup(const std::string& uniqueId, int rank, int size,
                                                   double timeoutSec);

}  // namespace braid_torch
