// Builds, checks and packs every rank's schedule into a Program (verifier_program.h).
#include "algorithms/verifier_program.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace braid::verify {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One step as a message shows it, whether from a Schedule or a packed step.
std::string describe(int rank, int index, StepKind kind, int peer, size_t count, int srcBuf,
                     size_t srcOff, int dstBuf, size_t dstOff, int divisor, braidRedOp_t op) {
  const std::string div = divisor > 1 ? format(" / %d", divisor) : std::string();
  switch (kind) {
    case StepKind::kSend:
      return format("rank %d step %d (send %zu elements from %s[%zu] to rank %d)", rank, index,
                    count, bufName(srcBuf), srcOff, peer);
    case StepKind::kRecv:
      return format("rank %d step %d (recv %zu elements from rank %d into %s[%zu])", rank, index,
                    count, peer, bufName(dstBuf), dstOff);
    case StepKind::kRecvReduce:
      return format(
          "rank %d step %d (recv-reduce %zu elements from rank %d: %s[%zu] = %s(%s[%zu], "
          "incoming)%s)",
          rank, index, count, peer, bufName(dstBuf), dstOff, opName(op), bufName(srcBuf), srcOff,
          div.c_str());
    case StepKind::kCopy:
      return format("rank %d step %d (copy %zu elements %s[%zu] -> %s[%zu]%s)", rank, index, count,
                    bufName(srcBuf), srcOff, bufName(dstBuf), dstOff, div.c_str());
  }
  return format("rank %d step %d (unknown kind %d)", rank, index, static_cast<int>(kind));
}

}  // namespace

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[512];
  int len = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (len < 0) return fmt;
  if (static_cast<size_t>(len) < sizeof(small)) return std::string(small, len);
  std::string out(static_cast<size_t>(len) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(static_cast<size_t>(len));
  return out;
}

const char* opName(braidRedOp_t op) { return op < braidNumOps ? braidOpName(op) : "premulsum"; }

const char* bufName(int b) {
  switch (b) {
    case 0:
      return "send";
    case 1:
      return "recv";
    case 2:
      return "scratch";
    default:
      return "user";
  }
}

std::string Program::describeStep(int32_t g) const {
  const PStep& s = steps[g];
  const size_t so = s.srcBuf < 3 ? s.src - buf(s.rank, s.srcBuf).base : 0;
  const size_t dof = s.dstBuf < 3 ? s.dst - buf(s.rank, s.dstBuf).base : 0;
  return describe(s.rank, local(g), s.kind, s.peer, s.count, s.srcBuf, so, s.dstBuf, dof, s.divisor,
                  op);
}

int Program::rankOfHash(uint64_t h) const {
  auto it = std::lower_bound(hashToRank.begin(), hashToRank.end(), std::make_pair(h, -1));
  return it != hashToRank.end() && it->first == h ? it->second : -1;
}

std::string Program::describeSym(const Sym& s) const {
  if (s.cnt == 0) return "nothing (never written)";
  const unsigned long long idx = s.idx;
  if (!reducing) {
    if (s.cnt != 1) return format("a combination of %u ranks' element %llu", s.cnt, idx);
    return format("rank %d's send[%llu]", rankOfHash(s.h1), idx);
  }
  const std::string div = s.divided ? format(", divided by %d", n) : std::string();
  if (static_cast<int>(s.cnt) == n) {
    if (s.h1 == h1All && s.h2 == h2All)
      return format("the reduction of element %llu over all %d ranks%s", idx, n, div.c_str());
    return format(
        "a reduction of element %llu over %d contributions that counts some rank "
        "twice and misses another%s",
        idx, n, div.c_str());
  }
  if (s.cnt == 1)
    return format("only rank %d's element %llu%s", rankOfHash(s.h1), idx, div.c_str());
  if (static_cast<int>(s.cnt) == n - 1) {
    const int missing = rankOfHash(h1All - s.h1);
    if (missing >= 0)
      return format("a reduction of element %llu over all ranks but rank %d%s", idx, missing,
                    div.c_str());
  }
  return format("a partial reduction of element %llu over %u of %d ranks%s", idx, s.cnt, n,
                div.c_str());
}

bool Program::checkArgs(std::string* error) {
  const CollArgs& a0 = args[0];
  for (int r = 0; r < n; ++r) {
    const CollArgs& a = args[r];
    if (a.coll != coll)
      return fail(error, format("rank %d's arguments are for collective %d, the algorithm's "
                                "is %d",
                                r, static_cast<int>(a.coll), static_cast<int>(coll)));
    if (coll != Collective::kAllToAllv && a.count != a0.count)
      return fail(error, format("ranks 0 and %d were given different counts (%zu, %zu)", r,
                                a0.count, a.count));
    if (a.op != a0.op || a.root != a0.root || a.pieceElems != a0.pieceElems)
      return fail(error, format("ranks 0 and %d were given different ops, roots or "
                                "pieceElems",
                                r));
  }
  if (isRooted(coll) && (root < 0 || root >= n))
    return fail(error, format("root %d is not a rank of %d", root, n));
  if (coll == Collective::kAllToAllv) {
    for (int r = 0; r < n; ++r)
      if (!args[r].sendCounts || !args[r].sendDispls || !args[r].recvCounts || !args[r].recvDispls)
        return fail(error, format("rank %d's all-to-all-v arrays are null", r));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (args[i].sendCounts[j] != args[j].recvCounts[i])
          return fail(error, format("inconsistent arguments: rank %d sends %zu elements to "
                                    "rank %d, which expects %zu",
                                    i, args[i].sendCounts[j], j, args[j].recvCounts[i]));
  }
  if (coll != Collective::kAllToAllv && a0.count > (size_t{1} << 31) / static_cast<size_t>(n))
    return fail(error, format("count %zu is too large to verify", a0.count));
  return true;
}

// Places rank r's buffers in the flat array; aliases share elements.
bool Program::layout(int r, size_t scratchElems, std::string* error) {
  const size_t nn = static_cast<size_t>(n);
  const size_t c = args[0].count;
  auto alloc = [&](size_t size) {
    BufInfo b;
    b.base = elems;
    b.size = size;
    b.null = false;
    elems += static_cast<int64_t>(size);
    return b;
  };
  BufInfo& send = bufs[static_cast<size_t>(r) * 3 + 0];
  BufInfo& recv = bufs[static_cast<size_t>(r) * 3 + 1];
  const bool isRoot = r == root;
  switch (coll) {
    case Collective::kAllReduce:
      send = alloc(c);
      recv = inPlace ? send : alloc(c);
      break;
    case Collective::kReduceScatter:
      send = alloc(nn * c);
      if (inPlace) {
        recv = send;
        recv.base += static_cast<int64_t>(r * c);
        recv.size = c;
      } else {
        recv = alloc(c);
      }
      break;
    case Collective::kAllGather:
      recv = alloc(nn * c);
      if (inPlace) {
        send = recv;
        send.base += static_cast<int64_t>(r * c);
        send.size = c;
      } else {
        send = alloc(c);
      }
      break;
    case Collective::kBroadcast:
      recv = alloc(c);
      if (isRoot) send = inPlace ? recv : alloc(c);
      break;
    case Collective::kReduce:
      send = alloc(c);
      if (isRoot) recv = inPlace ? send : alloc(c);
      break;
    case Collective::kAllToAll:
      send = alloc(nn * c);
      recv = alloc(nn * c);
      break;
    case Collective::kAllToAllv: {
      size_t se = 0, re = 0;
      const CollArgs& a = args[r];
      for (size_t j = 0; j < nn; ++j) {
        se = std::max(se, a.sendDispls[j] + a.sendCounts[j]);
        re = std::max(re, a.recvDispls[j] + a.recvCounts[j]);
      }
      send = alloc(se);
      recv = alloc(re);
      break;
    }
    case Collective::kGather:
      send = alloc(c);
      if (isRoot) recv = alloc(nn * c);
      break;
    case Collective::kScatter:
      recv = alloc(c);
      if (isRoot) send = alloc(nn * c);
      break;
    case Collective::kBarrier:
      break;
  }
  bufs[static_cast<size_t>(r) * 3 + 2] = alloc(scratchElems);
  if (elems >= (int64_t{1} << 31))
    return fail(error, format("buffers of %lld elements in all are too large to verify",
                              static_cast<long long>(elems)));
  return true;
}

// Checks rank r's steps and appends them, packed, to the program.
bool Program::pack(int r, const Schedule& sched, std::string* error) {
  const int nsteps = static_cast<int>(sched.steps.size());
  const int64_t base = stepBase[r];
  if (base + nsteps >= (int64_t{1} << 31) - 1)
    return fail(error, "too many steps in all to verify");
  int32_t localQ = -1;
  std::vector<int> touched;
  for (int i = 0; i < nsteps; ++i) {
    const Step& s = sched.steps[i];
    auto what = [&] {
      return describe(r, i, s.kind, s.peer, s.count, static_cast<int>(s.src.buf), s.src.offset,
                      static_cast<int>(s.dst.buf), s.dst.offset, s.divisor, op);
    };
    const bool comm =
        s.kind == StepKind::kSend || s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce;
    if (!comm && s.kind != StepKind::kCopy) return fail(error, what() + " has an unknown kind");
    if (comm && (s.peer < 0 || s.peer >= n || s.peer == r))
      return fail(error, what() + format(" names peer %d: not another rank of %d", s.peer, n));
    if (s.divisor < 1) return fail(error, what() + format(" has divisor %d", s.divisor));
    if (s.divisor > 1 && s.kind != StepKind::kRecvReduce && s.kind != StepKind::kCopy)
      return fail(error, what() + format(" has divisor %d, which the executor ignores on a %s",
                                         s.divisor, stepKindName(s.kind)));
    if (s.kind == StepKind::kRecvReduce && !reducing)
      return fail(error, what() + format(" reduces in %s, which moves data and must not "
                                         "combine it",
                                         collectiveName(coll)));
    const bool reads = s.kind != StepKind::kRecv, writes = s.kind != StepKind::kSend;
    uint32_t addr[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      if (side == 0 ? !reads : !writes) continue;
      const BufRef& ref = side == 0 ? s.src : s.dst;
      const int id = static_cast<int>(ref.buf);
      if (id > 2)
        return fail(error,
                    what() + format(" names buffer %d, which a collective does not have", id));
      if (side == 1 && ref.buf == BufferId::kSend)
        return fail(error, what() +
                               " writes the send buffer, which is the caller's read-only "
                               "input");
      const BufInfo& b = buf(r, id);
      if (s.count == 0) {  // touches nothing; the address only serves messages
        addr[side] = static_cast<uint32_t>(b.base + (ref.offset <= b.size ? ref.offset : 0));
        continue;
      }
      const char* verb = side == 0 ? "reads" : "writes";
      if (b.null)
        return fail(error, what() + format(" %s the %s buffer, which this collective leaves "
                                           "unset (null) on rank %d",
                                           verb, bufName(id), r));
      if (ref.offset > b.size || s.count > b.size - ref.offset)
        return fail(error,
                    what() + format(" %s %s[%zu..%zu), past the end of its %zu elements", verb,
                                    bufName(id), ref.offset, ref.offset + s.count, b.size));
      addr[side] = static_cast<uint32_t>(b.base + static_cast<int64_t>(ref.offset));
    }
    if (reads && writes && s.count > 0) {
      const int64_t src = addr[0], dst = addr[1], cnt = static_cast<int64_t>(s.count);
      const bool elementwise = s.kind == StepKind::kRecvReduce || s.divisor > 1;
      if (elementwise && src != dst && src < dst + cnt && dst < src + cnt)
        return fail(error, what() +
                               ": source and destination overlap without coinciding, "
                               "which the reduce kernels do not allow");
    }
    PStep p;
    p.rank = r;
    p.peer = comm ? s.peer : -1;
    p.count = static_cast<uint32_t>(s.count);
    p.src = addr[0];
    p.dst = addr[1];
    p.divisor = s.divisor;
    p.kind = s.kind;
    p.srcBuf = reads ? static_cast<uint8_t>(s.src.buf) : 3;
    p.dstBuf = writes ? static_cast<uint8_t>(s.dst.buf) : 3;
    p.depBegin = static_cast<int32_t>(deps.size());
    p.ndeps = 0;
    for (int32_t d : s.deps) {
      if (d == -1) continue;
      if (d < 0 || d >= nsteps || d == i)
        return fail(error, what() + format(" depends on step %d: not another step of its "
                                           "schedule (%d steps)",
                                           d, nsteps));
      deps.push_back(static_cast<int32_t>(base + d));
      ++p.ndeps;
    }
    int32_t* slot = !comm ? &localQ : s.kind == StepKind::kSend ? &sendQ_[s.peer] : &recvQ_[s.peer];
    if (*slot < 0) {
      *slot = static_cast<int32_t>(queues.size());
      Queue q;
      q.rank = r;
      q.peer = p.peer;
      q.kind = !comm ? kLocalQ : s.kind == StepKind::kSend ? kSendQ : kRecvQ;
      q.begin = q.end = 0;
      queues.push_back(q);
      qCount_.push_back(0);
      if (comm) touched.push_back(s.peer);
    }
    p.queue = *slot;
    p.pos = qCount_[*slot]++;
    steps.push_back(p);
  }
  for (int peer : touched) sendQ_[peer] = recvQ_[peer] = -1;
  return true;
}

// Queue membership, connection partners and reverse dependencies.
void Program::link() {
  const int32_t total = static_cast<int32_t>(steps.size());
  int32_t at = 0;
  for (size_t q = 0; q < queues.size(); ++q) {
    queues[q].begin = at;
    at += qCount_[q];
    queues[q].end = at;
  }
  qSteps.resize(total);
  for (int32_t g = 0; g < total; ++g) qSteps[queues[steps[g].queue].begin + steps[g].pos] = g;

  std::vector<std::pair<uint64_t, int32_t>> sends, recvs;
  const uint64_t nn = static_cast<uint64_t>(n);
  for (size_t q = 0; q < queues.size(); ++q) {
    const Queue& Q = queues[q];
    if (Q.kind == kSendQ) sends.push_back({Q.rank * nn + Q.peer, static_cast<int32_t>(q)});
    if (Q.kind == kRecvQ) recvs.push_back({Q.peer * nn + Q.rank, static_cast<int32_t>(q)});
  }
  matchInOrder(&sends, &recvs, [&](int32_t s, int32_t r) {
    queues[s].partner = r;
    queues[r].partner = s;
    return true;
  });

  revBegin.assign(static_cast<size_t>(total) + 1, 0);
  for (int32_t d : deps) ++revBegin[d + 1];
  for (int32_t g = 0; g < total; ++g) revBegin[g + 1] += revBegin[g];
  rev.resize(deps.size());
  std::vector<int32_t> fill(revBegin.begin(), revBegin.end() - 1);
  for (int32_t g = 0; g < total; ++g)
    for (int k = 0; k < steps[g].ndeps; ++k) rev[fill[deps[steps[g].depBegin + k]]++] = g;

  if (barrier) {
    refs.assign(total, 0);
    for (int32_t g = 0; g < total; ++g) {
      const Queue& Q = queues[steps[g].queue];
      if (Q.begin + steps[g].pos + 1 < Q.end) ++refs[g];
      if (steps[g].kind == StepKind::kSend && Q.partner >= 0) ++refs[g];
      for (int k = 0; k < steps[g].ndeps; ++k) ++refs[deps[steps[g].depBegin + k]];
    }
  }
}

bool Program::build(const AlgorithmInfo& algo, int nranks, std::vector<CollArgs> a,
                    bool inPlaceCall, std::string* error) {
  n = nranks;
  coll = algo.coll;
  reducing = isReducing(coll);
  barrier = coll == Collective::kBarrier;
  inPlace = inPlaceCall && hasInPlace(coll);
  args = std::move(a);
  for (CollArgs& x : args) x.inPlace = inPlace;
  root = args[0].root;
  op = args[0].op;
  pieceElems = std::max<size_t>(1, args[0].pieceElems);
  if (!checkArgs(error)) return false;

  r1.resize(n);
  r2.resize(n);
  hashToRank.resize(n);
  for (int r = 0; r < n; ++r) {
    r1[r] = splitmix64(0x5eed0000ull + 2 * static_cast<uint64_t>(r));
    r2[r] = splitmix64(0xb0a7000000ull + 2 * static_cast<uint64_t>(r) + 1);
    h1All += r1[r];
    h2All += r2[r];
    hashToRank[r] = {r1[r], r};
  }
  std::sort(hashToRank.begin(), hashToRank.end());

  bufs.assign(static_cast<size_t>(n) * 3, BufInfo{});
  stepBase.assign(n + 1, 0);
  queueBase.assign(n + 1, 0);
  sendQ_.assign(n, -1);
  recvQ_.assign(n, -1);
  Schedule sched;
  for (int r = 0; r < n; ++r) {
    algo.build(args[r], &sched);
    stepBase[r] = static_cast<int64_t>(steps.size());
    queueBase[r] = static_cast<int32_t>(queues.size());
    if (!layout(r, sched.scratchElems, error) || !pack(r, sched, error)) return false;
  }
  stepBase[n] = static_cast<int64_t>(steps.size());
  queueBase[n] = static_cast<int32_t>(queues.size());
  link();
  return true;
}

}  // namespace braid::verify
