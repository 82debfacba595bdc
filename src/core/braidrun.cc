// braidrun: starts N local processes as the ranks of one Braid job.
//
//   braidrun [--no-prefix] -n N [--] CMD [ARGS...]
//
// braidrun calls braidGetUniqueId, so the bootstrap root runs in braidrun's own process,
// then forks N children with BRAID_UNIQUE_ID (braidUniqueIdToString), BRAID_RANK,
// BRAID_NRANKS, BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE set, and execs CMD in each. It
// forwards every line a child writes to stdout or stderr to its own, prefixed with
// "RANK: " like srun --label (so nccl-tests log parsers read it). It fails fast like
// mpirun: when a child exits non-zero or dies by a signal, the others get SIGTERM, then
// SIGKILL 2 s later; braidrun reaps them all and exits with that first child's status
// (128 + signal for a signal). SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded.
//
// Each child runs in its own process group (so a kill reaches whatever CMD started) with
// stdin from /dev/null, and dies with braidrun (PR_SET_PDEATHSIG).
//
// Exit status: the first failing child's, 0 if all succeed, 2 for a usage error, 127 if
// CMD cannot be found or executed, 1 if braidrun itself fails.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
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
#include <string>
#include <vector>

#include "braid/braid.h"

namespace {

constexpr int kKillGraceMs = 2000;         // SIGTERM, then SIGKILL after this long
constexpr int kDrainGraceMs = 2000;        // after the last child, wait this long for EOF
constexpr size_t kMaxLineBytes = 1 << 20;  // longer lines are forwarded in pieces

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void Usage(FILE* out) {
  fprintf(out,
          "usage: braidrun [--no-prefix] -n N [--] CMD [ARGS...]\n"
          "Runs N copies of CMD on this host as the ranks of one Braid job: each gets\n"
          "BRAID_UNIQUE_ID, BRAID_RANK, BRAID_NRANKS, BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE.\n"
          "Output lines are prefixed with 'RANK: ' unless --no-prefix is given. The first\n"
          "rank to fail stops the others; braidrun exits with its status.\n");
}

[[noreturn]] void UsageError(const std::string& msg) {
  fprintf(stderr, "braidrun: %s\n", msg.c_str());
  Usage(stderr);
  exit(2);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Mirrors execvp's lookup so a missing command is reported once, before any fork.
bool CommandExists(const char* cmd) {
  if (strchr(cmd, '/') != nullptr) return IsExecutableFile(cmd);
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    const std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    // An empty PATH entry means the current directory.
    if (IsExecutableFile((dir.empty() ? std::string(".") : dir) + "/" + cmd)) return true;
    if (end == std::string::npos) return false;
    start = end + 1;
  }
}

// One child's output stream (stdout or stderr), forwarded line by line.
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
  Launcher(int nranks, bool prefix) : nranks_(nranks), prefix_(prefix), children_(nranks) {}

  int Run(char** cmd) {
    braidUniqueId id;
    braidResult_t r = braidGetUniqueId(&id);
    char id_text[2 * BRAID_UNIQUE_ID_BYTES + 1];
    if (r == braidSuccess) r = braidUniqueIdToString(&id, id_text);
    if (r != braidSuccess) {
      fprintf(stderr, "braidrun: cannot create the job's unique id: %s: %s\n",
              braidGetErrorString(r), braidGetLastError(nullptr));
      return 1;
    }
    if (!InstallSignals()) return 1;
    for (int rank = 0; rank < nranks_; ++rank) {
      if (!Spawn(rank, cmd, id_text)) {
        Fail(1);
        break;
      }
    }
    Supervise();
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
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaction(sig, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor
    return true;
  }

  // The environment of rank `rank`, built before fork: after fork in a process with
  // threads (the bootstrap root) only async-signal-safe calls are allowed.
  std::vector<std::string> Environment(int rank, const char* id_text) const {
    static const char* const kOurs[] = {"BRAID_UNIQUE_ID=", "BRAID_RANK=", "BRAID_NRANKS=",
                                        "BRAID_LOCAL_RANK=", "BRAID_LOCAL_SIZE="};
    std::vector<std::string> env;
    env.reserve(64);
    for (char** e = environ; *e != nullptr; ++e) {
      bool ours = false;
      for (const char* key : kOurs) ours = ours || strncmp(*e, key, strlen(key)) == 0;
      if (!ours) env.emplace_back(*e);
    }
    env.push_back(std::string("BRAID_UNIQUE_ID=") + id_text);
    env.push_back("BRAID_RANK=" + std::to_string(rank));
    env.push_back("BRAID_NRANKS=" + std::to_string(nranks_));
    env.push_back("BRAID_LOCAL_RANK=" + std::to_string(rank));
    env.push_back("BRAID_LOCAL_SIZE=" + std::to_string(nranks_));
    return env;
  }

  bool Spawn(int rank, char** cmd, const char* id_text) {
    std::vector<std::string> env = Environment(rank, id_text);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (std::string& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    const std::string exec_error = "braidrun: cannot execute '" + std::string(cmd[0]) + "': ";

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
      execvpe(cmd[0], cmd, envp.data());
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
    SignalAll(SIGTERM);
    kill_deadline_ = Now() + kKillGraceMs;
  }

  void SignalAll(int sig) {
    for (Child& c : children_) {
      if (c.running) kill(-c.pid, sig);
    }
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

  void Supervise() {
    int64_t drain_deadline = -1;
    for (;;) {
      Reap();
      bool any_running = false, any_open = false;
      for (const Child& c : children_) {
        any_running = any_running || c.running;
        for (const Stream& s : c.streams) any_open = any_open || s.fd >= 0;
      }
      if (!any_running && !any_open) return;
      if (!any_running) {
        // Grandchildren may hold the pipes open; do not wait for them forever.
        if (drain_deadline < 0) drain_deadline = Now() + kDrainGraceMs;
        if (Now() >= drain_deadline) return;
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

  const int nranks_;
  const bool prefix_;
  std::vector<Child> children_;
  bool failed_ = false;
  int status_ = 0;
  int64_t kill_deadline_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  int nranks = -1;
  bool prefix = true;
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
    if (arg == "--no-prefix") {
      prefix = false;
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
    char* end = nullptr;
    errno = 0;
    const long v = strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > 65536) {
      UsageError("invalid number of ranks '" + value + "': expected an integer from 1 to 65536");
    }
    nranks = static_cast<int>(v);
  }
  if (nranks < 0) UsageError("missing -n N (the number of ranks)");
  if (i >= argc) UsageError("no command to run");
  if (!CommandExists(argv[i])) {
    fprintf(stderr, "braidrun: %s: command not found\n", argv[i]);
    return 127;
  }
  const int status = Launcher(nranks, prefix).Run(argv + i);
  // _exit: the bootstrap root thread of a job whose ranks never initialised may still be
  // waiting; nothing of ours needs destructors.
  fflush(nullptr);
  _exit(status);
}
