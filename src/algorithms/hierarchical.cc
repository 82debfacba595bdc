// Hierarchical (two-level, host-aware) algorithms: one phase among the ranks of each host
// (shared memory, NVLink), one among the ranks of the same local index on different hosts
// (the network), so that the network carries each byte once per host and every local rank
// drives its own share of it in parallel. The layout comes from CollArgs::hostOf; with it
// null (every rank on one host) each collective degenerates to its one-level form.
//
// Sources: the intra-host reduce-scatter / inter-host all-reduce / intra-host all-gather of
// X. Jia et al., "Highly scalable deep learning training system with mixed-precision"
// (2018), Horovod's hierarchical all-reduce and NCCL's multi-node rings; MPICH's SMP-aware
// broadcast and reduce (MPIR_Bcast_intra_smp, MPIR_Reduce_intra_smp); the two-level
// all-to-all of DeepSpeed-MoE (Rajbhandari et al., ICML 2022) and Tutel (Hwang et al.,
// MLSys 2023).
//
// Terms. H hosts of L ranks each (every host must have the same L). A rank's local index
// is its place among its host's ranks in rank order, so hosts need not hold contiguous
// ranks. The "local ring" of a rank is its host's ranks by local index; its "cross ring" is
// the ranks with its local index on hosts 0 .. H-1.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/host_layout.h"
#include "algorithms/ring.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

constexpr BufferId kSendBuf = BufferId::kSend, kRecvBuf = BufferId::kRecv,
                   kScratchBuf = BufferId::kScratch;

void resetSchedule(Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
}

BufRef plus(BufRef b, size_t off) { return {b.buf, b.offset + off}; }

// ---- The ring phases (ring.h) over a host and across hosts ------------------------

RingPhase localRing(const HostLayout& lay, size_t perBlock) {
  RingPhase ph;
  for (int i = 0; i < lay.local; ++i) ph.ranks.push_back(lay.at(lay.host, i));
  ph.me = lay.li;
  ph.perBlock = perBlock;
  ph.units.resize(static_cast<size_t>(lay.local) * perBlock);
  return ph;
}

RingPhase crossRing(const HostLayout& lay, size_t perBlock) {
  RingPhase ph;
  for (int g = 0; g < lay.hosts; ++g) ph.ranks.push_back(lay.at(g, lay.li));
  ph.me = lay.host;
  ph.perBlock = perBlock;
  ph.units.resize(static_cast<size_t>(lay.hosts) * perBlock);
  return ph;
}

void selfCopy(size_t count, Schedule* out) {
  out->add(copyStep({kSendBuf, 0}, {kRecvBuf, 0}, count));
}

// ---- All-reduce ----------------------------------------------------------------------

// Two-level all-reduce. The vector is cut into G groups (below); each group into L shards
// (partStart, so any count), shard i into H chunks and each chunk into pieces of about
// pieceElems: the units every phase moves, so a unit can go on to the next phase as soon as
// it is done with the last. Per group:
//   1. Local ring reduce-scatter: local rank i ends with shard i summed over its host, in
//      its receive buffer (partial sums of the other shards pass through there too).
//   2. Cross ring all-reduce of shard i with the local rank i of every other host (ring
//      reduce-scatter then ring all-gather over the H chunks, in place); all L local
//      indices run at once, each on its own pair of network peers. AVG divides here, on
//      the full reduction.
//   3. Local ring all-gather of the shards.
// A group's phase 2 can start only once its phase 1 reaches its last step, and its phase 3
// once phase 2 delivers, so with one group the host links idle while the network works and
// the other way round. Groups overlap them: the steps are listed 1(0) 1(1) 2(0) 3(0) 1(2)
// 2(1) 3(1) ... so that the host ring reduce-scatters group g+1 while group g crosses the
// network, as NCCL's multi-node algorithms keep NVLink and the NICs busy at once (its tree
// and CollNet chain intra- and inter-node stages per chunk). G is the number of groups whose
// chunks are at least kMinPiecesPerChunk pieces each, at most kMaxGroups: a call of a few
// pieces stays one group.
// Each rank sends 2(L-1)/L of the vector within its host and 2(H-1)/(HL) of it over the
// network: per host, 2(H-1)/H of the vector, the network optimum, in 2(H-1) network steps
// instead of a flat ring's 2(n-1). With L = 1 phase 2 reads the send buffer (ring.cc's
// all-reduce over hosts); with H = 1 it is the local ring all-reduce.
void buildHierarchicalAllReduce(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  if (a.nranks == 1) return selfCopy(count, out);
  const HostLayout lay = makeLayout(a);
  const int H = lay.hosts, L = lay.local;
  const int divisor = a.op == braidAvg ? a.nranks : 1;
  constexpr size_t kMaxGroups = 8, kMinPiecesPerChunk = 2;
  const size_t groupMin =
      static_cast<size_t>(L) * H * std::max<size_t>(1, a.pieceElems) * kMinPiecesPerChunk;
  const size_t G = H > 1 && L > 1 ? std::clamp<size_t>(count / groupMin, 1, kMaxGroups) : 1;

  struct Group {
    size_t base = 0, len = 0;     // the group's elements: [base, base + len)
    size_t P = 1, U = 1;          // pieces per chunk; units per shard (chunk c, piece p)
    std::vector<int32_t> result;  // per unit of the own shard: the step leaving its result
    std::vector<int32_t> sent1;   // phase 1: the send that read each unit here
  };
  std::vector<Group> groups(G);
  for (size_t g = 0; g < G; ++g) {
    Group& gr = groups[g];
    gr.base = partStart(count, G, g);
    gr.len = partStart(count, G, g + 1) - gr.base;
    const size_t maxShard = gr.len / L + (gr.len % L != 0);
    gr.P = piecesFor(maxShard / H + (maxShard % H != 0), a.pieceElems);
    gr.U = static_cast<size_t>(H) * gr.P;
    gr.result.assign(gr.U, -1);
  }
  auto unitRange = [&](const Group& gr, int i, size_t k, size_t* off, size_t* len) {
    const size_t sb = partStart(gr.len, L, i), slen = partStart(gr.len, L, i + 1) - sb;
    const size_t c = k / gr.P, cb = partStart(slen, H, c), clen = partStart(slen, H, c + 1) - cb;
    size_t pb;
    pieceOf(clen, gr.P, k % gr.P, &pb, len);
    *off = gr.base + sb + cb + pb;
  };

  auto phase1 = [&](Group& gr) {
    if (L == 1) return;
    RingPhase ph = localRing(lay, gr.U);
    for (int i = 0; i < L; ++i)
      for (size_t k = 0; k < gr.U; ++k) {
        RingUnit& u = ph.unit(i, k);
        size_t off;
        unitRange(gr, i, k, &off, &u.len);
        u.in = {kSendBuf, off};
        u.at = {kRecvBuf, off};
      }
    ringReduceScatter(ph, nullptr, H == 1 ? divisor : 1, out, &gr.result, &gr.sent1);
  };

  auto phase2 = [&](Group& gr) {
    if (H == 1) return;
    const size_t P = gr.P;
    RingPhase ph = crossRing(lay, P);
    for (int c = 0; c < H; ++c)
      for (size_t p = 0; p < P; ++p) {
        RingUnit& u = ph.unit(c, p);
        size_t off;
        unitRange(gr, lay.li, c * P + p, &off, &u.len);
        u.in = {L > 1 ? kRecvBuf : kSendBuf, off};
        u.at = {kRecvBuf, off};
        u.ready = gr.result[c * P + p];
      }
    std::vector<int32_t> done, sent2, got2;
    ringReduceScatter(ph, nullptr, divisor, out, &done, &sent2);
    for (int c = 0; c < H; ++c)
      for (size_t p = 0; p < P; ++p) {
        RingUnit& u = ph.unit(c, p);
        u.in = u.at;
        // Own chunk: its result. Others: the receive must not overwrite the value before
        // the reduce-scatter's send of it has read it.
        u.ready = c == lay.host ? done[p] : sent2[ph.index(c, p)];
      }
    ringAllGather(ph, out, &got2);
    for (int c = 0; c < H; ++c)
      for (size_t p = 0; p < P; ++p)
        gr.result[c * P + p] = c == lay.host ? done[p] : got2[ph.index(c, p)];
  };

  auto phase3 = [&](Group& gr) {
    if (L == 1) return;
    RingPhase ph = localRing(lay, gr.U);
    for (int i = 0; i < L; ++i)
      for (size_t k = 0; k < gr.U; ++k) {
        RingUnit& u = ph.unit(i, k);
        size_t off;
        unitRange(gr, i, k, &off, &u.len);
        u.in = u.at = {kRecvBuf, off};
        // Other shards: phase 1 sent a partial sum (or, in place, the input) from there.
        u.ready = i == lay.li ? gr.result[k] : gr.sent1[ph.index(i, k)];
      }
    std::vector<int32_t> got3;
    ringAllGather(ph, out, &got3);
  };

  // 1(0) 1(1) 2(0) 3(0) 1(2) 2(1) 3(1) ... 2(G-1) 3(G-1).
  phase1(groups[0]);
  for (size_t g = 0; g < G; ++g) {
    if (g + 1 < G) phase1(groups[g + 1]);
    phase2(groups[g]);
    phase3(groups[g]);
  }
}

// ---- Reduce-scatter ------------------------------------------------------------------

// Two-level reduce-scatter. Rank r's result is block r of the send buffers, summed.
//   1. Local ring reduce-scatter in which local rank i's block is the H blocks destined to
//      the local rank i of every host: it ends with each of them summed over its host, in
//      scratch (partial sums alternate between two scratch slots, as in ring.cc).
//   2. Cross ring reduce-scatter of those H host sums with the local rank i of the other
//      hosts, in place in scratch; the last step sums the own block into the receive
//      buffer (AVG divides there).
// Blocks are cut into pieces of about pieceElems, so both phases pipeline. Per rank
// (L-1)/L of its input crosses the host and (H-1)/(HL) of it the network: per host
// (H-1)/H, the network optimum. With H = 1 phase 1 writes the receive buffer; with L = 1
// phase 2 reads the send buffer.
void buildHierarchicalReduceScatter(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  if (a.nranks == 1) return selfCopy(count, out);
  const HostLayout lay = makeLayout(a);
  const int H = lay.hosts, L = lay.local;
  const int divisor = a.op == braidAvg ? a.nranks : 1;
  const size_t P = piecesFor(count, a.pieceElems);
  const size_t hostElems = static_cast<size_t>(H) * count;  // H blocks
  // Scratch: the H host sums (when H > 1), then up to two slots of H blocks.
  const size_t staging = 0, slotBase = H > 1 ? hostElems : 0;
  const int nslots = std::min(std::max(L - 2, 0), 2);
  out->scratchElems = slotBase + static_cast<size_t>(nslots) * hostElems;
  std::vector<int32_t> hostSum(static_cast<size_t>(H) * P, -1);  // phase 1's result per unit

  if (L > 1) {
    RingPhase ph = localRing(lay, static_cast<size_t>(H) * P);
    for (int j = 0; j < L; ++j)
      for (int g = 0; g < H; ++g)
        for (size_t p = 0; p < P; ++p) {
          RingUnit& u = ph.unit(j, g * P + p);
          size_t off;
          pieceOf(count, P, p, &off, &u.len);
          u.in = {kSendBuf, static_cast<size_t>(lay.at(g, j)) * count + off};
          u.slotOff = g * count + off;
          u.at = H > 1 ? BufRef{kScratchBuf, staging + g * count + off} : BufRef{kRecvBuf, off};
        }
    const BufRef slots[2] = {{kScratchBuf, slotBase}, {kScratchBuf, slotBase + hostElems}};
    std::vector<int32_t> sent1;
    ringReduceScatter(ph, slots, H == 1 ? divisor : 1, out, &hostSum, &sent1);
  }

  if (H > 1) {
    RingPhase ph = crossRing(lay, P);
    for (int g = 0; g < H; ++g)
      for (size_t p = 0; p < P; ++p) {
        RingUnit& u = ph.unit(g, p);
        size_t off;
        pieceOf(count, P, p, &off, &u.len);
        u.in = L > 1 ? BufRef{kScratchBuf, staging + g * count + off}
                     : BufRef{kSendBuf, static_cast<size_t>(lay.at(g, 0)) * count + off};
        u.at =
            g == lay.host ? BufRef{kRecvBuf, off} : BufRef{kScratchBuf, staging + g * count + off};
        u.ready = hostSum[g * P + p];
      }
    std::vector<int32_t> done, sent2;
    ringReduceScatter(ph, nullptr, divisor, out, &done, &sent2);
  }
}

// ---- All-gather ----------------------------------------------------------------------

// Two-level all-gather: the own block is copied into place; then
//   1. cross ring all-gather with the local rank i of every host: local rank i gathers the
//      blocks of local index i;
//   2. local ring all-gather in which local rank i's block is those H blocks, sent in the
//      order they arrived in phase 1 (own host first), so phase 2 forwards each piece
//      as soon as phase 1 delivered it.
// The own block is always read from the send buffer (in place it is the receive buffer's
// block, and the copy is a no-op). Per host (H-1)/H of the output crosses the network,
// spread over the L local ranks.
void buildHierarchicalAllGather(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  out->add(copyStep({kSendBuf, 0}, {kRecvBuf, static_cast<size_t>(a.rank) * count}, count));
  if (a.nranks == 1) return;
  const HostLayout lay = makeLayout(a);
  const int H = lay.hosts, L = lay.local;
  const size_t P = piecesFor(count, a.pieceElems);
  std::vector<int32_t> got1(static_cast<size_t>(H) * P, -1);

  if (H > 1) {
    RingPhase ph = crossRing(lay, P);
    for (int g = 0; g < H; ++g)
      for (size_t p = 0; p < P; ++p) {
        RingUnit& u = ph.unit(g, p);
        size_t off;
        pieceOf(count, P, p, &off, &u.len);
        u.at = {kRecvBuf, static_cast<size_t>(lay.at(g, lay.li)) * count + off};
        u.in = {kSendBuf, off};
      }
    ringAllGather(ph, out, &got1);
  }

  if (L > 1) {
    RingPhase ph = localRing(lay, static_cast<size_t>(H) * P);
    for (int j = 0; j < L; ++j)
      for (int d = 0; d < H; ++d) {
        const int g = (lay.host - d + H) % H;
        for (size_t p = 0; p < P; ++p) {
          RingUnit& u = ph.unit(j, d * P + p);
          size_t off;
          pieceOf(count, P, p, &off, &u.len);
          u.at = {kRecvBuf, static_cast<size_t>(lay.at(g, j)) * count + off};
          if (j == lay.li) {
            u.in = d == 0 ? BufRef{kSendBuf, off} : u.at;
            u.ready = d == 0 ? -1 : got1[g * P + p];
          }
        }
      }
    std::vector<int32_t> got2;
    ringAllGather(ph, out, &got2);
  }
}

// ---- Broadcast and reduce ------------------------------------------------------------

// Where this rank sits in the two chains of a rooted collective: the host chain links the
// ranks of the root's local index, host by host from the root's host; each host's local
// chain runs from that rank (its leader) through the host's other ranks by local index.
struct Chains {
  int crossPrev = -1, crossNext = -1;  // leaders only
  int localPrev = -1, localNext = -1;
  bool leader = false;
};

Chains makeChains(const CollArgs& a, const HostLayout& lay) {
  const int H = lay.hosts, L = lay.local;
  const int rootHost = lay.hostOf[a.root], rootLi = lay.localOf[a.root];
  const int t = (lay.host - rootHost + H) % H, q = (lay.li - rootLi + L) % L;
  Chains c;
  c.leader = q == 0;
  if (c.leader && t > 0) c.crossPrev = lay.at((lay.host - 1 + H) % H, rootLi);
  if (c.leader && t + 1 < H) c.crossNext = lay.at((lay.host + 1) % H, rootLi);
  if (q > 0) c.localPrev = lay.at(lay.host, (lay.li - 1 + L) % L);
  if (q + 1 < L) c.localNext = lay.at(lay.host, (lay.li + 1) % L);
  return c;
}

// Two-level broadcast (MPICH's SMP-aware broadcast, pipelined): the root sends the vector
// down a chain of one rank per host (the ranks of its local index), and each of those
// passes it down a chain of its host's ranks. Pieces of about pieceElems pipeline through
// both chains at once, so for long vectors the time nears count / bandwidth, and each host
// receives the vector over the network once. The root copies its input into its receive
// buffer after sending each piece (in place the copy is a no-op).
void buildHierarchicalBroadcast(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  if (a.nranks == 1) return selfCopy(count, out);
  const HostLayout lay = makeLayout(a);
  const Chains ch = makeChains(a, lay);
  const size_t P = piecesFor(count, a.pieceElems);
  for (size_t p = 0; p < P; ++p) {
    size_t off, len;
    pieceOf(count, P, p, &off, &len);
    if (a.rank == a.root) {
      int32_t s1 = -1, s2 = -1;
      if (ch.crossNext >= 0) s1 = out->add(sendStep(ch.crossNext, {kSendBuf, off}, len));
      if (ch.localNext >= 0) s2 = out->add(sendStep(ch.localNext, {kSendBuf, off}, len));
      out->add(copyStep({kSendBuf, off}, {kRecvBuf, off}, len, s1, s2));
      continue;
    }
    const int from = ch.leader ? ch.crossPrev : ch.localPrev;
    const int32_t got = out->add(recvStep(from, {kRecvBuf, off}, len));
    if (ch.crossNext >= 0) out->add(sendStep(ch.crossNext, {kRecvBuf, off}, len, got));
    if (ch.localNext >= 0) out->add(sendStep(ch.localNext, {kRecvBuf, off}, len, got));
  }
}

// Two-level reduce, the broadcast's chains run backwards (MPICH's SMP-aware reduce,
// pipelined): each rank adds what its local chain successor sends to its own input and
// passes the sum towards its host's leader; each leader then adds what the next host's
// leader sends and passes it towards the root, which sums into its receive buffer (AVG
// divides there). Partial sums live in scratch, piece by piece, so no rank but the root
// writes its receive buffer.
void buildHierarchicalReduce(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  if (a.nranks == 1) return selfCopy(count, out);
  const HostLayout lay = makeLayout(a);
  const Chains ch = makeChains(a, lay);
  const bool root = a.rank == a.root;
  const int parent = ch.localPrev >= 0 ? ch.localPrev : ch.crossPrev;
  int kids[2], nkids = 0;
  if (ch.localNext >= 0) kids[nkids++] = ch.localNext;
  if (ch.crossNext >= 0) kids[nkids++] = ch.crossNext;
  out->scratchElems = count;
  const size_t P = piecesFor(count, a.pieceElems);
  for (size_t p = 0; p < P; ++p) {
    size_t off, len;
    pieceOf(count, P, p, &off, &len);
    BufRef acc{kSendBuf, off};
    int32_t accStep = -1;
    for (int k = 0; k < nkids; ++k) {
      const bool last = root && k == nkids - 1;
      const BufRef dst = last ? BufRef{kRecvBuf, off} : BufRef{kScratchBuf, off};
      Step st = makeStep(StepKind::kRecvReduce, kids[k], acc, dst, len);
      addDep(&st, accStep);
      if (last && a.op == braidAvg) st.divisor = a.nranks;
      accStep = out->add(st);
      acc = dst;
    }
    if (parent >= 0) out->add(sendStep(parent, acc, len, accStep));
  }
}

// ---- All-to-all ----------------------------------------------------------------------

// Adds `deps` to s; past Step::kMaxDeps, through a chain of count-0 local copies at
// `where` that each wait for up to three of them and the one before.
void addDepsJoined(Step* s, std::vector<int32_t> deps, BufRef where, Schedule* out) {
  deps.erase(std::remove(deps.begin(), deps.end(), -1), deps.end());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  if (deps.size() <= static_cast<size_t>(Step::kMaxDeps)) {
    for (int32_t d : deps) addDep(s, d);
    return;
  }
  int32_t join = -1;
  for (size_t i = 0; i < deps.size();) {
    Step j = copyStep(where, where, 0, join);
    for (int k = 0; k < Step::kMaxDeps - 1 && i < deps.size(); ++k) addDep(&j, deps[i++]);
    join = out->add(j);
  }
  addDep(s, join);
}

// Node-aware all-to-all (the two-level all-to-all of DeepSpeed-MoE and Tutel). Rank
// (host h, local index i) must deliver, to each rank (h', i') of every host, its block for
// it; the network should carry one aggregated message per host pair and local index.
//   1. Local exchange: rank (h, k) sends to each local peer (h, i) its blocks for (h', i)
//      on every host h' (own host first): the one for (h, i) itself is final and lands in
//      the receive buffer; the others land in scratch, stage[h'][k]. The own blocks are
//      copied likewise. Now (h, i) holds, for each other host h', the L blocks its host
//      sends to (h', i), contiguous.
//   2. Cross exchange, pairwise over distances d = 1 .. H-1: (h, i) sends stage[h + d]
//      (L blocks, in pieces of about pieceElems) to (h + d, i) and receives the same from
//      (h - d, i): the blocks of ranks (h - d, 0 .. L-1) for it. When that host's ranks are
//      consecutive they land straight in the receive buffer; otherwise in scratch, then
//      copied block by block into place. Every distance is in flight at once, as in
//      NCCL's grouped all-to-all.
// No third phase is needed: every block that crosses the network is already at the rank it
// is for. With L = 1 phase 2 sends straight from the send buffer (pairwise exchange); with
// H = 1 phase 1 is all of it.
void buildHierarchicalAllToAll(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const size_t count = a.count;
  if (count == 0) return;
  const HostLayout lay = makeLayout(a);
  const int H = lay.hosts, L = lay.local, h = lay.host, li = lay.li;
  const size_t block = count, region = static_cast<size_t>(L) * count;  // one host's L blocks
  auto blockOf = [&](int rank) { return static_cast<size_t>(rank) * count; };
  bool allContiguous = true;
  for (int g = 0; g < H; ++g) allContiguous = allContiguous && lay.contiguous(g);
  // Scratch: stage[d] for d = 1 .. H-1 (L > 1), then the receive stage (some host's ranks
  // are not consecutive).
  const size_t sendStage = 0;
  const size_t recvStage = L > 1 ? static_cast<size_t>(H - 1) * region : 0;
  out->scratchElems = recvStage + (allContiguous ? 0 : static_cast<size_t>(H - 1) * region);
  auto staged = [&](int d, int k) {
    return BufRef{kScratchBuf, sendStage + static_cast<size_t>(d - 1) * region + k * block};
  };

  // The own blocks first: every local step after them waits on messages.
  out->add(copyStep({kSendBuf, blockOf(a.rank)}, {kRecvBuf, blockOf(a.rank)}, block));
  std::vector<int32_t> ownCopy(H, -1);
  if (L > 1)
    for (int d = 1; d < H; ++d)
      ownCopy[d] =
          out->add(copyStep({kSendBuf, blockOf(lay.at((h + d) % H, li))}, staged(d, li), block));

  const size_t P = piecesFor(block, a.pieceElems);
  // Phase 1: got1[(d * L + k) * P + p] is the receive of piece p of stage[d][k].
  std::vector<int32_t> got1(static_cast<size_t>(H) * L * P, -1);
  for (int s = 1; s < L; ++s) {
    const int t = (li + s) % L, k = (li - s + L) % L;
    for (int d = 0; d < H; ++d)
      for (size_t p = 0; p < P; ++p) {
        size_t off, len;
        pieceOf(block, P, p, &off, &len);
        out->add(sendStep(lay.at(h, t), {kSendBuf, blockOf(lay.at((h + d) % H, t)) + off}, len));
      }
    for (int d = 0; d < H; ++d)
      for (size_t p = 0; p < P; ++p) {
        size_t off, len;
        pieceOf(block, P, p, &off, &len);
        const BufRef dst =
            d == 0 ? BufRef{kRecvBuf, blockOf(lay.at(h, k)) + off} : plus(staged(d, k), off);
        got1[(static_cast<size_t>(d) * L + k) * P + p] = out->add(recvStep(lay.at(h, k), dst, len));
      }
  }
  if (H == 1) return;

  // The phase 1 step that leaves element e of stage[d] in place.
  auto stagedBy = [&](int d, size_t e) -> int32_t {
    const int k = static_cast<int>(e / block);
    if (k == li) return ownCopy[d];
    return got1[(static_cast<size_t>(d) * L + k) * P + pieceHolding(block, P, e % block)];
  };
  const size_t Q = piecesFor(region, a.pieceElems);
  // Sends first, so that their joins precede the copies out of the receive stage in the
  // local queue.
  for (int d = 1; d < H; ++d) {
    const int to = lay.at((h + d) % H, li);
    for (size_t q = 0; q < Q; ++q) {
      size_t off, len;
      pieceOf(region, Q, q, &off, &len);
      if (len == 0) continue;
      Step st;
      if (L == 1) {
        st = sendStep(to, {kSendBuf, blockOf(to) + off}, len);
      } else {
        st = sendStep(to, plus(staged(d, 0), off), len);
        // A piece depends on each block it covers: on the step that wrote its last element
        // there (the earlier pieces of that block came through the same queue).
        std::vector<int32_t> deps;
        for (size_t e = off; e < off + len; e = (e / block + 1) * block)
          deps.push_back(stagedBy(d, std::min(off + len, (e / block + 1) * block) - 1));
        addDepsJoined(&st, deps, {kRecvBuf, 0}, out);
      }
      out->add(st);
    }
  }
  for (int d = 1; d < H; ++d) {
    const int g = (h - d + H) % H, from = lay.at(g, li);
    const bool direct = lay.contiguous(g);
    const BufRef base = direct ? BufRef{kRecvBuf, blockOf(lay.at(g, 0))}
                               : BufRef{kScratchBuf, recvStage + (d - 1) * region};
    std::vector<int32_t> got(Q, -1);
    for (size_t q = 0; q < Q; ++q) {
      size_t off, len;
      pieceOf(region, Q, q, &off, &len);
      if (len > 0) got[q] = out->add(recvStep(from, plus(base, off), len));
    }
    if (direct) continue;
    for (int k = 0; k < L; ++k) {
      // The piece holding the block's last element brought it in (queue order: all of it).
      const size_t q = pieceHolding(region, Q, (static_cast<size_t>(k) + 1) * block - 1);
      out->add(copyStep(plus(base, k * block), {kRecvBuf, blockOf(lay.at(g, k))}, block, got[q]));
    }
  }
}

// ---- Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h) ----

// With one host, or one rank per host, a two-level algorithm is its one-level form: that
// algorithm's cost (its row in the table).
double oneLevelCost(Collective c, const char* name, const CostModel& m, double bytes) {
  return findAlgorithm(c, name)->cost(m, bytes);
}
// Closed forms: phases within hosts (L ranks) and across them (H
// hosts, all L local ranks at once, each with its own flow through the host's NICs).
double hierAllReduceCost(const CostModel& m, double S) {
  if (m.H <= 1 || m.L <= 1) return oneLevelCost(Collective::kAllReduce, "ring", m, S);
  const Crossing in{}, out = m.anyCross(m.L);
  const double shard = S / m.L, piece = shard / m.H;
  return Pipe(m)
      .round(shard, in, true, m.L - 1)
      .round(piece, out, true, m.H - 1)
      .round(piece, out, false, m.H - 1)
      .round(shard, in, false, m.L - 1)
      .total();
}
double hierReduceScatterCost(const CostModel& m, double b) {
  if (m.H <= 1 || m.L <= 1) return oneLevelCost(Collective::kReduceScatter, "ring", m, b);
  return Pipe(m)
      .round(b * m.H, Crossing{}, true, m.L - 1)
      .round(b, m.anyCross(m.L), true, m.H - 1)
      .total();
}
double hierAllGatherCost(const CostModel& m, double b) {
  if (m.H <= 1 || m.L <= 1) return oneLevelCost(Collective::kAllGather, "ring", m, b);
  return m.copy(b) + Pipe(m)
                         .round(b, m.anyCross(m.L), false, m.H - 1)
                         .round(b * m.H, Crossing{}, false, m.L - 1)
                         .total();
}
// Rooted: a chain across hosts from the root's host, then a chain within each host, pipelined
// together; a host's leader forwards each piece twice (the next host, its own chain).
double hierRootedCost(const CostModel& m, double S, bool reduce) {
  if (m.H <= 1 || m.L <= 1)
    return m.chain(S, m.n - 1, m.anyCross(1), m.pieceService(S, 1, reduce), reduce);
  // The leader's two sends go out on different resources (NIC, port): the slower one paces.
  const double per = m.pieceService(S, 1, reduce);
  return m.chain(S, m.H - 1, m.anyCross(1), per, reduce) +
         m.chain(S, m.L - 1, Crossing{}, 0, reduce);
}
double hierBroadcastCost(const CostModel& m, double S) { return hierRootedCost(m, S, false); }
double hierReduceCost(const CostModel& m, double S) { return hierRootedCost(m, S, true); }
double hierAllToAllCost(const CostModel& m, double b) {
  if (m.H <= 1 || m.L <= 1) return oneLevelCost(Collective::kAllToAll, "pairwise", m, b);
  return Pipe(m)
      .round(b * m.H, Crossing{}, false, m.L - 1)
      .round(b * m.L, m.anyCross(m.L), false, m.H - 1)
      .round(b * m.H, Crossing{}, false, m.L - 1)
      .total();
}

}  // namespace

void appendHierarchicalAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"hierarchical", Collective::kAllReduce,
                    "two-level: ring reduce-scatter within each host, ring all-reduce of each "
                    "shard across hosts (all local ranks at once), ring all-gather within each "
                    "host (Jia et al. 2018; Horovod, NCCL multi-node)",
                    buildHierarchicalAllReduce, supportsHierarchical, hierAllReduceCost});
  table->push_back({"hierarchical", Collective::kReduceScatter,
                    "two-level: ring reduce-scatter within each host of the blocks for each "
                    "local index, then ring reduce-scatter across hosts",
                    buildHierarchicalReduceScatter, supportsHierarchical, hierReduceScatterCost});
  table->push_back({"hierarchical", Collective::kAllGather,
                    "two-level: ring all-gather across hosts among ranks of one local index, "
                    "then ring all-gather within each host",
                    buildHierarchicalAllGather, supportsHierarchical, hierAllGatherCost});
  table->push_back({"hierarchical", Collective::kBroadcast,
                    "two-level pipelined chains: root to one rank per host, then down each "
                    "host (MPICH's SMP-aware broadcast)",
                    buildHierarchicalBroadcast, supportsHierarchical, hierBroadcastCost});
  table->push_back({"hierarchical", Collective::kReduce,
                    "two-level pipelined chains: up each host to its leader, then across "
                    "hosts to the root (MPICH's SMP-aware reduce)",
                    buildHierarchicalReduce, supportsHierarchical, hierReduceCost});
  table->push_back({"hierarchical", Collective::kAllToAll,
                    "node-aware: local exchange gathers what each host sends to local index i "
                    "at its rank i, then one aggregated message per host pair and local index "
                    "(DeepSpeed-MoE, Tutel)",
                    buildHierarchicalAllToAll, supportsHierarchical, hierAllToAllCost});
}

}  // namespace braid
