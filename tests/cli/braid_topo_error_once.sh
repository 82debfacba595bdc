#!/bin/sh
# A braid-topo failure is reported once (the CLI's line), not also through the library's WARN
# log.
#   braid_topo_error_once.sh BRAID_TOPO
topo="$1"
n=$("$topo" --file /nonexistent/topo.xml 2>&1 | grep -c nonexistent)
[ "$n" = 1 ]
