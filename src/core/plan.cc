// Compiling a schedule into a Plan (executor.h), once per plan: the per-peer send and receive
// queues and the local steps, the extents of the buffers the steps touch, the receive-reduces
// whose output no later step reads (Plan::finalOutput), and the per-run state and scratch.
#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

#include "algorithms/schedule.h"
#include "core/executor.h"

namespace braid {
namespace {

// Plan::finalOutput: a hint for speed only (the kernels' stores are fenced either way), so
// "later" is schedule order, which builders keep for the steps that read a step's output.
// Walking the steps backwards, the receive buffer's ranges that later steps read (sends,
// copies and receive-reduces with a source there) are kept merged, by start, in `read`; a
// receive-reduce into the receive buffer is final when its range meets none.
void markFinalOutputs(Plan* plan) {
  const std::vector<Step>& steps = plan->schedule.steps;
  plan->finalOutput.assign(steps.size(), 0);
  if (plan->inPlace) return;  // the send buffer is the receive buffer, at offsets per collective
  std::map<size_t, size_t> read;  // start -> end, disjoint
  auto meets = [&](size_t lo, size_t hi) {
    auto it = read.upper_bound(lo);
    if (it != read.begin() && std::prev(it)->second > lo) return true;
    return it != read.end() && it->first < hi;
  };
  auto add = [&](size_t lo, size_t hi) {
    auto it = read.upper_bound(lo);
    if (it != read.begin() && std::prev(it)->second >= lo) {
      --it;
      lo = it->first;
    }
    while (it != read.end() && it->first <= hi) {
      hi = std::max(hi, it->second);
      it = read.erase(it);
    }
    read.emplace(lo, hi);
  };
  for (size_t i = steps.size(); i-- > 0;) {
    const Step& st = steps[i];
    if (st.count == 0) continue;
    // A reduction in place (its source is its output) stays on plain stores: streaming
    // stores to the lines it has just read gain nothing.
    const bool inPlaceReduce = st.src.buf == st.dst.buf &&
                               st.src.offset < st.dst.offset + st.count &&
                               st.dst.offset < st.src.offset + st.count;
    if (st.kind == StepKind::kRecvReduce && st.dst.buf == BufferId::kRecv && !inPlaceReduce)
      plan->finalOutput[i] = !meets(st.dst.offset, st.dst.offset + st.count);
    if (st.kind != StepKind::kRecv && st.src.buf == BufferId::kRecv)
      add(st.src.offset, st.src.offset + st.count);
  }
}

}  // namespace

void compilePlan(Plan* plan, size_t elemSize) {
  const Schedule& s = plan->schedule;
  auto queueFor = [](std::vector<Plan::Queue>* qs, int peer) -> Plan::Queue& {
    for (Plan::Queue& q : *qs)
      if (q.peer == peer) return q;
    qs->push_back(Plan::Queue{peer, {}, {}});
    return qs->back();
  };
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    int32_t idx = static_cast<int32_t>(i);
    switch (st.kind) {
      case StepKind::kSend:
        queueFor(&plan->sends, st.peer).steps.push_back(idx);
        break;
      case StepKind::kRecv:
      case StepKind::kRecvReduce:
        queueFor(&plan->recvs, st.peer).steps.push_back(idx);
        break;
      case StepKind::kCopy:
        plan->locals.push_back(idx);
        break;
    }
  }
  auto extend = [&](const BufRef& b, size_t count) {
    if (b.buf == BufferId::kSend) plan->sendExtent = std::max(plan->sendExtent, b.offset + count);
    if (b.buf == BufferId::kRecv) plan->recvExtent = std::max(plan->recvExtent, b.offset + count);
  };
  for (const Step& st : s.steps) {
    if (st.kind != StepKind::kRecv) extend(st.src, st.count);  // a receive has no source
    if (st.kind != StepKind::kSend) extend(st.dst, st.count);  // nor a send a destination
  }
  markFinalOutputs(plan);
  for (Plan::Queue& q : plan->sends) q.tickets.assign(q.steps.size(), Plan::kCopied);
  plan->done.assign(s.steps.size(), 0);
  plan->sendCur.assign(plan->sends.size(), Plan::Cursor{});
  plan->recvCur.assign(plan->recvs.size(), Plan::Cursor{});
  plan->scratch.assign(s.scratchElems * elemSize, 0);
}

}  // namespace braid
