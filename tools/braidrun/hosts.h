// braidrun's command line and host list (hosts.cc): usage, looking up commands, quoting for a
// remote shell, and --hosts parsed into hosts, each classified as this machine, an emulated
// host (a network namespace) or a remote one.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace braidrun {

constexpr int kMaxRanks = 65536;
constexpr char kNetnsDir[] = "/run/netns/";  // where `ip netns add` names namespaces

void Usage(FILE* out);
[[noreturn]] void UsageError(const std::string& msg);
bool IsExecutableFile(const std::string& path);
// Whether cmd runs: a path to an executable file, or a name found on PATH.
bool CommandExists(const char* cmd);
// s quoted for a POSIX shell.
std::string ShellQuote(const std::string& s);
// s split on blanks.
std::vector<std::string> SplitWords(const std::string& s);
// A rank count in [1, kMaxRanks], else a usage error.
int ParseCount(const std::string& value);

struct Host {
  std::string name;  // empty: this host, as with -n N
  int nranks = 0;
  int first_rank = 0;
  int netns_fd = -1;    // open /run/netns/NAME: an emulated host, entered with setns
  bool remote = false;  // reached with BRAID_RSH
};
// "NAME[:COUNT],..." into hosts, ranks numbered host by host; a usage error for a bad list.
std::vector<Host> ParseHosts(const std::string& list);
// Sets each host's netns_fd / remote; false (with a message) if a namespace cannot be opened.
bool ClassifyHosts(std::vector<Host>& hosts);

}  // namespace braidrun
