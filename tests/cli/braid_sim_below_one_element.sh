#!/bin/sh
# braid-sim with sizes below one element per rank: a line that says so, not an empty table.
#   braid_sim_below_one_element.sh BRAID_SIM TOPO_XML
sim="$1"
topo_xml="$2"
"$sim" --topo "$topo_xml" --hosts 2 -b 1 -e 16 --collective allgather |
  grep -q "allgather: no size from -b 1 to -e 16 holds one float element per rank"
