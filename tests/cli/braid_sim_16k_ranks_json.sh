#!/bin/sh
# braid-sim --json on 2,048 hosts of the topology file's 8 GPUs: 16,384 ranks, every collective.
#   braid_sim_16k_ranks_json.sh BRAID_SIM TOPO_XML
sim="$1"
topo_xml="$2"
"$sim" --json --topo "$topo_xml" --hosts 2048 --collective all | grep -q '"ranks": 16384'
