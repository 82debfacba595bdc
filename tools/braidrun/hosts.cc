#include "hosts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace braidrun {

void Usage(FILE* out) {
  fprintf(out,
          "usage: braidrun [--no-prefix] [--elastic|--respawn] -n N [--] CMD [ARGS...]\n"
          "       braidrun [--no-prefix] [--elastic|--respawn] --hosts|-H "
          "NAME[:COUNT][,NAME[:COUNT]...] "
          "[--] CMD [ARGS...]\n"
          "Runs the ranks of one Braid job: N copies of CMD on this host, or COUNT (default 1)\n"
          "on each NAME, ranks numbered host by host. Each gets BRAID_UNIQUE_ID, BRAID_RANK,\n"
          "BRAID_NRANKS, BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE (of its host).\n"
          "A NAME with a network namespace (/run/netns/NAME; see scripts/cluster.sh) is an\n"
          "emulated host: its ranks run inside the namespace with BRAID_HOST_ID=NAME, and\n"
          "unless BRAID_SOCKET_IFNAME is set the bootstrap root listens on braid-br. Any other\n"
          "NAME is a remote machine, reached with $BRAID_RSH (default ssh) NAME env VARS CMD...\n"
          "(give CMD as a path valid there, and set BRAID_SOCKET_IFNAME to an interface it\n"
          "reaches). Output lines are prefixed with 'RANK: ' unless --no-prefix is given.\n"
          "The first rank to fail stops the others; braidrun exits with its status. With\n"
          "--elastic a rank that fails is reported and the others go on (braid-train --elastic):\n"
          "braidrun exits with the first failure among them, 0 if none; --respawn (implies\n"
          "--elastic) starts a process in a lost rank's place with BRAID_ELASTIC_JOIN=1, which\n"
          "joins through braidCommGrow (BRAID_ELASTIC_DIR: the job's rendezvous folder).\n");
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

// Quotes s for a POSIX shell (the remote side of ssh joins its arguments into one line).
std::string ShellQuote(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && (isalnum(static_cast<unsigned char>(c)) || strchr("_@%+=:,./-", c) != nullptr);
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Words of a command line such as BRAID_RSH="ssh -p 2222" (split on blanks, no quoting).
std::vector<std::string> SplitWords(const std::string& s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) words.push_back(s.substr(i, j - i));
    i = j;
  }
  return words;
}

// Parses a rank count; 0 on anything but an integer from 1 to kMaxRanks.
int ParseCount(const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long v = strtol(value.c_str(), &end, 10);
  if (value.empty() || !isdigit(static_cast<unsigned char>(value[0])) || *end != '\0' ||
      errno == ERANGE || v < 1 || v > kMaxRanks)
    return 0;
  return static_cast<int>(v);
}

// One host of the job: this one (-n N), a network namespace, or a remote machine.

// "a:2,b:2,c" -> hosts with their rank counts (1 where none is given).
std::vector<Host> ParseHosts(const std::string& list) {
  std::vector<Host> hosts;
  int total = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string entry =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    Host h;
    const size_t colon = entry.rfind(':');
    h.name = entry.substr(0, colon);
    h.nranks = colon == std::string::npos ? 1 : ParseCount(entry.substr(colon + 1));
    if (h.name.empty() || h.name[0] == '-')
      UsageError("invalid host '" + entry + "' in --hosts: expected NAME or NAME:COUNT");
    if (h.nranks == 0)
      UsageError("invalid rank count in --hosts entry '" + entry +
                 "': expected an integer from 1 to " + std::to_string(kMaxRanks));
    for (const Host& other : hosts)
      if (other.name == h.name) UsageError("host '" + h.name + "' appears twice in --hosts");
    h.first_rank = total;
    total += h.nranks;
    if (total > kMaxRanks)
      UsageError("--hosts asks for more than " + std::to_string(kMaxRanks) + " ranks");
    hosts.push_back(h);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

// A host with a network namespace of its name is emulated on this machine; any other is a
// remote machine. Returns false (after saying why) if a namespace cannot be opened.
bool ClassifyHosts(std::vector<Host>& hosts) {
  for (Host& h : hosts) {
    if (h.name.empty()) continue;  // -n N: this host
    const std::string path = kNetnsDir + h.name;
    struct stat st;
    if (h.name.find('/') == std::string::npos && stat(path.c_str(), &st) == 0) {
      h.netns_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (h.netns_fd < 0) {
        fprintf(stderr, "braidrun: cannot open network namespace %s: %s\n", path.c_str(),
                strerror(errno));
        return false;
      }
    } else {
      h.remote = true;
    }
  }
  return true;
}

// One child's output stream (stdout or stderr), forwarded line by line.
}  // namespace braidrun
