#!/bin/sh
# An NCCL graph file loads in braid-topo: its RING channels are the rings of the JSON output.
#   braid_topo_graph.sh BRAID_TOPO GRAPH_XML
topo="$1"
graph="$2"
"$topo" --json --file "$graph" | grep -q '"rings": \[\[0, 1, 2, 3\], \[0, 3, 2, 1\]\]'
