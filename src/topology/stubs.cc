// Fallbacks for the hwloc loader and live detection while their sources (hwloc_xml.cc,
// detect.cc) are absent from the build; src/meson.build defines BRAID_HAVE_* for those present.
#include "base/error.h"
#include "topology/topology.h"

namespace braid::topo {

#ifndef BRAID_HAVE_HWLOC_XML
braidResult_t loadHwlocXml(const std::string& path, System*) {
  return fail(braidInvalidUsage, "%s: hwloc XML loading is not built into this Braid",
              path.c_str());
}
#endif

#ifndef BRAID_HAVE_DETECT
braidResult_t detectSystem(System*) {
  return fail(braidInvalidUsage,
              "topology detection is not built into this Braid: pass a topology file (--file)");
}
#endif

}  // namespace braid::topo
