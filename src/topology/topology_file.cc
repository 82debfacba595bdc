// loadTopologyFile: a topology file of any format, told by its content and handed to its reader:
// a directory is a /sys/class/infiniband snapshot, a bzip2/gzip/xz/tar archive an hwloc fsroot
// tarball, text not starting with '<' is one of the tool outputs (text_formats.cc), and XML goes
// by its root:
// <topology> hwloc, <graphs> or <graph> an NCCL graph file, anything else NCCL topology XML.
#include <sys/stat.h>
#include <tinyxml2.h>

#include <cstring>
#include <string>

#include "base/error.h"
#include "topology/topology.h"
#include "topology/xml_util.h"

namespace braid::topo {
namespace {

using tinyxml2::XMLDocument;

bool startsWithBytes(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

braidResult_t loadTopologyFile(const std::string& path, System* out) {
  std::string text;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return loadSysfsInfinibandDir(path, out);
  if (std::string why = readFile(path, &text); !why.empty())
    return fail(braidInvalidArgument, "%s: cannot read topology file: %s", path.c_str(),
                why.c_str());
  if (blankText(text)) return fail(braidInvalidArgument, "%s: empty file", path.c_str());
  // Archives: hwloc fsroot tarballs (a saved /sys and /proc), detected after extraction.
  if (startsWithBytes(text, "BZh") || startsWithBytes(text, "\x1f\x8b") ||
      startsWithBytes(text, "\xfd\x37zXZ") ||
      (text.size() > 262 && text.compare(257, 5, "ustar") == 0))
    return loadFsrootArchive(path, out);
  // XML starts with '<' (after a byte order mark); anything else is text, told by its content
  // (a pasted terminal's prompts and command lines included), never parsed as XML.
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == 0 && startsWithBytes(text, "\xef\xbb\xbf"))
    first = text.find_first_not_of(" \t\r\n", 3);
  if (first != std::string::npos && text[first] != '<') return loadTextTopology(text, path, out);
  XMLDocument doc;
  doc.Parse(text.data(), text.size());
  if (!doc.Error() && doc.RootElement() && std::strcmp(doc.RootElement()->Name(), "topology") == 0)
    return loadHwlocXml(path, out);
  if (!doc.Error() && doc.RootElement() &&
      (std::strcmp(doc.RootElement()->Name(), "graphs") == 0 ||
       std::strcmp(doc.RootElement()->Name(), "graph") == 0))
    return loadNcclGraphXmlString(text, path, out);
  return loadNcclTopoXmlString(text, path, out);
}

}  // namespace braid::topo
