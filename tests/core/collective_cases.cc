#include "collective_cases.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <set>
#include <vector>

#include "test_scale.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr braidDataType_t kAllTypes[] = {
    braidInt8,    braidUint8,   braidInt32,   braidUint32,   braidInt64,      braidUint64,
    braidFloat16, braidFloat32, braidFloat64, braidBfloat16, braidFloat8e4m3, braidFloat8e5m2};
constexpr unsigned char kSentinel = 0xEE;

// Byte b of element e of rank r's send buffer, for collectives that only move data.
unsigned char dataByte(int r, size_t e, size_t b) {
  return static_cast<unsigned char>((r + 1) * 37 + e * 11 + b * 101 + (e >> 8) * 7);
}
void fillData(int r, size_t elems, size_t es, char* buf) {
  for (size_t e = 0; e < elems; ++e)
    for (size_t b = 0; b < es; ++b) buf[e * es + b] = static_cast<char>(dataByte(r, e, b));
}
void expectData(int r, size_t e, size_t es, char* out) {
  for (size_t b = 0; b < es; ++b) out[b] = static_cast<char>(dataByte(r, e, b));
}

// The cases' buffers: the heap's, or with BRAID_TEST_SHARED_BUFFERS=1 braidMemAllocHost's, so
// that the ranks of a host read each other's pieces in place (meson test matrix_shared_buffers).
// Every buffer is its own allocation, freed after its case: peers keep remapping.
template <typename T>
struct CaseAllocator {
  using value_type = T;
  CaseAllocator() = default;
  template <typename U>
  CaseAllocator(const CaseAllocator<U>&) {}
  static bool shared() {
    static const bool on = [] {
      const char* v = std::getenv("BRAID_TEST_SHARED_BUFFERS");
      return v && std::strcmp(v, "1") == 0;
    }();
    return on;
  }
  T* allocate(size_t n) {
    if (!shared()) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = nullptr;
    if (braidMemAllocHost(&p, n * sizeof(T)) != braidSuccess || !p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    if (shared())
      braidMemFreeHost(p);
    else
      ::operator delete(p);
  }
  bool operator==(const CaseAllocator&) const { return true; }
};
using Bytes = std::vector<char, CaseAllocator<char>>;

// All-to-all-v's counts: rank i sends cnt(i, j) elements to rank j; some are zero.
size_t a2avCount(int i, int j, size_t count) {
  return count == 0 ? 0 : static_cast<size_t>((i * 3 + j * 5 + 1) % 4) * count / 3;
}

std::string mismatch(const char* what, const Bytes& got, const Bytes& want, size_t offset,
                     size_t elems, size_t es) {
  long long bad =
      firstMismatch(got.data() + offset * es, want.data() + offset * es, elems * es, es);
  if (bad < 0) return "";
  return std::string(what) + ": wrong element " + std::to_string(offset + bad);
}

}  // namespace

std::string Case::describe(int nranks) const {
  return std::string(algo->name) + " " + collectiveName(algo->coll) + " nranks " +
         std::to_string(nranks) + " " + braidTypeName(dtype) +
         (isReducing(algo->coll) ? std::string(" ") + braidOpName(op) : "") + " count " +
         std::to_string(count) + (inPlace ? " in-place" : " out-of-place") +
         (isRooted(algo->coll) ? " root " + std::to_string(root) : "");
}

bool parseRowShare(const char* text, RowShare* share) {
  if (text == nullptr) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long index = std::strtoul(text, &end, 10);
  if (end == text || *end != '/' || !std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  const char* rest = end + 1;
  const unsigned long of = std::strtoul(rest, &end, 10);
  if (end == rest || *end != '\0' || !std::isdigit(static_cast<unsigned char>(rest[0])) ||
      errno != 0 || of == 0 || of > 1024 || index >= of)
    return false;
  share->index = static_cast<unsigned>(index);
  share->of = static_cast<unsigned>(of);
  return true;
}

std::vector<Case> matrixCases(int nranks, Rows rows, RowShare share) {
  if (rows == Rows::kShare || rows == Rows::kSampledShare) {
    const std::vector<Case> pool =
        matrixCases(nranks, rows == Rows::kShare ? Rows::kEvery : Rows::kSampled);
    auto isBase = [](const Case& c) {
      return c.count == 4097 && c.dtype == braidFloat32 && c.op == braidSum;
    };
    std::vector<bool> base(pool.size());
    std::set<const AlgorithmInfo*> withBase;  // one pass: the pool has thousands of rows
    for (size_t i = 0; i < pool.size(); ++i)
      if ((base[i] = isBase(pool[i]))) withBase.insert(pool[i].algo);
    // An algorithm row without such a case (none today) keeps its first one.
    for (size_t i = 0; i < pool.size(); ++i)
      if (!withBase.count(pool[i].algo) && (i == 0 || pool[i - 1].algo != pool[i].algo))
        base[i] = true;
    // A row outside the base belongs to share (splitmix64 of its position among them) mod `of`:
    // the shares split those rows, and each takes every dtype, op, placement and root alike
    // (a plain stride matched the loops' periods: share 3 of 16 took only in-place rows).
    auto shareOf = [&](uint64_t position) {
      uint64_t z = position + 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return static_cast<unsigned>((z ^ (z >> 31)) % share.of);
    };
    std::vector<Case> out;
    uint64_t position = 0;
    for (size_t i = 0; i < pool.size(); ++i)
      if (base[i] || shareOf(position++) == share.index) out.push_back(pool[i]);
    return out;
  }
  const bool sampled = rows == Rows::kSampled;
  std::vector<Case> out;
  const size_t n = static_cast<size_t>(nranks);
  std::vector<size_t> counts = {0, 1, n > 1 ? n - 1 : 2, 4097};
  size_t rotate = 0;
  for (const AlgorithmInfo& a : algorithms()) {
    const bool reducing = isReducing(a.coll);
    std::vector<braidDataType_t> types(std::begin(kAllTypes), std::end(kAllTypes));
    std::vector<braidRedOp_t> ops =
        reducing ? std::vector<braidRedOp_t>(std::begin(kOps), std::end(kOps))
                 : std::vector<braidRedOp_t>{braidSum};
    const std::vector<braidRedOp_t> allOps = ops;  // the 1M+3 row rotates through these
    if (rows != Rows::kEvery) {
      types = {braidFloat32, braidInt8, braidBfloat16};
      if (rows == Rows::kTypes) types.push_back(braidFloat64);
      ops = reducing ? std::vector<braidRedOp_t>{braidSum, braidAvg, braidMax}
                     : std::vector<braidRedOp_t>{braidSum};
    }
    std::vector<int> roots = {0};
    if (isRooted(a.coll) && nranks > 1) roots.push_back(nranks - 1);
    std::vector<bool> places = {false};
    if (hasInPlace(a.coll)) places.push_back(true);
    auto add = [&](braidDataType_t t, braidRedOp_t op, size_t count) {
      for (bool ip : places)
        for (int root : roots) {
          Case c{&a, t, op, count, ip, root};
          CollArgs args;
          args.coll = a.coll;
          args.count = count;
          args.dtype = t;
          args.op = op;
          args.root = root;
          args.nranks = nranks;
          if (unsupportedReason(a, args)) continue;  // the table says it cannot: not a case
          out.push_back(c);
        }
    };
    for (size_t count : counts) {
      if (sampled && count != 1 && count != 4097) continue;
      for (braidDataType_t t : types)
        for (braidRedOp_t op : ops) add(t, op, count);
    }
    if (!sampled && a.coll != Collective::kBarrier) {
      // 1M+3 elements in all (per rank block for the collectives whose buffers grow with
      // nranks), one dtype and op per row, rotating through the lists; 64K+3 under a
      // sanitizer (test_scale.h).
      const size_t big = reducedSizes() ? (1u << 16) + 3 : (1u << 20) + 3;
      bool grows = a.coll != Collective::kAllReduce && a.coll != Collective::kBroadcast &&
                   a.coll != Collective::kReduce;
      ++rotate;
      add(kAllTypes[rotate % std::size(kAllTypes)], allOps[rotate % allOps.size()],
          grows ? (big + n - 1) / n : big);
    }
  }
  return out;
}

std::string runCase(const Case& c, braidComm_t comm, int rank, int nranks, braidStream_t stream) {
  const Collective coll = c.algo->coll;
  // On a stream the call only queues; its result is the stream's.
  auto finish = [stream](braidResult_t r) {
    return r == braidSuccess && stream ? braidStreamSynchronize(stream) : r;
  };
  if (braidCommSetAlgorithm(comm, collectiveName(coll), c.algo->name) != braidSuccess)
    return c.describe(nranks) + ": cannot force the algorithm: " + braidGetLastError(comm);
  const size_t es = braidTypeSize(c.dtype);
  const size_t n = static_cast<size_t>(nranks), count = c.count;
  const bool isRoot = rank == c.root;
  Bytes send, recv, want;
  braidResult_t res = braidSuccess;
  std::string bad;
  auto fillReduce = [&](size_t elems) {
    send.assign(elems * es + 1, 0);
    fillInput(c.dtype, c.op, rank, elems, send.data());
  };
  switch (coll) {
    case Collective::kAllReduce: {
      fillReduce(count);
      recv.assign(count * es + 1, static_cast<char>(kSentinel));
      want.assign(count * es + 1, 0);
      expectedAllReduceRange(c.dtype, c.op, nranks, 0, count, want.data());
      if (c.inPlace) recv = send;
      res = finish(braidAllReduce(c.inPlace ? recv.data() : send.data(), recv.data(), count,
                                  c.dtype, c.op, comm, stream));
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, count, es);
      break;
    }
    case Collective::kReduceScatter: {
      fillReduce(n * count);
      want.assign(count * es + 1, 0);
      expectedAllReduceRange(c.dtype, c.op, nranks, rank * count, count, want.data());
      if (c.inPlace) {
        res = finish(braidReduceScatter(send.data(), send.data() + rank * count * es, count,
                                        c.dtype, c.op, comm, stream));
        recv.assign(send.begin() + rank * count * es, send.begin() + (rank + 1) * count * es);
        recv.push_back(0);
      } else {
        recv.assign(count * es + 1, static_cast<char>(kSentinel));
        res = finish(
            braidReduceScatter(send.data(), recv.data(), count, c.dtype, c.op, comm, stream));
      }
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, count, es);
      break;
    }
    case Collective::kAllGather: {
      recv.assign(n * count * es + 1, static_cast<char>(kSentinel));
      want.assign(n * count * es + 1, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i)
          expectData(static_cast<int>(j), i, es, &want[(j * count + i) * es]);
      if (c.inPlace) {
        fillData(rank, count, es, recv.data() + rank * count * es);
        res = finish(braidAllGather(recv.data() + rank * count * es, recv.data(), count, c.dtype,
                                    comm, stream));
      } else {
        send.assign(count * es + 1, 0);
        fillData(rank, count, es, send.data());
        res = finish(braidAllGather(send.data(), recv.data(), count, c.dtype, comm, stream));
      }
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, n * count, es);
      break;
    }
    case Collective::kBroadcast: {
      recv.assign(count * es + 1, static_cast<char>(kSentinel));
      want.assign(count * es + 1, 0);
      for (size_t i = 0; i < count; ++i) expectData(c.root, i, es, &want[i * es]);
      const void* sp = nullptr;
      if (isRoot) {
        send.assign(count * es + 1, 0);
        fillData(rank, count, es, send.data());
        if (c.inPlace) recv = send;
        sp = c.inPlace ? recv.data() : send.data();
      }
      res = finish(braidBroadcast(sp, recv.data(), count, c.dtype, c.root, comm, stream));
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, count, es);
      break;
    }
    case Collective::kReduce: {
      fillReduce(count);
      want.assign(count * es + 1, 0);
      expectedAllReduceRange(c.dtype, c.op, nranks, 0, count, want.data());
      Bytes pristine = send;
      if (isRoot) {
        recv.assign(count * es + 1, static_cast<char>(kSentinel));
        if (c.inPlace) recv = send;
      }
      const void* sp = isRoot && c.inPlace ? recv.data() : send.data();
      res = finish(braidReduce(sp, isRoot ? recv.data() : nullptr, count, c.dtype, c.op, c.root,
                               comm, stream));
      if (res == braidSuccess && isRoot) bad = mismatch("root recv", recv, want, 0, count, es);
      if (res == braidSuccess && !isRoot && bad.empty())
        bad = mismatch("send buffer modified", send, pristine, 0, count, es);
      break;
    }
    case Collective::kAllToAll: {
      send.assign(n * count * es + 1, 0);
      fillData(rank, n * count, es, send.data());
      recv.assign(n * count * es + 1, static_cast<char>(kSentinel));
      want.assign(n * count * es + 1, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i)
          expectData(static_cast<int>(j), rank * count + i, es, &want[(j * count + i) * es]);
      res = finish(braidAllToAll(send.data(), recv.data(), count, c.dtype, comm, stream));
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, n * count, es);
      break;
    }
    case Collective::kAllToAllv: {
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      size_t sTotal = 0, rTotal = 0;
      for (size_t j = 0; j < n; ++j) {
        sc[j] = a2avCount(rank, static_cast<int>(j), count);
        rc[j] = a2avCount(static_cast<int>(j), rank, count);
        sd[j] = sTotal;
        rd[j] = rTotal;
        sTotal += sc[j] + 1;  // one-element gaps: displacements matter
        rTotal += rc[j] + 1;
      }
      send.assign(sTotal * es + 1, 0);
      fillData(rank, sTotal, es, send.data());
      recv.assign(rTotal * es + 1, static_cast<char>(kSentinel));
      want = recv;
      for (size_t j = 0; j < n; ++j) {
        // Where rank j put the block for this rank: its displacement for peer `rank`.
        size_t jd = 0;
        for (int k = 0; k < rank; ++k) jd += a2avCount(static_cast<int>(j), k, count) + 1;
        for (size_t i = 0; i < rc[j]; ++i)
          expectData(static_cast<int>(j), jd + i, es, &want[(rd[j] + i) * es]);
      }
      res = finish(braidAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(),
                                  rd.data(), c.dtype, comm, stream));
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, rTotal, es);
      break;
    }
    case Collective::kGather: {
      send.assign(count * es + 1, 0);
      fillData(rank, count, es, send.data());
      if (isRoot) {
        recv.assign(n * count * es + 1, static_cast<char>(kSentinel));
        want.assign(n * count * es + 1, 0);
        for (size_t j = 0; j < n; ++j)
          for (size_t i = 0; i < count; ++i)
            expectData(static_cast<int>(j), i, es, &want[(j * count + i) * es]);
      }
      res = finish(braidGather(send.data(), isRoot ? recv.data() : nullptr, count, c.dtype, c.root,
                               comm, stream));
      if (res == braidSuccess && isRoot) bad = mismatch("root recv", recv, want, 0, n * count, es);
      break;
    }
    case Collective::kScatter: {
      if (isRoot) {
        send.assign(n * count * es + 1, 0);
        fillData(rank, n * count, es, send.data());
      }
      recv.assign(count * es + 1, static_cast<char>(kSentinel));
      want.assign(count * es + 1, 0);
      for (size_t i = 0; i < count; ++i) expectData(c.root, rank * count + i, es, &want[i * es]);
      res = finish(braidScatter(isRoot ? send.data() : nullptr, recv.data(), count, c.dtype, c.root,
                                comm, stream));
      if (res == braidSuccess) bad = mismatch("recv", recv, want, 0, count, es);
      break;
    }
    case Collective::kBarrier:
      res = finish(braidBarrier(comm, stream));
      break;
  }
  if (res != braidSuccess)
    return c.describe(nranks) + ": " + braidGetErrorString(res) + ": " + braidGetLastError(comm);
  return bad.empty() ? "" : c.describe(nranks) + ": " + bad;
}

}  // namespace braid::test
