// Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
// clusters of workstations", JPDC 2009; the algorithm NCCL's ring uses).
//
// The vector is cut into nranks chunks, each cut again into pieces of about pieceElems
// so consecutive steps pipeline. Rank r sends to r+1 and receives from r-1.
//   Reduce-scatter, steps s = 0 .. n-2: send chunk (r-s) (at s = 0 straight from the send
//   buffer, later the partial sum just computed), receive the partial sum of chunk
//   (r-s-1) and add the local contribution into the receive buffer. After n-1 steps rank
//   r holds the full reduction of chunk (r+1). For AVG the last addition also divides.
//   All-gather, steps s = 0 .. n-2: send chunk (r+1-s), receive chunk (r-s) into place.
// Each rank sends 2(n-1)/n of the vector: the bandwidth lower bound.
#include "algorithms/schedule.h"

namespace braid {

namespace {

void buildRingAllReduce(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return;
  if (n == 1) {
    Step s;
    s.kind = StepKind::kCopy;
    s.src = {BufferId::kSend, 0};
    s.dst = {BufferId::kRecv, 0};
    s.count = a.count;
    out->add(s);
    return;
  }
  const int right = (r + 1) % n, left = (r - 1 + n) % n;
  auto chunk = [&](int c) { return ((c % n) + n) % n; };
  const size_t maxChunk = (a.count + n - 1) / n;
  const size_t pieces = std::max<size_t>(1, (maxChunk + a.pieceElems - 1) / a.pieceElems);
  // Piece p of chunk c: [begin, begin + len) in elements.
  auto piece = [&](int c, size_t p, size_t* begin, size_t* len) {
    size_t cb = partStart(a.count, n, c), ce = partStart(a.count, n, c + 1);
    size_t pb = partStart(ce - cb, pieces, p), pe = partStart(ce - cb, pieces, p + 1);
    *begin = cb + pb;
    *len = pe - pb;
  };
  // Index of the step that last wrote / sent each (chunk, piece); -1 when none.
  std::vector<int32_t> lastReduce(static_cast<size_t>(n) * pieces, -1);
  std::vector<int32_t> rsSend(static_cast<size_t>(n) * pieces, -1);
  std::vector<int32_t> agRecv(static_cast<size_t>(n) * pieces, -1);
  auto at = [&](int c, size_t p) { return static_cast<size_t>(c) * pieces + p; };

  for (int s = 0; s < n - 1; ++s) {
    const int sc = chunk(r - s), rc = chunk(r - s - 1);
    for (size_t p = 0; p < pieces; ++p) {
      size_t b, len;
      piece(sc, p, &b, &len);
      if (len > 0) {
        Step st;
        st.kind = StepKind::kSend;
        st.peer = right;
        st.src = {s == 0 ? BufferId::kSend : BufferId::kRecv, b};
        st.count = len;
        st.deps[0] = lastReduce[at(sc, p)];
        rsSend[at(sc, p)] = out->add(st);
      }
      piece(rc, p, &b, &len);
      if (len > 0) {
        Step st;
        st.kind = StepKind::kRecvReduce;
        st.peer = left;
        st.src = {BufferId::kSend, b};
        st.dst = {BufferId::kRecv, b};
        st.count = len;
        st.divisor = (a.op == braidAvg && s == n - 2) ? n : 1;
        lastReduce[at(rc, p)] = out->add(st);
      }
    }
  }
  for (int s = 0; s < n - 1; ++s) {
    const int sc = chunk(r + 1 - s), rc = chunk(r - s);
    for (size_t p = 0; p < pieces; ++p) {
      size_t b, len;
      piece(sc, p, &b, &len);
      if (len > 0) {
        Step st;
        st.kind = StepKind::kSend;
        st.peer = right;
        st.src = {BufferId::kRecv, b};
        st.count = len;
        st.deps[0] = s == 0 ? lastReduce[at(sc, p)] : agRecv[at(sc, p)];
        out->add(st);
      }
      piece(rc, p, &b, &len);
      if (len > 0) {
        Step st;
        st.kind = StepKind::kRecv;
        st.peer = left;
        st.dst = {BufferId::kRecv, b};
        st.count = len;
        st.deps[0] = rsSend[at(rc, p)];  // in place, the old value may still be unsent
        agRecv[at(rc, p)] = out->add(st);
      }
    }
  }
}

}  // namespace

void appendRingAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"ring", Collective::kAllReduce,
                    "ring reduce-scatter then ring all-gather, chunked and pipelined; sends "
                    "2(n-1)/n of the vector, the bandwidth optimum (Patarasuk & Yuan 2009)",
                    buildRingAllReduce, nullptr});
}

}  // namespace braid
