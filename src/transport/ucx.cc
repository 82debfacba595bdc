// UCX backend: UCP tag matching on one worker per rank.
//
// One ucp_context (TAG + WAKEUP) and one ucp_worker per backend. A rank's handle is its
// worker address in hex; connect() creates an endpoint to every remote peer straight from
// that address (no listener, no accept), flushes them so wireup is done, and then trades a
// small "ready" message with each peer, so that when connect() returns on any rank, every
// peer's endpoint to it is wired too and nothing waits on this rank's progress before the
// proxy starts.
//
// Pieces travel as tagged messages whose tag is (sender rank << 40 | piece number), matched
// with a full mask, so piece k from rank p lands in exactly irecv(p, k), whatever order
// either side posts in. Requests are UCP-allocated; each is wrapped in a Req of ours that
// the completion callback fills in, and test() reads. Endpoints use peer error handling
// (UCP_ERR_HANDLING_MODE_PEER), so a lost peer fails the sends to it instead of hanging,
// and peerClosed() reports it once none of its pieces waits unmatched; receives from it
// just stay pending, as that peer may simply have finished first. UCX 1.13 offers no shared-memory
// transport in that mode, so peers on one host (only with BRAID_TRANSPORT=ucx) talk over tcp or IB;
// Braid's own shm serves them otherwise.
//
// UCX's own environment (UCX_TLS, UCX_NET_DEVICES, UCX_RNDV_THRESH, ...) is read by
// ucp_config_read and never overridden here.
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "transport/net.h"

#ifdef BRAID_HAVE_UCX

#include <poll.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace braid {
namespace {

constexpr int kPieceBits = 40;
constexpr uint64_t kPieceMask = (uint64_t{1} << kPieceBits) - 1;
constexpr uint64_t kFullMask = ~uint64_t{0};
// The rank field's top value is kept for connect()'s ready messages (then carrying the
// sender's rank in the piece field), so ranks go up to 2^24 - 2.
constexpr uint64_t kReadyRank = (uint64_t{1} << 24) - 1;

uint64_t pieceTag(uint64_t senderRank, uint64_t piece) {
  return senderRank << kPieceBits | (piece & kPieceMask);
}

// How long the destructor waits for cancelled requests and endpoint closes.
constexpr double kTeardownSec = 10.0;

enum class Kind { kSend, kRecv, kFlush };

struct Req {
  Kind kind = Kind::kSend;
  int peer = -1;
  uint64_t piece = 0;
  size_t capacity = 0;
  size_t bytes = 0;
  void* ucp = nullptr;  // UCP's request, or nullptr when it completed at once
  bool done = false;
  bool inUse = false;
  ucs_status_t status = UCS_OK;
  ucp_dt_iov_t iov[2];  // isendGather's two parts: UCX reads the list until completion
};

struct Peer {
  int rank = -1;
  ucp_ep_h ep = nullptr;
  ucs_status_t error = UCS_OK;  // set by the endpoint's error handler
  std::string why;              // peerClosed()'s answer once error is set
};

std::string toHex(const void* data, size_t len) {
  static const char digits[] = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string s(len * 2, '0');
  for (size_t i = 0; i < len; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

bool fromHex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.empty() || s.size() % 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->resize(s.size() / 2);
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

void sendDone(void* /*request*/, ucs_status_t status, void* user) {
  auto* r = static_cast<Req*>(user);
  r->status = status;
  r->done = true;
}

void recvDone(void* /*request*/, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<Req*>(user);
  r->status = status;
  if (info) r->bytes = info->length;
  r->done = true;
}

void epError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* p = static_cast<Peer*>(arg);
  if (p->error != UCS_OK) return;
  p->error = status;
  p->why = "rank " + std::to_string(p->rank) +
           " closed its UCX connection or was lost (its process exited or destroyed the "
           "communicator): " +
           ucs_status_string(status);
}

class UcxBackend final : public NetBackend {
 public:
  UcxBackend(int rank, int nranks) : rank_(rank), nranks_(nranks), peers_(nranks) {
    for (int p = 0; p < nranks; ++p) peers_[p].rank = p;
  }

  ~UcxBackend() override {
    if (worker_) teardown();
    if (address_) ucp_worker_release_address(worker_, address_);
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
  }

  braidResult_t init() {
    ucp_config_t* cfg = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);  // honours UCX_* variables
    if (st != UCS_OK)
      return fail(braidSystemError, "UCX: reading its configuration failed: %s",
                  ucs_status_string(st));
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.estimated_num_eps = static_cast<size_t>(nranks_);
    st = ucp_init(&params, cfg, &context_);
    ucp_config_release(cfg);
    if (st != UCS_OK)
      return fail(braidSystemError,
                  "UCX: ucp_init failed: %s (check UCX_TLS / UCX_NET_DEVICES, or use "
                  "BRAID_TRANSPORT=tcp)",
                  ucs_status_string(st));
    // connect() runs on the rank's thread, everything after it on the proxy thread: one
    // thread at a time, which is what SERIALIZED promises.
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(context_, &wp, &worker_);
    if (st != UCS_OK)
      return fail(braidSystemError, "UCX: ucp_worker_create failed: %s", ucs_status_string(st));
    st = ucp_worker_get_address(worker_, &address_, &addressLen_);
    if (st != UCS_OK)
      return fail(braidSystemError, "UCX: ucp_worker_get_address failed: %s",
                  ucs_status_string(st));
    handle_ = toHex(address_, addressLen_);
    st = ucp_worker_get_efd(worker_, &efd_);
    if (st != UCS_OK) {
      BRAID_INFO("NET", "UCX: no worker event fd (%s); the proxy polls", ucs_status_string(st));
      efd_ = -1;
    }
    return braidSuccess;
  }

  const char* name() const override { return "ucx"; }
  std::string handle() const override { return handle_; }

  braidResult_t connect(const std::vector<std::string>& handles, const std::vector<char>& remote,
                        Deadline deadline) override {
    if (static_cast<int>(handles.size()) != nranks_ || static_cast<int>(remote.size()) != nranks_)
      return fail(braidInternalError, "UCX connect: %zu handles and %zu flags for %d ranks",
                  handles.size(), remote.size(), nranks_);
    std::vector<int> targets;
    for (int p = 0; p < nranks_; ++p)
      if (remote[p] && p != rank_) targets.push_back(p);

    for (int p : targets) {
      std::vector<uint8_t> addr;
      if (!fromHex(handles[p], &addr))
        return fail(braidInvalidUsage,
                    "UCX connect: rank %d's handle is not a UCX worker address (do all ranks "
                    "use BRAID_TRANSPORT=ucx?)",
                    p);
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(addr.data());
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = epError;
      ep.err_handler.arg = &peers_[p];
      ucs_status_t st = ucp_ep_create(worker_, &ep, &peers_[p].ep);
      if (st != UCS_OK) {
        peers_[p].ep = nullptr;
        return fail(braidRemoteError,
                    "UCX connect: no endpoint to rank %d: %s (no UCX transport with peer "
                    "failure handling reaches it; shared memory does not count: check UCX_TLS "
                    "/ UCX_NET_DEVICES)",
                    p, ucs_status_string(st));
      }
    }

    // Flush every endpoint (completes once its wireup is done), then trade a ready message
    // with every peer: a peer's ready says its endpoint to us is wired as well.
    std::vector<Req*> flushes(nranks_, nullptr), readyIn(nranks_, nullptr),
        readyOut(nranks_, nullptr);
    // Members, not locals: after a failure the messages stay posted until the destructor.
    readyBuf_.assign(nranks_ + 1, 0);
    braidResult_t res = braidSuccess;
    for (int p : targets) {
      Req* r = take(Kind::kFlush, p, 0, 0);
      ucp_request_param_t prm = sendParams(r);
      void* s = ucp_ep_flush_nbx(peers_[p].ep, &prm);
      res = started(r, s);
      if (res != braidSuccess) break;
      flushes[p] = r;
      Req* in = take(Kind::kRecv, p, 0, sizeof(uint64_t));
      ucp_request_param_t rp = recvParams(in);
      s = ucp_tag_recv_nbx(worker_, &readyBuf_[p], sizeof(uint64_t), pieceTag(kReadyRank, p),
                           kFullMask, &rp);
      res = started(in, s);
      if (res != braidSuccess) break;
      readyIn[p] = in;
    }
    std::vector<char> pending(nranks_, 0);
    for (int p : targets) pending[p] = 1;
    size_t left = targets.size();
    while (res == braidSuccess && left > 0) {
      bool moved = ucp_worker_progress(worker_) != 0;
      for (int p : targets) {
        if (!pending[p]) continue;
        if (peers_[p].error != UCS_OK) {
          res = fail(braidRemoteError, "UCX connect: endpoint to rank %d failed: %s", p,
                     ucs_status_string(peers_[p].error));
          break;
        }
        if (flushes[p]) {
          if (!flushes[p]->done) continue;
          ucs_status_t st = flushes[p]->status;
          release(flushes[p]);
          flushes[p] = nullptr;
          if (st != UCS_OK) {
            res = fail(braidRemoteError, "UCX connect: wiring up rank %d failed: %s", p,
                       ucs_status_string(st));
            break;
          }
          Req* out = take(Kind::kSend, p, 0, 0);
          ucp_request_param_t prm = sendParams(out);
          void* s = ucp_tag_send_nbx(peers_[p].ep, &readyBuf_[nranks_], sizeof(uint64_t),
                                     pieceTag(kReadyRank, rank_), &prm);
          res = started(out, s);
          if (res != braidSuccess) break;
          readyOut[p] = out;
          moved = true;
        }
        if (!readyOut[p] || !readyOut[p]->done || !readyIn[p]->done) continue;
        ucs_status_t st = readyOut[p]->status != UCS_OK ? readyOut[p]->status : readyIn[p]->status;
        release(readyOut[p]);
        release(readyIn[p]);
        readyOut[p] = readyIn[p] = nullptr;
        if (st != UCS_OK) {
          res = fail(braidRemoteError, "UCX connect: handshake with rank %d failed: %s", p,
                     ucs_status_string(st));
          break;
        }
        pending[p] = 0;
        --left;
        moved = true;
      }
      if (res != braidSuccess || left == 0 || moved) continue;
      if (efd_ >= 0 && arm()) {
        pollfd pfd{efd_, POLLIN, 0};
        poll(&pfd, 1, 1);
      }
      if (Clock::now() > deadline) {
        std::string who;
        for (int p : targets)
          if (pending[p]) {
            if (!who.empty()) who += ',';
            who += std::to_string(p);
          }
        res = fail(braidTimeout,
                   "UCX connect: rank(s) %s did not answer within BRAID_TIMEOUT (are they "
                   "alive, and can UCX reach them? see UCX_TLS / UCX_NET_DEVICES)",
                   who.c_str());
      }
    }
    // On failure, the outstanding requests are cancelled by the destructor; forget them here.
    if (res != braidSuccess) return res;
    logTransports(targets);
    return braidSuccess;
  }

  braidResult_t isend(int peer, const void* data, size_t bytes, uint64_t piece,
                      void** req) override {
    if (peer < 0 || peer >= nranks_ || !peers_[peer].ep)
      return fail(braidInternalError, "UCX isend: no endpoint to rank %d", peer);
    if (peers_[peer].error != UCS_OK) return lost(peer, "send to");
    Req* r = take(Kind::kSend, peer, piece, bytes);
    r->bytes = bytes;
    ucp_request_param_t prm = sendParams(r);
    void* s = ucp_tag_send_nbx(peers_[peer].ep, data, bytes, pieceTag(rank_, piece), &prm);
    BRAID_TRY(started(r, s));
    *req = r;
    return braidSuccess;
  }

  braidResult_t irecv(int peer, void* data, size_t capacity, uint64_t piece, void** req) override {
    if (peer < 0 || peer >= nranks_ || !peers_[peer].ep)
      return fail(braidInternalError, "UCX irecv: no endpoint to rank %d", peer);
    Req* r = take(Kind::kRecv, peer, piece, capacity);
    ucp_request_param_t prm = recvParams(r);
    void* s = ucp_tag_recv_nbx(worker_, data, capacity, pieceTag(peer, piece), kFullMask, &prm);
    BRAID_TRY(started(r, s));
    *req = r;
    return braidSuccess;
  }

  braidResult_t test(void* req, bool* done, size_t* bytes) override {
    auto* r = static_cast<Req*>(req);
    if (!r->done) {
      // Tagged receives are not tied to an endpoint, so UCX does not fail them when their
      // peer goes: they just never complete, and peerClosed() says why (a peer that is done
      // with this rank may well exit first). Sends to a lost peer fail in UCX itself.
      *done = false;
      return braidSuccess;
    }
    ucs_status_t st = r->status;
    int peer = r->peer;
    Kind kind = r->kind;
    unsigned long long piece = r->piece;
    size_t capacity = r->capacity, got = r->bytes;
    release(r);
    if (st == UCS_ERR_MESSAGE_TRUNCATED)
      return fail(braidRemoteError,
                  "UCX: piece %llu from rank %d is larger than the %zu bytes posted for it (%s); "
                  "do the ranks agree on BRAID_CHUNKSIZE / the call's arguments?",
                  piece, peer, capacity, ucs_status_string(st));
    if (st != UCS_OK)
      return fail(braidRemoteError, "UCX: %s rank %d failed (piece %llu): %s",
                  kind == Kind::kRecv ? "receive from" : "send to", peer, piece,
                  ucs_status_string(st));
    *done = true;
    if (bytes) *bytes = got;
    return braidSuccess;
  }

  braidResult_t progress(bool* progressed) override {
    bool any = false;
    for (int i = 0; i < 64 && ucp_worker_progress(worker_); ++i) any = true;
    if (progressed) *progressed = any;
    return braidSuccess;
  }

  int waitFd() override { return efd_; }

  const char* peerClosed(int peer) const override {
    if (peer < 0 || peer >= nranks_ || peers_[peer].error == UCS_OK) return nullptr;
    // A receive from it still pending will not complete (what it sent has arrived, in
    // order): closed. With none pending, not while anything it sent waits unmatched: the
    // net proxy posts receives only as the rank frees FIFO cells, so a peer that finished
    // first may have left pieces behind that the rank will still read.
    for (const auto& r : all_)
      if (r->inUse && r->kind == Kind::kRecv && !r->done && r->peer == peer)
        return peers_[peer].why.c_str();
    ucp_tag_recv_info_t info;
    if (ucp_tag_probe_nb(worker_, pieceTag(static_cast<uint64_t>(peer), 0), ~kPieceMask, 0,
                         &info) != nullptr)
      return nullptr;
    return peers_[peer].why.c_str();
  }

  // The FIFO cell's header line and the rank's own buffer, sent as one piece (an iov).
  bool gatherSends() const override { return true; }
  braidResult_t isendGather(int peer, const void* head, size_t headBytes, const void* data,
                            size_t bytes, uint64_t piece, void** req) override {
    if (peer < 0 || peer >= nranks_ || !peers_[peer].ep)
      return fail(braidInternalError, "UCX isend: no endpoint to rank %d", peer);
    if (peers_[peer].error != UCS_OK) return lost(peer, "send to");
    Req* r = take(Kind::kSend, peer, piece, headBytes + bytes);
    r->bytes = headBytes + bytes;
    r->iov[0] = {const_cast<void*>(head), headBytes};
    r->iov[1] = {const_cast<void*>(data), bytes};
    ucp_request_param_t prm = sendParams(r);
    prm.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    prm.datatype = ucp_dt_make_iov();
    void* s = ucp_tag_send_nbx(peers_[peer].ep, r->iov, 2, pieceTag(rank_, piece), &prm);
    BRAID_TRY(started(r, s));
    *req = r;
    return braidSuccess;
  }

  bool arm() override {
    if (efd_ < 0) return false;
    // Arming needs every event drained; anything drained here may have completed a
    // request the caller has not seen, so then it must not sleep.
    if (ucp_worker_progress(worker_)) return false;
    ucs_status_t st = ucp_worker_arm(worker_);
    return st == UCS_OK;  // UCS_ERR_BUSY: events are waiting
  }

 private:
  Req* take(Kind kind, int peer, uint64_t piece, size_t capacity) {
    Req* r;
    if (free_.empty()) {
      all_.push_back(std::make_unique<Req>());
      r = all_.back().get();
    } else {
      r = free_.back();
      free_.pop_back();
    }
    *r = Req{};
    r->kind = kind;
    r->peer = peer;
    r->piece = piece;
    r->capacity = capacity;
    r->inUse = true;
    return r;
  }

  void release(Req* r) {
    if (r->ucp) ucp_request_free(r->ucp);
    r->ucp = nullptr;
    r->inUse = false;
    free_.push_back(r);
  }

  static ucp_request_param_t sendParams(Req* r) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = sendDone;
    p.user_data = r;
    return p;
  }

  // No immediate completion: UCX 1.13 does not fill recv_info.tag_info when a receive
  // completes inside ucp_tag_recv_nbx (later versions do), so the size would be lost. With
  // NO_IMM_CMPL it calls recvDone, with the size, before returning the request instead.
  static ucp_request_param_t recvParams(Req* r) {
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = recvDone;
    p.user_data = r;
    return p;
  }

  // Records what a *_nbx call returned: completed at once, failed, or in flight.
  braidResult_t started(Req* r, void* s) {
    if (s == nullptr) {  // sends and flushes only: receives never complete at once
      r->done = true;
      r->status = UCS_OK;
      return braidSuccess;
    }
    if (UCS_PTR_IS_ERR(s)) {
      ucs_status_t st = UCS_PTR_STATUS(s);
      int peer = r->peer;
      Kind kind = r->kind;
      release(r);
      return fail(braidRemoteError, "UCX: %s rank %d failed: %s",
                  kind == Kind::kRecv ? "receive from" : "send to", peer, ucs_status_string(st));
    }
    r->ucp = s;
    return braidSuccess;
  }

  braidResult_t lost(int peer, const char* what) {
    return fail(braidRemoteError, "UCX: %s rank %d failed: connection lost (%s)", what, peer,
                ucs_status_string(peers_[peer].error));
  }

  // Which transports UCX chose, from its own endpoint dump ("lane[0]: 3:posix/memory.0 ...").
  void logTransports(const std::vector<int>& targets) {
    if (!logEnabled(LogLevel::kInfo) || targets.empty()) return;
    std::set<std::string> tls;
    for (int p : targets) {
      char* text = nullptr;
      size_t len = 0;
      FILE* f = open_memstream(&text, &len);
      if (!f) return;
      ucp_ep_print_info(peers_[p].ep, f);
      fclose(f);
      for (const char* line = text; line && *line;) {
        const char* end = strchr(line, '\n');
        std::string l(line, end ? end - line : strlen(line));
        size_t at = l.find("lane[");
        if (at != std::string::npos) {
          size_t colon = l.find(':', at);
          size_t tl = colon == std::string::npos ? colon : l.find(':', colon + 1);
          if (tl != std::string::npos) {
            size_t stop = l.find(' ', tl);
            tls.insert(l.substr(tl + 1, stop == std::string::npos ? stop : stop - tl - 1));
          }
        }
        line = end ? end + 1 : nullptr;
      }
      std::free(text);
    }
    std::string list;
    for (const auto& t : tls) {
      if (!list.empty()) list += ' ';
      list += t;
    }
    BRAID_INFO("NET", "UCX %s: %zu peer(s) over %s", ucp_get_version_string(), targets.size(),
               list.empty() ? "(unknown transports)" : list.c_str());
  }

  // Cancels what is still outstanding, closes the endpoints, all bounded in time.
  void teardown() {
    Deadline until = deadlineAfter(kTeardownSec);
    // Receives are cancelled; sends and flushes get the same time to finish (closing an
    // endpoint below ends whatever is left of them).
    for (auto& r : all_)
      if (r->inUse && r->ucp && !r->done && r->kind == Kind::kRecv)
        ucp_request_cancel(worker_, r->ucp);
    auto outstanding = [&] {
      for (auto& r : all_)
        if (r->inUse && r->ucp && !r->done) return true;
      return false;
    };
    while (outstanding() && Clock::now() < until) ucp_worker_progress(worker_);
    for (auto& r : all_)
      if (r->inUse) release(r.get());

    std::vector<void*> closing;
    for (auto& p : peers_) {
      if (!p.ep) continue;
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      // Flush what was sent (a peer may still be reading the last pieces); a peer already
      // lost gets a forced close.
      prm.flags = p.error != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      void* s = ucp_ep_close_nbx(p.ep, &prm);
      if (UCS_PTR_IS_PTR(s)) closing.push_back(s);
      p.ep = nullptr;
    }
    for (void*& s : closing) {
      while (ucp_request_check_status(s) == UCS_INPROGRESS && Clock::now() < until)
        ucp_worker_progress(worker_);
      ucp_request_free(s);
    }
    if (!closing.empty() && Clock::now() >= until)
      BRAID_INFO("NET", "UCX: endpoints still closing after %.0f s; destroying the worker",
                 kTeardownSec);
  }

  const int rank_, nranks_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t addressLen_ = 0;
  int efd_ = -1;
  std::string handle_;
  std::vector<Peer> peers_;
  std::vector<std::unique_ptr<Req>> all_;
  std::vector<Req*> free_;
  std::vector<uint64_t> readyBuf_;  // connect()'s ready messages: one per peer, then ours
};

}  // namespace

braidResult_t createUcxBackend(int rank, int nranks, std::unique_ptr<NetBackend>* out) {
  if (nranks <= 0 || rank < 0 || rank >= nranks || static_cast<uint64_t>(nranks) > kReadyRank)
    return fail(braidInvalidArgument, "UCX backend: rank %d of %d out of range (at most %llu)",
                rank, nranks, static_cast<unsigned long long>(kReadyRank));
  auto b = std::make_unique<UcxBackend>(rank, nranks);
  BRAID_TRY(b->init());
  *out = std::move(b);
  return braidSuccess;
}

bool ucxBuilt() { return true; }

}  // namespace braid

#else  // !BRAID_HAVE_UCX

namespace braid {

bool ucxBuilt() { return false; }

braidResult_t createUcxBackend(int /*rank*/, int /*nranks*/, std::unique_ptr<NetBackend>* out) {
  out->reset();
  return fail(braidInvalidUsage,
              "BRAID_TRANSPORT=ucx: this Braid was built without UCX (install libucx-dev and "
              "configure with meson -Ducx=enabled)");
}

}  // namespace braid

#endif  // BRAID_HAVE_UCX
