// braidrun: starts the ranks of one Braid job, on this host or over several hosts.
//
//   braidrun [--no-prefix] [--elastic|--respawn] -n N [--] CMD [ARGS...]
//   braidrun [--no-prefix] [--elastic|--respawn] --hosts|-H NAME[:COUNT][,NAME[:COUNT]...] [--] CMD
//   [ARGS...]
//
// braidrun calls braidGetUniqueId, so the bootstrap root runs in braidrun's own process,
// then forks one child per rank with BRAID_UNIQUE_ID (braidUniqueIdToString), BRAID_RANK,
// BRAID_NRANKS, BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE set, and execs CMD in each. It
// forwards every line a child writes to stdout or stderr to its own, prefixed with
// "RANK: " like srun --label (so nccl-tests log parsers read it). It fails fast like
// mpirun: when a child exits non-zero or dies by a signal, the others get SIGTERM, then
// SIGKILL 2 s later; braidrun reaps them all and exits with that first child's status
// (128 + signal for a signal). SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded.
//
// With --hosts the job has COUNT ranks on each NAME (COUNT defaults to 1), numbered host by
// host in list order; BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE are per host. A NAME with a
// network namespace (/run/netns/NAME, as `ip netns add` and scripts/cluster.sh make) is an
// emulated host: its children enter that namespace with setns(2) between fork and exec and
// get BRAID_HOST_ID=NAME (they share this machine's hostname and boot id, so without it
// they would look like one host). When every host is such a namespace, the bridge
// braid-br exists and neither BRAID_SOCKET_IFNAME nor NCCL_SOCKET_IFNAME is set, braidrun
// sets BRAID_SOCKET_IFNAME==braid-br in its own process only, so the root listens where the
// namespaces reach it (the children do not inherit it: in a namespace the interface is
// eth0). Any other NAME is a remote machine: the child execs $BRAID_RSH (default "ssh",
// split on blanks) NAME 'env VAR=VALUE... CMD ARGS...', passing the job's variables and
// every BRAID_* and NCCL_* variable of braidrun's environment on the command line; CMD
// should then be an absolute path valid on that machine, and the root must listen on an
// interface it reaches (BRAID_SOCKET_IFNAME).
//
// Each child runs in its own process group (so a kill reaches whatever CMD started) with
// stdin from /dev/null, and dies with braidrun (PR_SET_PDEATHSIG). A remote rank's ssh
// client is the child here: killing it closes the connection, and sshd then ends the remote
// command once it writes to it or exits (no tty is allocated).
//
// Exit status: the first failing child's, 0 if all succeed, 2 for a usage error, 127 if
// CMD (or the BRAID_RSH program) cannot be found or executed, 1 if braidrun itself fails
// (including a child that cannot enter its network namespace).
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "hosts.h"

namespace {

using namespace braidrun;

constexpr int kKillGraceMs = 2000;             // SIGTERM, then SIGKILL after this long
constexpr int kDrainGraceMs = 2000;            // after the last child, wait this long for EOF
constexpr int kTraceGraceMs = 1000;            // Fail: time the ranks get to dump before SIGTERM
constexpr size_t kMaxLineBytes = 1 << 20;      // longer lines are forwarded in pieces
constexpr char kClusterBridge[] = "braid-br";  // scripts/cluster.sh's bridge

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

struct Stream {
  int fd = -1;          // read end; -1 once closed
  int out = 1;          // where its lines go
  std::string pending;  // bytes after the last newline
};

struct Child {
  pid_t pid = -1;
  bool running = false;
  Stream streams[2];
};

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our reader went away: drop the output, keep supervising
    done += static_cast<size_t>(n);
  }
}

class Launcher {
 public:
  Launcher(std::vector<Host> hosts, std::vector<std::string> rsh, bool prefix)
      : hosts_(std::move(hosts)), rsh_(std::move(rsh)), prefix_(prefix) {
    for (size_t h = 0; h < hosts_.size(); ++h) {
      nranks_ += hosts_[h].nranks;
      rank_host_.insert(rank_host_.end(), hosts_[h].nranks, static_cast<int>(h));
    }
    children_.resize(nranks_);
  }

  int Run(char** cmd) {
    ChooseRootInterface();
    braidUniqueId id;
    braidResult_t r = braidGetUniqueId(&id);
    char id_text[2 * BRAID_UNIQUE_ID_BYTES + 1];
    if (r == braidSuccess) r = braidUniqueIdToString(&id, id_text);
    if (r != braidSuccess) {
      fprintf(stderr, "braidrun: cannot create the job's unique id: %s: %s\n",
              braidGetErrorString(r), braidGetLastError(nullptr));
      return 1;
    }
    // braidGetUniqueId read the configuration and warned about any bad setting once; the
    // ranks, which inherit the same environment, need not repeat it (config.cc).
    setenv("BRAID_CONFIG_WARNED", "1", 1);
    setenv("BRAID_LAUNCHER_PID", std::to_string(getpid()).c_str(), 1);
    if (!InstallSignals()) return 1;
    cmd_ = cmd;
    id_text_ = id_text;
    char dir[] = "/tmp/braidrun-elastic-XXXXXX";  // --respawn's rendezvous (train_elastic.cc)
    if (respawn && mkdtemp(dir) != nullptr) setenv("BRAID_ELASTIC_DIR", dir, 1);
    for (int rank = 0; rank < nranks_; ++rank) {
      if (!Spawn(rank, cmd, id_text)) {
        Fail(1);
        break;
      }
    }
    Supervise();
    if (respawn) std::filesystem::remove_all(dir, ignored_);
    return status_;
  }

 private:
  static bool InstallSignals() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      fprintf(stderr, "braidrun: pipe: %s\n", strerror(errno));
      return false;
    }
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // SIGUSR1 too: forwarded to every rank, each dumps its flight recorder (braid_trace.h); a
    // rank whose call failed sends it here (BRAID_LAUNCHER_PID) so that all of them dump.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1})
      sigaction(sig, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor
    return true;
  }

  // The bootstrap root must listen where every rank reaches it. Ranks in network
  // namespaces made by scripts/cluster.sh reach this machine only through its bridge, so
  // unless the user chose an interface, the root listens there. Set in this process only:
  // Environment() keeps it from the children, whose interface is eth0.
  void ChooseRootInterface() {
    bool any_netns = false, any_remote = false;
    for (const Host& h : hosts_) {
      any_netns = any_netns || h.netns_fd >= 0;
      any_remote = any_remote || h.remote;
    }
    if (!any_netns || getenv("BRAID_SOCKET_IFNAME") != nullptr ||
        getenv("NCCL_SOCKET_IFNAME") != nullptr)
      return;
    if (any_remote) {
      fprintf(stderr,
              "braidrun: warning: the job mixes network namespaces and remote hosts; set "
              "BRAID_SOCKET_IFNAME to an interface of this machine that all of them reach\n");
      return;
    }
    if (if_nametoindex(kClusterBridge) == 0) {
      fprintf(stderr,
              "braidrun: warning: no %s bridge (scripts/cluster.sh up makes one); if the "
              "namespaces cannot reach this machine's default interface, set "
              "BRAID_SOCKET_IFNAME\n",
              kClusterBridge);
      return;
    }
    setenv("BRAID_SOCKET_IFNAME", (std::string("=") + kClusterBridge).c_str(), 1);
    ifname_ours_ = true;
  }

  // The environment of rank `rank`: what it inherits from braidrun, and the job's own
  // variables. Built before fork: after fork in a process with threads (the bootstrap
  // root) only async-signal-safe calls are allowed.
  void Environment(int rank, const char* id_text, std::vector<std::string>* inherited,
                   std::vector<std::string>* job) const {
    const Host& host = hosts_[rank_host_[rank]];
    std::vector<std::string> ours = {"BRAID_UNIQUE_ID=", "BRAID_RANK=", "BRAID_NRANKS=",
                                     "BRAID_LOCAL_RANK=", "BRAID_LOCAL_SIZE="};
    if (host.netns_fd >= 0) ours.emplace_back("BRAID_HOST_ID=");
    if (ifname_ours_) ours.emplace_back("BRAID_SOCKET_IFNAME=");
    inherited->reserve(64);
    for (char** e = environ; *e != nullptr; ++e) {
      bool skip = false;
      for (const std::string& key : ours) skip = skip || strncmp(*e, key.c_str(), key.size()) == 0;
      if (!skip) inherited->emplace_back(*e);
    }
    job->push_back(std::string("BRAID_UNIQUE_ID=") + id_text);
    job->push_back("BRAID_RANK=" + std::to_string(rank));
    job->push_back("BRAID_NRANKS=" + std::to_string(nranks_));
    job->push_back("BRAID_LOCAL_RANK=" + std::to_string(rank - host.first_rank));
    job->push_back("BRAID_LOCAL_SIZE=" + std::to_string(host.nranks));
    if (host.netns_fd >= 0) job->push_back("BRAID_HOST_ID=" + host.name);
    if (joining_) job->push_back("BRAID_ELASTIC_JOIN=1");
  }

  bool Spawn(int rank, char** cmd, const char* id_text) {
    const Host& host = hosts_[rank_host_[rank]];
    std::vector<std::string> inherited, job;
    Environment(rank, id_text, &inherited, &job);
    std::vector<std::string> env, args;
    if (host.remote) {
      // rsh HOST 'env VAR=VALUE... CMD ARGS...': the remote shell gets one command line.
      // Only the job's variables and the user's BRAID_* / NCCL_* settings travel.
      std::string line = "env";
      for (const std::string& e : inherited) {
        if ((e.rfind("BRAID_", 0) == 0 || e.rfind("NCCL_", 0) == 0) &&
            e.rfind("BRAID_RSH=", 0) != 0)
          line += " " + ShellQuote(e);
      }
      for (const std::string& e : job) line += " " + ShellQuote(e);
      for (char** a = cmd; *a != nullptr; ++a) line += " " + ShellQuote(*a);
      args = rsh_;
      args.push_back(host.name);
      args.push_back(line);
      for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    } else {
      env = std::move(inherited);
      env.insert(env.end(), job.begin(), job.end());
      for (char** a = cmd; *a != nullptr; ++a) args.emplace_back(*a);
    }
    std::vector<char*> envp, argv;
    envp.reserve(env.size() + 1);
    for (std::string& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    argv.reserve(args.size() + 1);
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const std::string exec_error = "braidrun: cannot execute '" + args[0] + "': ";
    const std::string netns_error = "braidrun: rank " + std::to_string(rank) +
                                    " cannot enter network namespace " + kNetnsDir + host.name +
                                    ": ";
    const int netns_fd = host.netns_fd;

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
      fprintf(stderr, "braidrun: pipe: %s\n", strerror(errno));
      return false;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      fprintf(stderr, "braidrun: pipe: %s\n", strerror(errno));
      close(out[0]);
      close(out[1]);
      return false;
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "braidrun: fork of rank %d: %s\n", rank, strerror(errno));
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      return false;
    }
    if (pid == 0) {
      // Child: async-signal-safe calls only until exec.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);  // braidrun died before prctl took effect
      const int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd >= 0) dup2(null_fd, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGPIPE, &dfl, nullptr);  // ignored dispositions survive exec
      if (netns_fd >= 0) {
        if (setns(netns_fd, CLONE_NEWNET) != 0) {
          const int e = errno;
          (void)!write(2, netns_error.data(), netns_error.size());
          const char* reason = strerror(e);
          (void)!write(2, reason, strlen(reason));
          (void)!write(2, "\n", 1);
          _exit(1);
        }
        // Like `ip netns exec`: a private mount namespace with the namespace's own sysfs,
        // so /sys/class/net lists its interfaces. Best effort: getifaddrs and sockets
        // already see the right network without it.
        if (unshare(CLONE_NEWNS) == 0 &&
            mount("none", "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0) {
          mount("sysfs", "/sys", "sysfs", 0, nullptr);
        }
      }
      execvpe(argv[0], argv.data(), envp.data());
      const int e = errno;
      (void)!write(2, exec_error.data(), exec_error.size());
      const char* reason = strerror(e);
      (void)!write(2, reason, strlen(reason));
      (void)!write(2, "\n", 1);
      _exit(127);
    }
    setpgid(pid, pid);  // also from here, so a kill never races the child's own call
    close(out[1]);
    close(err[1]);
    Child& child = children_[rank];
    child.pid = pid;
    child.running = true;
    child.streams[0] = {out[0], 1, {}};
    child.streams[1] = {err[0], 2, {}};
    for (Stream& s : child.streams) fcntl(s.fd, F_SETFL, fcntl(s.fd, F_GETFL) | O_NONBLOCK);
    return true;
  }

  // Records the job's status (the first failure wins) and stops the other ranks.
  void Fail(int status) {
    if (failed_) return;
    failed_ = true;
    status_ = status;
    // With BRAID_TRACE_DIR, every rank dumps its flight recorder first (SIGUSR1) and is given
    // kTraceGraceMs to write it before SIGTERM.
    if (getenv("BRAID_TRACE_DIR")) {
      SignalAll(SIGUSR1);
      term_deadline_ = Now() + kTraceGraceMs;
    } else {
      SignalAll(SIGTERM);
    }
    kill_deadline_ = Now() + kKillGraceMs + (term_deadline_ >= 0 ? kTraceGraceMs : 0);
  }

  void SignalAll(int sig) {
    if (sig == SIGUSR1) return AskToDump();
    for (Child& c : children_) {
      if (c.running) kill(-c.pid, sig);
    }
  }

  // SIGUSR1 (dump the flight recorder) goes only to the processes of the ranks' groups that
  // catch it (/proc/PID/status SigCgt): its default action would end a process that has no
  // recorder yet, has BRAID_TRACE=off, or is a wrapper (sh -c) of a rank.
  void AskToDump() {
    DIR* proc = opendir("/proc");
    if (!proc) return;
    while (dirent* e = readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
      if (pid <= 0) continue;
      const pid_t group = getpgid(pid);
      bool ours = false;
      for (const Child& c : children_) ours = ours || (c.running && group == c.pid);
      if (ours && CatchesSignal(pid, SIGUSR1)) kill(pid, SIGUSR1);
    }
    closedir(proc);
  }

  static bool CatchesSignal(pid_t pid, int sig) {
    FILE* f = fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
    if (!f) return false;
    char line[256];
    unsigned long long caught = 0;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "SigCgt: %llx", &caught) == 1) break;
    fclose(f);
    return (caught >> (sig - 1)) & 1;
  }

  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // A rank killed during init (before its peers mapped its segment) cannot unlink it;
  // segments carry their creator's pid ("/dev/shm/braid-PID-..."), so its launcher can.
  static void RemoveSharedMemoryOf(pid_t pid) {
    const std::string prefix = "braid-" + std::to_string(pid) + "-";
    DIR* d = opendir("/dev/shm");
    if (!d) return;
    while (dirent* e = readdir(d)) {
      if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        shm_unlink(("/" + std::string(e->d_name)).c_str());
    }
    closedir(d);
  }

  void Reap() {
    for (int rank = 0; rank < nranks_; ++rank) {
      Child& c = children_[rank];
      if (!c.running) continue;
      int wstatus = 0;
      const pid_t r = waitpid(c.pid, &wstatus, WNOHANG);
      if (r != c.pid) continue;
      c.running = false;
      RemoveSharedMemoryOf(c.pid);
      int status = 0;
      if (WIFEXITED(wstatus)) {
        status = WEXITSTATUS(wstatus);
      } else if (WIFSIGNALED(wstatus)) {
        status = 128 + WTERMSIG(wstatus);
        if (!failed_) {
          fprintf(stderr, "braidrun: rank %d (pid %d) killed by signal %d (%s)\n", rank,
                  static_cast<int>(c.pid), WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
        }
      }
      if (status != 0 && !failed_ && elastic && ++lost_ < nranks_) {
        const bool again = respawn && respawns_ < nranks_;
        fprintf(stderr, "braidrun: rank %d lost (status %d); --elastic: the others go on%s\n", rank,
                status, again ? "; a replacement follows" : "");
        if (again) respawn_queue_.push_back(rank);
        continue;
      }
      if (status != 0 && !failed_) {
        if (WIFEXITED(wstatus) && nranks_ > 1) {
          fprintf(stderr,
                  "braidrun: rank %d (pid %d) exited with status %d; stopping the "
                  "other ranks\n",
                  rank, static_cast<int>(c.pid), status);
        }
        Fail(status);
      }
    }
  }

  void Forward(int rank, Stream& s, bool eof) {
    const std::string prefix = prefix_ ? std::to_string(rank) + ": " : std::string();
    std::string out;
    size_t start = 0;
    for (;;) {
      const size_t nl = s.pending.find('\n', start);
      if (nl == std::string::npos) break;
      out += prefix;
      out.append(s.pending, start, nl + 1 - start);
      start = nl + 1;
    }
    s.pending.erase(0, start);
    if (!s.pending.empty() && (eof || s.pending.size() >= kMaxLineBytes)) {
      out += prefix + s.pending + "\n";
      s.pending.clear();
    }
    if (!out.empty()) WriteAll(s.out, out);
  }

  void ReadStream(int rank, Stream& s) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(s.fd, buf, sizeof(buf));
      if (n > 0) {
        s.pending.append(buf, static_cast<size_t>(n));
        Forward(rank, s, false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      Forward(rank, s, true);  // EOF or error: flush the unterminated tail
      close(s.fd);
      s.fd = -1;
      return;
    }
  }

  void DrainSignals() {
    unsigned char sigs[64];
    ssize_t n;
    while ((n = read(g_signal_pipe[0], sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] != SIGCHLD) SignalAll(sigs[i]);
      }
    }
  }

  // --respawn: a lost rank's slot gets a new process (BRAID_ELASTIC_JOIN=1, which joins the
  // survivors through braidCommGrow) once the old one's output is all read.
  void Respawn() {
    for (size_t i = 0; i < respawn_queue_.size();) {
      const int rank = respawn_queue_[i];
      const Child& c = children_[rank];
      if (c.streams[0].fd >= 0 || c.streams[1].fd >= 0 || failed_) {
        ++i;
        continue;
      }
      respawn_queue_.erase(respawn_queue_.begin() + static_cast<std::ptrdiff_t>(i));
      joining_ = true;
      if (Spawn(rank, cmd_, id_text_.c_str())) {
        ++respawns_;
        --lost_;
        fprintf(stderr, "braidrun: rank %d: started a replacement (pid %d) to join the job\n", rank,
                static_cast<int>(children_[rank].pid));
      }
      joining_ = false;
    }
  }

  void Supervise() {
    int64_t drain_deadline = -1;
    for (;;) {
      Reap();
      Respawn();
      bool any_running = false, any_open = false;
      for (const Child& c : children_) {
        any_running = any_running || c.running;
        for (const Stream& s : c.streams) any_open = any_open || s.fd >= 0;
      }
      if (!any_running && !any_open && respawn_queue_.empty()) return;
      if (!any_running) {
        // Grandchildren may hold the pipes open; do not wait for them forever.
        if (drain_deadline < 0) drain_deadline = Now() + kDrainGraceMs;
        if (Now() >= drain_deadline) return;
      }
      if (term_deadline_ >= 0 && Now() >= term_deadline_) {
        SignalAll(SIGTERM);
        term_deadline_ = -1;
      }
      if (failed_ && any_running && kill_deadline_ >= 0 && Now() >= kill_deadline_) {
        SignalAll(SIGKILL);
        kill_deadline_ = -1;
      }

      std::vector<pollfd> fds;
      std::vector<std::pair<int, int>> owners;  // (rank, stream) of fds[i + 1]
      fds.push_back({g_signal_pipe[0], POLLIN, 0});
      for (int rank = 0; rank < nranks_; ++rank) {
        for (int k = 0; k < 2; ++k) {
          if (children_[rank].streams[k].fd < 0) continue;
          fds.push_back({children_[rank].streams[k].fd, POLLIN, 0});
          owners.emplace_back(rank, k);
        }
      }
      // SIGCHLD wakes the poll through the signal pipe; the timeout is a safety net.
      const int n = poll(fds.data(), fds.size(), 200);
      if (n < 0 && errno != EINTR) {
        fprintf(stderr, "braidrun: poll: %s\n", strerror(errno));
        Fail(1);
        SignalAll(SIGKILL);
        while (waitpid(-1, nullptr, 0) > 0) {
        }
        return;
      }
      if (n <= 0) continue;
      if (fds[0].revents != 0) DrainSignals();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto [rank, k] = owners[i - 1];
        ReadStream(rank, children_[rank].streams[k]);
      }
    }
  }

 public:
  bool elastic = false;  // --elastic: a lost rank does not stop the others
  bool respawn = false;  // --respawn: and a new process takes its place

 private:
  int lost_ = 0, respawns_ = 0;  // ranks lost under --elastic, replacements started
  std::vector<int> respawn_queue_;
  bool joining_ = false;
  char** cmd_ = nullptr;
  std::string id_text_;
  std::error_code ignored_;
  const std::vector<Host> hosts_;
  const std::vector<std::string> rsh_;  // BRAID_RSH's words, for remote hosts
  const bool prefix_;
  int nranks_ = 0;
  std::vector<int> rank_host_;  // rank -> index in hosts_
  std::vector<Child> children_;
  bool ifname_ours_ = false;  // BRAID_SOCKET_IFNAME was set by ChooseRootInterface
  bool failed_ = false;
  int status_ = 0;
  int64_t kill_deadline_ = -1;
  int64_t term_deadline_ = -1;  // Fail with BRAID_TRACE_DIR: SIGTERM once the ranks have dumped
};

}  // namespace

int main(int argc, char** argv) {
  int nranks = -1;
  std::string host_list;
  bool prefix = true, elastic = false, respawn = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      Usage(stdout);
      return 0;
    }
    if (arg == "--no-prefix" || arg == "--elastic" || arg == "--respawn") {
      (arg == "--no-prefix" ? prefix
       : arg == "--elastic" ? elastic
                            : respawn) = arg != "--no-prefix";
      continue;
    }
    if (arg == "--hosts" || arg == "-H") {
      if (i + 1 >= argc) UsageError("option " + arg + " needs a value (NAME:COUNT,...)");
      host_list = argv[++i];
      if (host_list.empty()) UsageError("option " + arg + " needs a value (NAME:COUNT,...)");
      continue;
    }
    if (arg.rfind("--hosts=", 0) == 0) {
      host_list = arg.substr(8);
      if (host_list.empty()) UsageError("option --hosts needs a value (NAME:COUNT,...)");
      continue;
    }
    std::string value;
    if (arg == "-n" || arg == "-np" || arg == "--nranks") {
      if (i + 1 >= argc) UsageError("option " + arg + " needs a value (the number of ranks)");
      value = argv[++i];
    } else if (arg.rfind("--nranks=", 0) == 0) {
      value = arg.substr(9);
    } else if (arg.size() > 2 && arg.rfind("-n", 0) == 0 && isdigit(arg[2])) {
      value = arg.substr(2);
    } else if (arg[0] == '-') {
      UsageError("unknown option '" + arg + "'");
    } else {
      break;  // the command
    }
    nranks = ParseCount(value);
    if (nranks == 0) {
      UsageError("invalid number of ranks '" + value + "': expected an integer from 1 to " +
                 std::to_string(kMaxRanks));
    }
  }
  std::vector<Host> hosts;
  if (!host_list.empty()) {
    hosts = ParseHosts(host_list);
    int total = 0;
    for (const Host& h : hosts) total += h.nranks;
    if (nranks >= 0 && nranks != total) {
      UsageError("-n " + std::to_string(nranks) + " disagrees with --hosts, which has " +
                 std::to_string(total) + " ranks");
    }
  } else {
    if (nranks < 0) UsageError("missing -n N (the number of ranks) or --hosts LIST");
    Host local;
    local.nranks = nranks;
    hosts.push_back(local);
  }
  if (i >= argc) UsageError("no command to run");
  if (!ClassifyHosts(hosts)) return 1;
  bool any_local = false, any_remote = false;
  for (const Host& h : hosts) {
    any_local = any_local || !h.remote;
    any_remote = any_remote || h.remote;
  }
  // A remote host's CMD is looked up there; only this machine's ranks need it here.
  if (any_local && !CommandExists(argv[i])) {
    fprintf(stderr, "braidrun: %s: command not found\n", argv[i]);
    return 127;
  }
  std::vector<std::string> rsh;
  if (any_remote) {
    const char* env_rsh = getenv("BRAID_RSH");
    rsh = SplitWords(env_rsh != nullptr ? env_rsh : "ssh");
    if (rsh.empty()) UsageError("BRAID_RSH is empty; unset it to use ssh");
    if (!CommandExists(rsh[0].c_str())) {
      fprintf(stderr,
              "braidrun: %s: command not found (remote hosts are reached with BRAID_RSH, "
              "default ssh; a host named like a network namespace in %s runs here)\n",
              rsh[0].c_str(), kNetnsDir);
      return 127;
    }
  }
  Launcher launcher(std::move(hosts), std::move(rsh), prefix);
  launcher.elastic = elastic || respawn;
  launcher.respawn = respawn;
  const int status = launcher.Run(argv + i);
  // _exit: the bootstrap root thread of a job whose ranks never initialised may still be
  // waiting; nothing of ours needs destructors.
  fflush(nullptr);
  _exit(status);
}
