// The nccl-tests-shaped harness of the perf binaries; see common.h.
//
// Flow, as in nccl-tests' common.cu: parse flags; find the ranks (threads of this
// process, braidrun's environment, or mpirun); rank 0 prints the header; every rank
// creates its communicator (forcing -A's algorithm on it, -T its timeout), allocates its
// buffers (-u elements past their start, registered with -R), and for each datatype, op and
// root warms up at the largest and smallest size, then -N times for each size, out of place
// and in place, makes one untimed call (with -w above 0) and times `iters` back-to-back calls
// (each one too with -I), reduces the time over ranks (-a), checks the result (-c) and rank 0
// prints a row. Every cross-rank reduction of timings, counts and memory figures goes
// through braidAllReduce itself, so MPI is needed only to hand out the unique id.
#include "common.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithm_flag.h"
#include "launch.h"
#include "options.h"
#include "report.h"
#include "verifiable.h"

namespace braid::perf {
namespace {

// Host buffers: posix_memalign's, or with -B shared braidMemAllocHost's.
struct FreeDeleter {
  bool shared = false;
  void operator()(void* p) const {
    if (shared)
      braidMemFreeHost(p);
    else
      free(p);
  }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;
// -B device: the collectives' buffers, from braidMemAlloc.
struct DeviceDeleter {
  void operator()(std::byte* p) const { braidMemFree(p); }
};
using DeviceBuffer = std::unique_ptr<std::byte, DeviceDeleter>;

constexpr size_t kInfoBytes = 128;  // per-rank record gathered for "# Using devices"

// What the thread ranks of one process share.
struct Shared {
  JsonDocument* json = nullptr;  // -J: global rank 0's document
  int64_t rss_start = -1;        // -M 1: resident bytes before any communicator
};

class Rank {
 public:
  Rank(const Options& o, const Launch& l, const Collective& coll, int thread, const Shared& shared)
      : o_(o),
        l_(l),
        coll_(coll),
        thread_(thread),
        nranks_(l.nprocs * o.nthreads),
        rank_(l.proc * o.nthreads + thread),
        shared_(shared),
        report_(coll, o, nranks_, rank_ == 0 ? shared.json : nullptr),
        pause_forced_allreduce_(o.forces_algorithm() &&
                                strcasecmp(coll.collective, "allreduce") == 0) {}

  // Returns this rank's exit status.
  int Run() {
    if (o_.timeout_sec > 0) {  // -T: nccl-tests' timeout is this communicator's bound
      braidConfig_t config = BRAID_CONFIG_INITIALIZER;
      config.timeoutSec = o_.timeout_sec;
      Call(braidCommInitRankConfig(&comm_, nranks_, l_.id, rank_, &config),
           "braidCommInitRankConfig (-T " + std::to_string(o_.timeout_sec) + ")");
    } else {
      Call(braidCommInitRank(&comm_, nranks_, l_.id, rank_), "braidCommInitRank");
    }
    if (o_.forces_algorithm()) {
      Call(braidCommSetAlgorithm(comm_, coll_.collective, o_.algorithm.c_str()),
           "braidCommSetAlgorithm (-A " + o_.algorithm + ")");
    }
    PrintDevices();
    const int64_t rss_init = SampleResident();
    Allocate();
    Register();
    const int64_t rss_buffers = SampleResident();
    if (rank_ == 0) report_.PrintHeader();
    std::vector<int> roots{o_.root};
    if (coll_.uses_root && o_.all_roots) {
      roots.clear();
      for (int r = 0; r < nranks_; ++r) roots.push_back(r);
    }
    for (braidDataType_t dtype : o_.types) {
      for (braidRedOp_t op : coll_.uses_op ? o_.ops : std::vector<braidRedOp_t>{braidSum}) {
        for (int root : coll_.uses_root ? roots : std::vector<int>{0}) Sweep(dtype, op, root);
      }
    }
    MemoryFigures memory;
    if (o_.memory_report) memory = GatherMemory(rss_init, rss_buffers, SampleResident());
    if (rank_ == 0) {
      report_.PrintFooter(errors_, bw_count_ > 0 ? bw_sum_ / bw_count_ : 0.0);
      if (o_.memory_report) report_.PrintMemory(memory);
    }
    // Nobody exits (possibly non-zero) before rank 0 has printed its summary.
    Barrier();
    if (!o_.trace_dir.empty()) {  // -X: this rank's flight recorder, every call of the run
      char path[4096] = "";
      Call(braidCommDumpTrace(comm_, path, sizeof path), "braidCommDumpTrace (-X)");
      if (rank_ == 0) {
        std::string job = path;
        job = job.substr(0, job.rfind('/'));
        printf("# trace: %s (braid-trace %s: the verdict, where the time went, a timeline)\n",
               job.c_str(), job.c_str());
      }
    }
    for (void* handle : {send_handle_, recv_handle_}) {
      if (handle != nullptr) Call(braidCommDeregister(comm_, handle), "braidCommDeregister (-R)");
    }
    if (stream_) Call(braidStreamDestroy(stream_), "braidStreamDestroy");
    Call(braidCommDestroy(comm_), "braidCommDestroy");
    comm_ = nullptr;
    return errors_ != 0 ? 1 : 0;
  }

 private:
  void Call(braidResult_t r, const std::string& what) {
    if (r == braidSuccess) return;
    fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", o_.prog, rank_, what.c_str(),
            braidGetErrorString(r), braidGetLastError(comm_));
    Abort(l_);
  }

  // The harness's own all-reduces run under the default rule even when -A forces an
  // all-reduce algorithm, so that the algorithm under test is timed and checked only in
  // the sweep (and one that cannot reduce a single element still gets a clear message).
  void HarnessAllReduce(void* buf, size_t count, braidDataType_t dtype, braidRedOp_t op,
                        const char* what) {
    SyncStream();  // the calls queued before it run under the algorithm they were made with
    if (pause_forced_allreduce_) {
      Call(braidCommSetAlgorithm(comm_, "allreduce", ""), "braidCommSetAlgorithm (harness)");
    }
    Call(braidAllReduce(buf, buf, count, dtype, op, comm_, nullptr), what);
    if (pause_forced_allreduce_) {
      Call(braidCommSetAlgorithm(comm_, "allreduce", o_.algorithm.c_str()),
           "braidCommSetAlgorithm (-A " + o_.algorithm + ")");
    }
  }

  // -B device: waits for the calls queued on the CUDA stream (nccl-tests' cudaStreamSynchronize).
  void SyncStream() {
    if (stream_) Call(braidStreamSynchronize(stream_), "the calls queued on the CUDA stream");
  }

  // A barrier made of a one-element all-reduce.
  void Barrier() {
    int32_t token = 0;
    HarnessAllReduce(&token, 1, braidInt32, braidSum, "braidAllReduce (harness barrier)");
  }

  double ReduceTime(double seconds) {
    braidRedOp_t op = braidSum;
    double value = seconds;
    switch (o_.average) {
      case 0:
        value = rank_ == 0 ? seconds : 0.0;
        break;
      case 2:
        op = braidMin;
        break;
      case 3:
        op = braidMax;
        break;
      default:
        break;
    }
    HarnessAllReduce(&value, 1, braidFloat64, op, "braidAllReduce (harness time reduction)");
    return o_.average == 1 ? value / nranks_ : value;
  }

  // -I 1: each iteration's largest time over the ranks of each process (one row per process,
  // a max all-reduce over rows that other processes leave at 0), and over all of them.
  void ReduceIterTimes(const std::vector<double>& mine, Measurement* m) {
    const size_t n = mine.size(), rows = static_cast<size_t>(l_.nprocs);
    std::vector<double> all(n * rows, 0.0);
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<ptrdiff_t>(n * l_.proc));
    HarnessAllReduce(all.data(), all.size(), braidFloat64, braidMax,
                     "braidAllReduce (harness per-iteration times)");
    m->iter_seconds.assign(n, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < n; ++i)
        m->iter_seconds[i] = std::max(m->iter_seconds[i], all[r * n + i]);
      if (rows > 1)
        m->process_iter_seconds.emplace_back(all.begin() + r * n, all.begin() + (r + 1) * n);
    }
  }

  int64_t SumOverRanks(int64_t value) {
    HarnessAllReduce(&value, 1, braidInt64, braidSum, "braidAllReduce (harness error count)");
    return value;
  }

  void PrintDevices() {
    // Gathered with a sum all-reduce over zero-filled records, one slot per rank.
    std::vector<uint8_t> info(kInfoBytes * nranks_, 0);
    uint8_t* mine = info.data() + kInfoBytes * rank_;
    const int32_t pid = getpid();
    const int32_t device = l_.local_proc * o_.nthreads + thread_;
    memcpy(mine, &pid, 4);
    memcpy(mine + 4, &device, 4);
    char host[kInfoBytes - 8] = {};
    gethostname(host, sizeof(host) - 1);
    memcpy(mine + 8, host, sizeof(host));
    HarnessAllReduce(info.data(), info.size(), braidUint8, braidSum,
                     "braidAllReduce (harness device report)");
    if (rank_ != 0) return;
    std::vector<DeviceRecord> devices(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) {
      const uint8_t* rec = info.data() + kInfoBytes * r;
      DeviceRecord& d = devices[static_cast<size_t>(r)];
      d.rank = r;
      memcpy(&d.pid, rec, 4);
      memcpy(&d.device, rec + 4, 4);
      char rhost[kInfoBytes - 8];
      memcpy(rhost, rec + 8, sizeof(rhost));
      rhost[sizeof(rhost) - 1] = '\0';
      d.hostname = rhost;
    }
    report_.PrintDevices(devices);
  }

  // -M 1: this process's resident bytes, read by its first thread between two barriers (so
  // that no rank of it allocates meanwhile); -1 elsewhere and without -M.
  int64_t SampleResident() {
    if (!o_.memory_report) return -1;
    Barrier();
    const int64_t rss = thread_ == 0 ? ResidentBytes() : -1;
    Barrier();
    return rss;
  }

  // -M 1: what each phase added to a process's resident memory, the largest over processes,
  // and the buffers of the rank that has the most.
  MemoryFigures GatherMemory(int64_t rss_init, int64_t rss_buffers, int64_t rss_end) {
    const bool sampler = thread_ == 0;  // others leave the figures to their process's first
    const int64_t none = INT64_MIN;
    int64_t f[6] = {sampler ? rss_init - shared_.rss_start : none,
                    sampler ? rss_buffers - rss_init : none,
                    sampler ? rss_end - rss_buffers : none,
                    sampler ? PeakResidentBytes() : none,
                    buffer_bytes_,
                    device_bytes_};
    HarnessAllReduce(f, 6, braidInt64, braidMax, "braidAllReduce (harness memory report)");
    return MemoryFigures{f[0], f[1], f[2], f[3], f[4], f[5]};
  }

  // Buffers big enough for the largest size of every datatype, in both placements.
  void Allocate() {
    size_t send_bytes = 64, recv_bytes = 64, region_bytes = 64, region_elems = 1, pad = 0;
    for (braidDataType_t dtype : o_.types) {
      const size_t es = ElementSize(dtype);
      pad = std::max(pad, static_cast<size_t>(o_.unalign) * es);  // -u: where the calls start
      const CollCounts c = coll_.counts(o_.max_bytes / es, nranks_);
      const size_t r = static_cast<size_t>(rank_);
      send_bytes = std::max(send_bytes, c.send_count * es);
      region_bytes = std::max(region_bytes, c.recv_count * es);
      region_elems = std::max(region_elems, c.recv_count);
      recv_bytes =
          std::max({recv_bytes, c.recv_count * es, (c.send_inplace_offset * r + c.send_count) * es,
                    (c.recv_inplace_offset * r + c.recv_count) * es});
    }
    send_bytes += pad;
    recv_bytes += pad;
    send_ = Alloc(send_bytes, "send buffer", o_.shared_memory);
    recv_ = Alloc(recv_bytes, "receive buffer", o_.shared_memory);
    send_bytes_ = send_bytes;
    recv_bytes_ = recv_bytes;
    if (o_.device_memory) {  // the host buffers stay, as the data's source and checked copy
      dev_send_ = AllocDevice(send_bytes, "send buffer");
      dev_recv_ = AllocDevice(recv_bytes, "receive buffer");
      // Calls ordered on a CUDA stream of this rank's own, as nccl-tests' are on one per GPU:
      // the timed loop queues them all and then waits. The per-thread default stream
      // (cudaStreamPerThread: thread ranks of one process get one each; the legacy default
      // stream would make rank 0's call block rank 1's); only this thread uses stream_. -y 1
      // takes the legacy default stream (NULL), as nccl-tests does, where a process has one rank.
      void* const per_thread_stream = reinterpret_cast<void*>(0x2);
      void* const cuda_stream = o_.stream_null && o_.nthreads == 1 ? nullptr : per_thread_stream;
      Call(braidStreamCreateCuda(&stream_, cuda_stream), "braidStreamCreateCuda (-B device)");
    }
    if (o_.check > 0) {
      expected_ = Alloc(region_bytes, "expected-result buffer");
      background_ = Alloc(region_bytes, "expected-result buffer");
      defined_.assign(region_elems, 0);
    }
  }

  Buffer Alloc(size_t bytes, const char* what, bool shared = false) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    void* p = nullptr;
    if (shared ? braidMemAllocHost(&p, rounded) != braidSuccess
               : posix_memalign(&p, 4096, rounded) != 0) {
      fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes for the %s; lower -e%s%s\n", o_.prog,
              rank_, rounded, what, shared ? ": " : "", shared ? braidGetLastError(nullptr) : "");
      Abort(l_);
    }
    memset(p, 0, rounded);  // first touch by this rank's thread
    buffer_bytes_ += static_cast<int64_t>(rounded);
    return Buffer(static_cast<std::byte*>(p), FreeDeleter{shared});
  }

  // -R 1 or 2: the buffers the collectives are given, registered with the communicator
  // (nccl-tests' ncclCommRegister; Braid has no symmetric windows, so 2 registers the same).
  void Register() {
    if (o_.local_register == 0) return;
    Call(braidCommRegister(comm_, Placed(send_.get()), send_bytes_, &send_handle_),
         "braidCommRegister (-R, send buffer)");
    Call(braidCommRegister(comm_, Placed(recv_.get()), recv_bytes_, &recv_handle_),
         "braidCommRegister (-R, receive buffer)");
  }

  DeviceBuffer AllocDevice(size_t bytes, const char* what) {
    void* p = nullptr;
    if (braidMemAlloc(&p, bytes) != braidSuccess) {
      fprintf(stderr,
              "%s: rank %d: -B device: cannot allocate %zu bytes of device memory for the %s: %s\n",
              o_.prog, rank_, bytes, what, braidGetLastError(nullptr));
      Abort(l_);
    }
    buffer_bytes_ += static_cast<int64_t>(bytes);
    device_bytes_ += static_cast<int64_t>(bytes);
    return DeviceBuffer(static_cast<std::byte*>(p));
  }

  // -B device: the host buffers' contents to the device buffers, or the receive buffer back.
  void ToDevice() {
    if (!o_.device_memory) return;
    Call(braidMemcpy(dev_send_.get(), send_.get(), send_bytes_), "braidMemcpy (to device)");
    Call(braidMemcpy(dev_recv_.get(), recv_.get(), recv_bytes_), "braidMemcpy (to device)");
  }
  void FromDevice() {
    if (!o_.device_memory) return;
    Call(braidMemcpy(recv_.get(), dev_recv_.get(), recv_bytes_), "braidMemcpy (from device)");
  }
  // The buffer a collective is given: p itself, or with -B device the same place on the device.
  std::byte* Placed(std::byte* p) {
    if (!o_.device_memory) return p;
    if (p >= send_.get() && p < send_.get() + send_bytes_)
      return dev_send_.get() + (p - send_.get());
    return dev_recv_.get() + (p - recv_.get());
  }

  void Sweep(braidDataType_t dtype, braidRedOp_t op, int root) {
    const size_t es = ElementSize(dtype);
    Barrier();
    // Warm-up at the largest then the smallest size, out of place, as nccl-tests does.
    for (size_t bytes : {o_.max_bytes, o_.min_bytes}) {
      const CollCounts c = coll_.counts(bytes / es, nranks_);
      for (int i = 0; i < o_.warmup_iters; ++i) RunOnce(c, dtype, op, root, false);
    }
    // -N: the whole sweep again, each printed; 0 repeats it until the run is stopped.
    long long cycles = o_.run_cycles;
    do {
      SweepSizes(dtype, op, root);
    } while (--cycles != 0);
  }

  void SweepSizes(braidDataType_t dtype, braidRedOp_t op, int root) {
    const size_t es = ElementSize(dtype);
    for (size_t size : Sizes(o_)) {
      const CollCounts c = coll_.counts(size / es, nranks_);
      const size_t bytes = std::max(c.send_count, c.recv_count) * es;
      const double algbw_bytes = coll_.algbw_bytes != nullptr ? coll_.algbw_bytes(c, es, nranks_)
                                                              : static_cast<double>(bytes);
      if (rank_ == 0) report_.BeginRow(bytes, c.param_count, dtype, op, root);
      for (bool in_place : {false, true}) {
        if (in_place && !coll_.in_place) {
          if (rank_ == 0) report_.AddNotApplicable();
          continue;
        }
        const Measurement m = Bench(c, algbw_bytes, dtype, op, root, in_place);
        if (rank_ == 0) report_.AddResult(m);
      }
      if (rank_ == 0) report_.EndRow();
    }
  }

  // -u: the calls' buffers start unalign elements into the allocations.
  std::byte* SendPtr(const CollCounts& c, size_t es, bool in_place) {
    const size_t shift = static_cast<size_t>(o_.unalign) * es;
    return in_place ? recv_.get() + shift + c.send_inplace_offset * es * rank_
                    : send_.get() + shift;
  }
  std::byte* RecvPtr(const CollCounts& c, size_t es, bool in_place) {
    return recv_.get() + static_cast<size_t>(o_.unalign) * es +
           (in_place ? c.recv_inplace_offset * es * rank_ : 0);
  }

  void RunOnce(const CollCounts& c, braidDataType_t dtype, braidRedOp_t op, int root,
               bool in_place) {
    const size_t es = ElementSize(dtype);
    // -o mulsum: a PreMulSum op with this rank's scalar, made and destroyed around each call as
    // nccl-tests' startColl does (a call already queued keeps the op it was made with).
    braidRedOp_t call_op = op;
    if (op == kMulSum) {
      alignas(8) unsigned char scalar[16];
      PreMulScalarBytes(dtype, rank_, scalar);
      Call(braidRedOpCreatePreMulSum(&call_op, scalar, dtype, braidScalarHostImmediate, comm_),
           "braidRedOpCreatePreMulSum (-o mulsum)");
    }
    const braidResult_t r =
        coll_.run(Placed(SendPtr(c, es, in_place)), Placed(RecvPtr(c, es, in_place)), c, dtype,
                  call_op, root, comm_, stream_);
    if (op == kMulSum) Call(braidRedOpDestroy(call_op, comm_), "braidRedOpDestroy (-o mulsum)");
    if (r != braidSuccess) {
      std::string what = std::string(coll_.call) + " (" + TypeName(dtype);
      if (coll_.uses_op) what += std::string(" ") + OpName(op);
      if (coll_.uses_root) what += ", root " + std::to_string(root);
      what +=
          ", count " + std::to_string(c.param_count) + (in_place ? ", in place" : ", out of place");
      if (o_.forces_algorithm()) what += ", algorithm " + o_.algorithm + " forced by -A";
      Call(r, what + ")");
    }
  }

  Measurement Bench(const CollCounts& c, double algbw_bytes, braidDataType_t dtype, braidRedOp_t op,
                    int root, bool in_place) {
    const size_t es = ElementSize(dtype);
    // Time the call on valid data, as nccl-tests does (NaNs or denormals could skew it).
    if (o_.check > 0) {
      const CheckArgs args{dtype, op, root, rank_, nranks_, 0};
      coll_.fill_send(SendPtr(c, es, in_place), c, args);
    }
    // One untimed call of the size and placement first (unless -w 0), as nccl-tests' BenchTime
    // makes: Braid makes a plan (the algorithm choice and the schedule) on the first call of
    // each, which would otherwise land in the first timed loop (20 calls of 0.2 us plus one
    // plan of ~50 us read as 3 us each; -I showed the in-place loop's first iteration 30 times
    // slower than the others while only the out-of-place call was made untimed).
    ToDevice();
    if (o_.warmup_iters > 0) RunOnce(c, dtype, op, root, in_place);
    Barrier();
    using Clock = std::chrono::steady_clock;
    const double calls = static_cast<double>(o_.iters) * o_.agg_iters;
    std::vector<double> iter_seconds(o_.per_iter_timing ? o_.iters : 0);
    const auto start = Clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      const auto iter_start = o_.per_iter_timing ? Clock::now() : start;
      // -m: the iteration's calls in one group, as nccl-tests makes them (Braid runs a group's
      // calls of one communicator in posting order when it ends).
      if (o_.agg_iters > 1) Call(braidGroupStart(), "braidGroupStart (-m)");
      for (int a = 0; a < o_.agg_iters; ++a) RunOnce(c, dtype, op, root, in_place);
      if (o_.agg_iters > 1) {
        Call(braidGroupEnd(), "braidGroupEnd (-m " + std::to_string(o_.agg_iters) + " calls)");
      }
      // -z 1 waits and meets the other ranks after each iteration, -z 2 only waits.
      if (o_.blocking != 0 || o_.per_iter_timing) SyncStream();
      if (o_.blocking == 1) Barrier();
      if (o_.per_iter_timing) {
        const std::chrono::duration<double> t = Clock::now() - iter_start;
        iter_seconds[i] = t.count() / o_.agg_iters;
      }
    }
    // -C: the time the loop took to issue the calls (the same on host buffers, whose calls
    // return when done; with -B device, without the wait for the stream).
    const std::chrono::duration<double> issued = Clock::now() - start;
    SyncStream();
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    Measurement m;
    const double seconds = ReduceTime(elapsed.count() / calls);
    m.seconds = o_.report_cputime ? ReduceTime(issued.count() / calls) : seconds;
    m.algbw = seconds > 0 ? algbw_bytes / 1.0e9 / seconds : 0.0;
    m.busbw = m.algbw * coll_.busbw_factor(nranks_);
    if (o_.per_iter_timing) ReduceIterTimes(iter_seconds, &m);

    int64_t wrong = 0;
    for (int k = 0; k < o_.check; ++k) {
      wrong = SumOverRanks(static_cast<int64_t>(Check(c, dtype, op, root, in_place)));
      if (wrong != 0) break;
    }
    if (o_.check > 0) m.wrong = wrong;
    // nccl-tests counts one error per rank for each check that found wrong elements.
    if (wrong != 0) errors_ += nranks_;
    bw_sum_ += m.busbw;
    ++bw_count_;
    return m;
  }

  // One validated call; returns this rank's wrong elements. The receive region is first
  // poisoned: elements the call defines get the complement of their expected bits, the
  // others a background they must keep (plus, in place, the input written over it).
  size_t Check(const CollCounts& c, braidDataType_t dtype, braidRedOp_t op, int root,
               bool in_place) {
    const size_t es = ElementSize(dtype);
    const size_t n = c.recv_count;
    const CheckArgs args{dtype, op,      root,
                         rank_, nranks_, Mix(++checks_, 0x6272616964ull, in_place ? 1 : 0)};
    std::byte* want = expected_.get();
    std::byte* other = background_.get();
    // Which elements the call defines: fill_expected over two complementary backgrounds
    // writes the same bits into those and leaves every byte of the others different.
    FillBytes(want, n * es, args.seed);
    for (size_t b = 0; b < n * es; ++b) other[b] = ~want[b];
    coll_.fill_expected(want, c, args);
    coll_.fill_expected(other, c, args);
    std::byte* recv = RecvPtr(c, es, in_place);
    for (size_t i = 0; i < n; ++i) {
      defined_[i] = memcmp(want + i * es, other + i * es, es) == 0;
      for (size_t b = i * es; b < (i + 1) * es; ++b) recv[b] = defined_[i] ? ~want[b] : want[b];
    }
    coll_.fill_send(SendPtr(c, es, in_place), c, args);
    for (size_t i = 0; i < n; ++i) {
      if (!defined_[i]) memcpy(want + i * es, recv + i * es, es);
    }
    ToDevice();
    RunOnce(c, dtype, op, root, in_place);
    SyncStream();
    FromDevice();

    // Defined reduction results compare by value (-0 equals +0); everything else by bits.
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j < n && defined_[j] == defined_[i]) ++j;
      const size_t bad = defined_[i] && !coll_.bitwise
                             ? CountMismatches(recv + i * es, want + i * es, j - i, dtype)
                             : CountBitMismatches(recv + i * es, want + i * es, j - i, es);
      if (bad != 0 && first == n) {
        for (size_t k = i; k < j && first == n; ++k) {
          const bool differs = defined_[k] && !coll_.bitwise
                                   ? CountMismatches(recv + k * es, want + k * es, 1, dtype) != 0
                                   : memcmp(recv + k * es, want + k * es, es) != 0;
          if (differs) first = k;
        }
      }
      wrong += bad;
      i = j;
    }
    if (wrong != 0) {
      std::string call = TypeName(dtype);
      if (coll_.uses_op) call += std::string(" ") + OpName(op);
      if (coll_.uses_root) call += ", root " + std::to_string(root);
      fprintf(stderr,
              "%s: rank %d: %zu of %zu elements wrong (%s, %zu bytes, count %zu, %s); first: "
              "element %zu (%s) holds 0x%s, want 0x%s\n",
              o_.prog, rank_, wrong, n, call.c_str(), std::max(c.send_count, c.recv_count) * es,
              c.param_count, in_place ? "in place" : "out of place", first,
              defined_[first] ? "a result" : "must be left unchanged",
              Hex(recv + first * es, es).c_str(), Hex(want + first * es, es).c_str());
    }
    return wrong;
  }

  // Bytes of one element, most significant first (little-endian host).
  static std::string Hex(const std::byte* p, size_t n) {
    std::string s;
    char digits[3];
    for (size_t b = n; b-- > 0;) {
      snprintf(digits, sizeof(digits), "%02x", static_cast<unsigned>(p[b]));
      s += digits;
    }
    return s;
  }

  const Options& o_;
  const Launch& l_;
  const Collective& coll_;
  const int thread_;
  const int nranks_;
  const int rank_;
  const Shared& shared_;
  Report report_;
  const bool pause_forced_allreduce_;
  braidComm_t comm_ = nullptr;
  void* send_handle_ = nullptr;  // -R
  void* recv_handle_ = nullptr;
  int64_t buffer_bytes_ = 0;  // what Alloc and AllocDevice gave this rank (-M 1)
  int64_t device_bytes_ = 0;
  Buffer send_, recv_, expected_, background_;
  size_t send_bytes_ = 0, recv_bytes_ = 0;
  DeviceBuffer dev_send_, dev_recv_;  // -B device
  braidStream_t stream_ = nullptr;    // -B device: ordered with this thread's CUDA stream
  std::vector<uint8_t> defined_;
  uint64_t checks_ = 0;
  int errors_ = 0;
  double bw_sum_ = 0;
  int bw_count_ = 0;
};

}  // namespace

int PerfMain(int argc, char** argv, const Collective& coll) {
  setlinebuf(stdout);
  Options o;
  if (const int status = ParseOptions(argc, argv, &o); status >= 0) return status;
  if (const int status = CheckAlgorithmFlag(&o, coll); status >= 0) return status;
  const std::vector<std::string> args(argv, argv + argc);  // for -J, before MPI_Init edits argv
  Shared shared;
  if (o.memory_report) shared.rss_start = ResidentBytes();
  const Launch l = DetectLaunch(o, &argc, &argv);
  const int nranks = l.nprocs * o.nthreads;
  if (coll.uses_root && o.root >= nranks) {
    LaunchError(o, "-r (--root) " + std::to_string(o.root) + " is not a rank: there are " +
                       std::to_string(nranks) + " ranks");
  }
  std::unique_ptr<JsonDocument> json;
  if (l.proc == 0 && !o.json_path.empty()) {
    std::string opened, error;
    json = JsonDocument::Create(o.json_path, &opened, &error);
    if (json == nullptr) LaunchError(o, "-J (--output_file): " + error);
    printf("# Writing JSON output to %s\n", opened.c_str());
    json->Begin(args);
    shared.json = json.get();
  }
  if (l.proc == 0) PrintRunHeader(coll, o);
  if (coll.skip_reason != nullptr) {
    if (const char* why = coll.skip_reason(nranks); why != nullptr) {
      // Every process sees the same nranks, so none of them creates a communicator.
      if (l.proc == 0) printf("nRanks %d %s, skipping\n", nranks, why);
      json.reset();  // the document closed without results
      FinishLaunch(l);
      return 0;
    }
  }
  if (l.proc == 0) {
    printf("#\n");
    printf("# Using devices\n");
    fflush(stdout);
  }

  std::vector<int> status(o.nthreads, 0);
  std::vector<std::thread> threads;
  threads.reserve(o.nthreads);
  for (int t = 1; t < o.nthreads; ++t) {
    threads.emplace_back([&, t] { status[t] = Rank(o, l, coll, t, shared).Run(); });
  }
  status[0] = Rank(o, l, coll, 0, shared).Run();
  for (std::thread& t : threads) t.join();
  const int worst = *std::max_element(status.begin(), status.end());
  if (json != nullptr) json->Finish(worst != 0 ? braidGetLastError(nullptr) : "");
  json.reset();
  FinishLaunch(l);
  return worst;
}

}  // namespace braid::perf
