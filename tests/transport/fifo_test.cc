// The FIFO a connection is made of (transport/fifo.h), on its own: two FifoConnections over
// two heap FIFOs in one thread, each end read by the other. Every piece size that matters to
// the cell's layout (empty, inline up to Fifo::kInlineBytes, just past it, a whole slot) goes
// through several laps of the ring of cells, with the consumer waiting on the FIFO's head
// (a FIFO the network proxy fills) and on each cell's turn (pollsCells: a rank of this host
// fills it), and comes out with its bytes, sequence number and contents unchanged; then the
// same with the two ends on two threads, and a small piece that carries a source pointer.
#include "transport/fifo.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

namespace braid {
namespace {

constexpr int kSlots = 4;
constexpr size_t kSlotBytes = 256;

struct Pair {
  LocalFifo aToB{kSlots, kSlotBytes};
  LocalFifo bToA{kSlots, kSlotBytes};
  Doorbell bellA, bellB;
  std::unique_ptr<FifoConnection> a, b;
  explicit Pair(bool pollsCells) {
    a = std::make_unique<FifoConnection>("a", aToB.fifo(), kSlots, kSlotBytes, bToA.fifo(), kSlots,
                                         kSlotBytes, &bellB);
    b = std::make_unique<FifoConnection>("b", bToA.fifo(), kSlots, kSlotBytes, aToB.fifo(), kSlots,
                                         kSlotBytes, &bellA);
    if (pollsCells) {
      a->pollsCells();
      b->pollsCells();
    }
  }
};

std::vector<unsigned char> pattern(size_t bytes, unsigned seed) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(seed * 31 + i * 7 + 1);
  return v;
}

// A piece copied by the connection (memcpy: the executor's host copies) or, staged, through a
// copier into the slot it lends (the device path's staging: SendPiece::copy). Whether a slot
// was free; *taken the bytes that went.
Connection* gWatched = nullptr;  // a staged copy finds no piece here while it writes (if set)
braidResult_t stagedCopy(void* dst, const void* src, size_t bytes) {
  if (gWatched) {
    RecvPiece none;
    EXPECT_FALSE(gWatched->recv(&none)) << "a piece before its copy is done";
  }
  std::memcpy(dst, src, bytes);
  return braidSuccess;
}
bool sendCopy(Connection& c, const void* src, size_t bytes, uint64_t seq, size_t* taken,
              bool staged = false) {
  Sent sent;
  EXPECT_EQ(c.send({src, bytes, seq, SendKind::kCopy, staged ? stagedCopy : nullptr}, &sent),
            braidSuccess);
  *taken = sent.taken;
  return sent.sent;
}
// The next piece's bytes (nullptr: none yet), its size and sequence number.
const void* peek(Connection& c, size_t* bytes, uint64_t* seq) {
  RecvPiece piece;
  if (!c.recv(&piece)) return nullptr;
  *bytes = piece.bytes;
  *seq = piece.seq;
  return piece.data;
}

// Whether p lies in the header line of one of the FIFO's cells.
bool inHeaderLine(Fifo* f, const void* p) {
  for (int i = 0; i < kSlots; ++i) {
    const char* cell = reinterpret_cast<const char*>(f->cell(i, kSlotBytes));
    const char* at = static_cast<const char*>(p);
    if (at >= cell && at < cell + kFifoLine) return true;
  }
  return false;
}

class FifoModes : public ::testing::TestWithParam<bool> {};

// Sizes around the inline bound, copied by the connection (the executor's host copies) and
// staged through a copier (the device path's), three laps of the cells each.
TEST_P(FifoModes, PiecesKeepBytesSeqAndContents) {
  Pair p(GetParam());
  const std::vector<size_t> sizes = {
      0, 1, 8, Fifo::kInlineBytes - 1, Fifo::kInlineBytes, Fifo::kInlineBytes + 1, 64, kSlotBytes};
  unsigned n = 0;
  for (int lap = 0; lap < 3; ++lap) {
    for (size_t bytes : sizes) {
      for (bool viaCommit : {false, true}) {
        const std::vector<unsigned char> sent = pattern(bytes, n);
        const uint64_t seq = (uint64_t{0xabcd} << 32) | n;
        size_t taken = 99;
        ASSERT_TRUE(sendCopy(*p.a, sent.data(), bytes, seq, &taken, viaCommit));
        ASSERT_EQ(taken, bytes);
        size_t gotBytes = 0;
        uint64_t gotSeq = 0;
        const void* data = peek(*p.b, &gotBytes, &gotSeq);
        ASSERT_NE(data, nullptr) << "piece " << n << " of " << bytes << " bytes";
        EXPECT_EQ(gotBytes, bytes);
        EXPECT_EQ(gotSeq, seq);
        EXPECT_EQ(inHeaderLine(p.aToB.fifo(), data), bytes <= Fifo::kInlineBytes)
            << bytes << " bytes";
        if (bytes) {
          EXPECT_EQ(std::memcmp(data, sent.data(), bytes), 0) << bytes << " bytes";
        }
        p.b->release();
        size_t none = 0;
        EXPECT_EQ(peek(*p.b, &none, &gotSeq), nullptr) << "a piece after the last one sent";
        ++n;
      }
    }
  }
}

// A slot being staged into is not a piece until its copy is done; the FIFO holds kSlots pieces, no
// more, and takes one more for each released.
TEST_P(FifoModes, NothingBeforeCommitAndAtMostSlotsInFlight) {
  Pair p(GetParam());
  size_t bytes = 0;
  uint64_t seq = 0;
  const std::vector<unsigned char> first(16, 7);
  size_t taken = 0;
  gWatched = p.b.get();
  ASSERT_TRUE(sendCopy(*p.a, first.data(), first.size(), 1, &taken, true));
  gWatched = nullptr;
  const std::vector<unsigned char> small = pattern(8, 3);
  for (int i = 1; i < kSlots; ++i) ASSERT_TRUE(sendCopy(*p.a, small.data(), 8, 1 + i, &taken));
  EXPECT_FALSE(sendCopy(*p.a, small.data(), 8, 99, &taken)) << "a fifth piece in four cells";
  for (int i = 0; i < kSlots; ++i) {
    const void* data = peek(*p.b, &bytes, &seq);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(seq, static_cast<uint64_t>(1 + i));
    EXPECT_EQ(bytes, i == 0 ? 16u : 8u);
    p.b->release();
    ASSERT_TRUE(sendCopy(*p.a, small.data(), 8, 10 + i, &taken)) << "after release " << i;
  }
}

// A copy larger than a slot goes in slot-sized pieces: a send takes what fits.
TEST_P(FifoModes, CopyTakesAtMostASlot) {
  Pair p(GetParam());
  const std::vector<unsigned char> big = pattern(kSlotBytes * 2 + 5, 9);
  size_t taken = 0, bytes = 0;
  uint64_t seq = 0;
  ASSERT_TRUE(sendCopy(*p.a, big.data(), big.size(), 5, &taken));
  EXPECT_EQ(taken, kSlotBytes);
  const void* data = peek(*p.b, &bytes, &seq);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(bytes, kSlotBytes);
  EXPECT_EQ(std::memcmp(data, big.data(), kSlotBytes), 0);
}

// A producer thread and a consumer thread on the two ends, as two ranks of a host run them:
// what the consumer reads once it sees a piece (its turn or head, with acquire) is what the
// producer wrote before publishing it (with release), for pieces inline and after the
// header, lap after lap of the cells. (tsan's build checks the ordering as well.)
TEST_P(FifoModes, TwoThreadsSeeEveryPieceWhole) {
  Pair p(GetParam());
  constexpr unsigned kPieces = 20000;
  auto sizeOf = [](unsigned i) -> size_t {
    const size_t sizes[] = {0, 8, Fifo::kInlineBytes, Fifo::kInlineBytes + 1, kSlotBytes};
    return sizes[i % 5];
  };
  std::thread producer([&] {
    for (unsigned i = 0; i < kPieces; ++i) {
      const std::vector<unsigned char> sent = pattern(sizeOf(i), i);
      size_t taken = 0;
      while (!sendCopy(*p.a, sent.data(), sent.size(), i, &taken)) std::this_thread::yield();
    }
  });
  unsigned wrong = 0;
  for (unsigned i = 0; i < kPieces; ++i) {
    size_t bytes = 0;
    uint64_t seq = 0;
    const void* data;
    while (!(data = peek(*p.b, &bytes, &seq))) std::this_thread::yield();
    const std::vector<unsigned char> want = pattern(sizeOf(i), i);
    if (seq != i || bytes != want.size() || (bytes && std::memcmp(data, want.data(), bytes)))
      ++wrong;
    p.b->release();
  }
  producer.join();
  EXPECT_EQ(wrong, 0u) << "pieces that arrived with another seq, size or contents";
}

// A small piece with a source pointer is not inline, whatever its size: a cell the network
// proxy received from an in-place send carries the far sender's src, and its payload after
// the header (the proxy sends the user's bytes behind the header line).
TEST(Fifo, SmallPieceWithASourceIsAfterItsHeader) {
  LocalFifo f(kSlots, kSlotBytes);
  Doorbell bell;
  LocalFifo unused(kSlots, kSlotBytes);
  FifoConnection consumer("consumer", unused.fifo(), kSlots, kSlotBytes, f.fifo(), kSlots,
                          kSlotBytes, &bell);
  Fifo::CellHeader* c = f.fifo()->cell(0, kSlotBytes);
  const std::vector<unsigned char> sent = pattern(8, 4);
  c->seq = 42;
  c->bytes = 8;
  c->src = &sent;  // an address in the far sender, meaningless here
  std::memset(c->in.payload, 0xee, sizeof(c->in.payload));
  std::memcpy(c + 1, sent.data(), sent.size());
  f.fifo()->head.store(1, std::memory_order_release);
  size_t bytes = 0;
  uint64_t seq = 0;
  RecvPiece piece;
  ASSERT_TRUE(consumer.recv(&piece));
  const void* data = piece.data;
  bytes = piece.bytes;
  seq = piece.seq;
  ASSERT_EQ(data, static_cast<const void*>(c + 1));
  EXPECT_EQ(bytes, 8u);
  EXPECT_EQ(seq, 42u);
  EXPECT_EQ(std::memcmp(data, sent.data(), sent.size()), 0);
  EXPECT_EQ(piece.where, PieceAt::kHere);
}

INSTANTIATE_TEST_SUITE_P(Consumer, FifoModes, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "PollsCells" : "PollsHead");
                         });

}  // namespace
}  // namespace braid
