// hwloc Linux fsroot tarballs (hwloc's tests/hwloc/linux/*.tar.bz2: a saved /sys and /proc)
// read as topology files: extracted with libarchive into a fresh temporary directory, detected
// there with detectSystemAt, and removed again.
//
// The archive is untrusted input: entries with an absolute path or a ".." component are refused
// before anything is written, writes never follow a symlink the archive made
// (ARCHIVE_EXTRACT_SECURE_SYMLINKS), and the total size and entry count are bounded. Symlinks
// are kept (sysfs is made of them) only when relative and, counted lexically from the link's
// directory, inside the extraction directory; after extraction every symlink is resolved and
// one leading outside (through a chain of links) refuses the archive too, since hwloc reads
// through them (proc/cpuinfo -> /dev/zero would never end). Only regular files, directories,
// symlinks and hard links to regular files extracted earlier are accepted: no FIFO, device or
// socket. Entry names are prefixed with the temporary
// directory, an absolute path, so ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS (which would refuse
// every prefixed name) is replaced by the check on the names as the archive gives them.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "base/error.h"
#include "topology/topology.h"

#ifdef BRAID_HAVE_LIBARCHIVE
#include <archive.h>
#include <archive_entry.h>
#endif

namespace braid::topo {

#ifdef BRAID_HAVE_LIBARCHIVE
namespace {

constexpr int64_t kMaxBytes = int64_t{256} << 20;
constexpr int64_t kMaxEntries = 200000;

int removeOne(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

// Owns the temporary directory: removes it and everything under it (without following
// symlinks) when it goes out of scope, whatever happened.
class TempDir {
 public:
  ~TempDir() {
    if (!path_.empty()) ::nftw(path_.c_str(), removeOne, 16, FTW_DEPTH | FTW_PHYS);
  }
  // "" on success, else why not.
  std::string create() {
    const char* env = std::getenv("TMPDIR");
    std::string tmpl = std::string(env && *env ? env : "/tmp") + "/braid-fsroot-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      return "cannot create a directory in " + tmpl.substr(0, tmpl.rfind('/')) + ": " +
             std::strerror(errno);
    path_ = tmpl;
    // Resolved, so the symlink check on written paths never trips over a symlinked $TMPDIR.
    char real[PATH_MAX];
    if (::realpath(tmpl.c_str(), real) != nullptr)
      real_ = real;
    else
      real_ = tmpl;
    return "";
  }
  const std::string& path() const { return real_; }

 private:
  std::string path_, real_;
};

// True when name would land outside the extraction directory: absolute, or with a ".."
// component.
bool escapes(const char* name) {
  if (name == nullptr || name[0] == '/') return true;
  std::string s = name;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t slash = s.find('/', pos);
    if (slash == std::string::npos) slash = s.size();
    if (s.compare(pos, slash - pos, "..") == 0 && slash - pos == 2) return true;
    pos = slash + 1;
  }
  return false;
}

// True when a symlink at name (inside the extraction directory) with this target points
// outside it: an absolute target, or more ".." components than the link's depth allows, counted
// lexically from the link's directory.
bool linkEscapes(const std::string& name, const char* target) {
  if (target == nullptr || target[0] == '\0' || target[0] == '/') return true;
  long depth = 0;
  auto walk = [&depth](const std::string& s, size_t end) {
    size_t pos = 0;
    while (pos < end) {
      size_t slash = s.find('/', pos);
      if (slash == std::string::npos || slash > end) slash = end;
      size_t len = slash - pos;
      if (len == 0 || (len == 1 && s[pos] == '.')) {
        // empty or ".": no move
      } else if (len == 2 && s.compare(pos, 2, "..") == 0) {
        if (--depth < 0) return false;
      } else {
        ++depth;
      }
      pos = slash + 1;
    }
    return true;
  };
  // The link's own directory: its name without the last component.
  size_t last = name.find_last_of('/');
  if (last != std::string::npos && !walk(name, last)) return true;
  std::string t = target;
  return !walk(t, t.size());
}

// The entry name as a path relative to the extraction directory, without "." and empty
// components, so hard link targets can be matched against the names extracted before.
std::string normalName(const std::string& name) {
  std::string out;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t slash = name.find('/', pos);
    if (slash == std::string::npos) slash = name.size();
    size_t len = slash - pos;
    if (len != 0 && !(len == 1 && name[pos] == '.')) {
      if (!out.empty()) out += '/';
      out.append(name, pos, len);
    }
    pos = slash + 1;
  }
  return out;
}

const char* typeName(mode_t type) {
  switch (type) {
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFCHR:
      return "a character device";
    case AE_IFBLK:
      return "a block device";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "not a regular file, directory or symlink";
  }
}

// After extraction: the first symlink under root that resolves outside it, or "".
thread_local std::string g_root, g_escaped;
int checkLink(const char* path, const struct stat* st, int, struct FTW*) {
  if (!S_ISLNK(st->st_mode)) return 0;
  char real[PATH_MAX];
  // A dangling link or a loop points at nothing that can be read: harmless.
  if (::realpath(path, real) == nullptr) return 0;
  std::string r = real;
  if (r == g_root || (r.size() > g_root.size() && r.compare(0, g_root.size(), g_root) == 0 &&
                      r[g_root.size()] == '/'))
    return 0;
  g_escaped = path;
  return 1;
}

struct ReadCloser {
  archive* a;
  ~ReadCloser() { archive_read_free(a); }
};
struct WriteCloser {
  archive* a;
  ~WriteCloser() { archive_write_free(a); }
};

braidResult_t extract(const std::string& path, const std::string& dir) {
  ReadCloser in{archive_read_new()};
  WriteCloser out{archive_write_disk_new()};
  archive_read_support_filter_all(in.a);
  archive_read_support_format_all(in.a);
  archive_write_disk_set_options(out.a,
                                 ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS);
  if (archive_read_open_filename(in.a, path.c_str(), 1 << 16) != ARCHIVE_OK)
    return fail(braidInvalidArgument, "%s: not a readable archive: %s", path.c_str(),
                archive_error_string(in.a));
  int64_t entries = 0, bytes = 0;
  std::set<std::string> files;  // regular files extracted so far, for hard link targets
  archive_entry* e = nullptr;
  for (;;) {
    int r = archive_read_next_header(in.a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      return fail(braidInvalidArgument, "%s: corrupt archive: %s", path.c_str(),
                  archive_error_string(in.a));
    if (++entries > kMaxEntries)
      return fail(braidInvalidArgument, "%s: more than %lld entries: not an fsroot snapshot",
                  path.c_str(), static_cast<long long>(kMaxEntries));
    // Copies: the entry's strings change under the pointers once the entry is renamed below.
    const char* raw = archive_entry_pathname(e);
    if (escapes(raw))
      return fail(braidInvalidArgument,
                  "%s: entry '%s' would be written outside the extraction directory (absolute "
                  "path or ..): archive refused",
                  path.c_str(), raw ? raw : "(null)");
    const std::string name = raw;
    const char* rawHard = archive_entry_hardlink(e);
    const bool isHard = rawHard != nullptr;
    const std::string hard = isHard ? rawHard : "";
    mode_t type = archive_entry_filetype(e);
    if (isHard) {
      if (escapes(rawHard))
        return fail(braidInvalidArgument,
                    "%s: entry '%s' is a hard link to '%s', outside the archive: archive refused",
                    path.c_str(), name.c_str(), hard.c_str());
      if (!files.count(normalName(hard)))
        return fail(braidInvalidArgument,
                    "%s: entry '%s' is a hard link to '%s', not a regular file extracted before "
                    "it: archive refused",
                    path.c_str(), name.c_str(), hard.c_str());
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      if (linkEscapes(name, target))
        return fail(braidInvalidArgument,
                    "%s: entry '%s' is a symlink to '%s', %s the extraction directory: archive "
                    "refused",
                    path.c_str(), name.c_str(), target ? target : "(null)",
                    target && target[0] == '/' ? "an absolute path, outside" : "outside");
    } else if (type != AE_IFREG && type != AE_IFDIR) {
      return fail(braidInvalidArgument,
                  "%s: entry '%s' is %s, not a regular file, directory or symlink: archive "
                  "refused",
                  path.c_str(), name.c_str(), typeName(type));
    }
    std::string dest = dir + "/" + name;
    archive_entry_set_pathname(e, dest.c_str());
    if (isHard) archive_entry_set_hardlink(e, (dir + "/" + hard).c_str());
    // Saved sysfs is read-only; keep it readable and removable by its owner.
    if (type == AE_IFDIR)
      archive_entry_set_perm(e, 0755);
    else if (type == AE_IFREG)
      archive_entry_set_perm(e, 0644);
    r = archive_write_header(out.a, e);
    if (r < ARCHIVE_WARN)
      return fail(braidInvalidArgument, "%s: cannot extract '%s': %s", path.c_str(), name.c_str(),
                  archive_error_string(out.a));
    // A later entry of the same name replaces the file: only regular files are link targets.
    if (type == AE_IFREG)
      files.insert(normalName(name));
    else
      files.erase(normalName(name));
    if (type != AE_IFREG || r != ARCHIVE_OK) continue;
    const void* buf;
    size_t size;
    la_int64_t offset;
    while ((r = archive_read_data_block(in.a, &buf, &size, &offset)) == ARCHIVE_OK) {
      bytes += static_cast<int64_t>(size);
      if (bytes > kMaxBytes)
        return fail(braidInvalidArgument,
                    "%s: more than %lld MiB uncompressed: not an fsroot "
                    "snapshot",
                    path.c_str(), static_cast<long long>(kMaxBytes >> 20));
      if (archive_write_data_block(out.a, buf, size, offset) < ARCHIVE_WARN)
        return fail(braidInvalidArgument, "%s: cannot write '%s': %s", path.c_str(), name.c_str(),
                    archive_error_string(out.a));
    }
    if (r != ARCHIVE_EOF)
      return fail(braidInvalidArgument, "%s: corrupt archive at '%s': %s", path.c_str(),
                  name.c_str(), archive_error_string(in.a));
    archive_write_finish_entry(out.a);
  }
  if (archive_write_close(out.a) != ARCHIVE_OK)
    return fail(braidInvalidArgument, "%s: cannot finish extraction: %s", path.c_str(),
                archive_error_string(out.a));
  // A chain of links each inside on its own (up -> .., z -> up/..) can still lead outside.
  g_root = dir;
  g_escaped.clear();
  ::nftw(dir.c_str(), checkLink, 16, FTW_PHYS);
  if (!g_escaped.empty())
    return fail(braidInvalidArgument,
                "%s: entry '%s' is a symlink that resolves outside the extraction directory: "
                "archive refused",
                path.c_str(), g_escaped.substr(dir.size() + 1).c_str());
  return braidSuccess;
}

bool isDir(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool fsrootArchiveSupported() { return true; }

braidResult_t loadFsrootArchive(const std::string& path, System* out) {
  if (out == nullptr) return fail(braidInvalidArgument, "loadFsrootArchive: out is null");
  TempDir tmp;
  if (std::string why = tmp.create(); !why.empty())
    return fail(braidInvalidArgument, "%s: %s", path.c_str(), why.c_str());
  BRAID_TRY(extract(path, tmp.path()));
  // hwloc's tarballs hold one top directory (nvidiagpunumanodes/) that is the root.
  std::string root;
  if (isDir(tmp.path() + "/sys")) {
    root = tmp.path();
  } else {
    std::string found;
    int n = 0;
    if (DIR* d = ::opendir(tmp.path().c_str())) {
      while (dirent* de = ::readdir(d)) {
        std::string sub = de->d_name;
        if (sub == "." || sub == "..") continue;
        if (isDir(tmp.path() + "/" + sub + "/sys")) {
          found = tmp.path() + "/" + sub;
          ++n;
        }
      }
      ::closedir(d);
    }
    if (n != 1)
      return fail(braidInvalidArgument,
                  "%s: not an hwloc fsroot archive: %s top directory holding sys/", path.c_str(),
                  n == 0 ? "no" : "more than one");
    root = found;
  }
  System sys;
  BRAID_TRY(detectSystemAt(root, &sys));
  sys.source = path;
  // Name places inside the archive rather than the directory that is about to go away.
  for (std::string& n : sys.notes)
    for (size_t at; (at = n.find(tmp.path())) != std::string::npos;)
      n.replace(at, tmp.path().size(), path);
  sys.notes.push_back(path + ": hwloc fsroot archive, detected after extraction (" +
                      root.substr(tmp.path().size()) + "/ of the archive as the root)");
  *out = std::move(sys);
  return braidSuccess;
}

#else

bool fsrootArchiveSupported() { return false; }

braidResult_t loadFsrootArchive(const std::string& path, System*) {
  return fail(braidInvalidUsage,
              "%s: a compressed or tar archive; this Braid was built without libarchive, so "
              "archives are not read: install libarchive-dev and rebuild, or, if it is an hwloc "
              "fsroot snapshot, extract it (tar xjf) and pass the directory to --fsroot",
              path.c_str());
}

#endif

}  // namespace braid::topo
