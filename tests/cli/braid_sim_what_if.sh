#!/bin/sh
# braid-sim --what-if: NVLS against ring on one B300 host (NVLS faster: B/A above 1, the
# NVLink busy time split out), the same job on two topologies, and refused specs (exit 2, the
# message naming --what-if or the side at fault).
#   braid_sim_what_if.sh BRAID_SIM B300_XML GB300_XML
sim="$1"
b300="$2"
gb300="$3"
fail() { echo "braid_sim_what_if: $*" >&2; exit 1; }

out=$("$sim" --topo "$b300" --hosts 1 -b 1G -e 1G --what-if algo=nvls,ring) || fail "algo= failed"
echo "$out"
echo "$out" | grep -q "nvlink .*network .*reduce .*latency .*B/A" || fail "no breakdown header"
a=$(echo "$out" | awk '$2 == "A" && $3 == "nvls" {print $4}')
b=$(echo "$out" | awk '$2 == "B" && $3 == "ring" {print $4, $NF}')
[ -n "$a" ] && [ -n "$b" ] || fail "no nvls (A) or ring (B) row"
echo "$b" | awk '{exit !($2 > 1.1)}' || fail "ring over nvls should be above 1.1 on 8 B300: $b"

out=$("$sim" --topo "$b300" --hosts 1 -b 256M -e 256M --what-if "topo=$gb300") ||
  fail "topo= failed"
echo "$out" | grep -q "B's job: 4 ranks" || fail "B is not the GB300 tray's job"
echo "$out" | awk '$2 == "B" {found = 1} END {exit !found}' || fail "no B row"

# topo= on hosts of different GPU counts (8 B300 against a 4-GPU GB300 tray): both sides at
# the same nccl-tests size, each side's count per rank its own.
out=$("$sim" --topo "$b300" --hosts 1 -b 64M -e 64M --collective allgather --what-if "topo=$gb300") ||
  fail "topo= allgather failed"
echo "$out"
sizes=$(echo "$out" | awk '$2 == "A" || $2 == "B" {print $2, $1}' | sort | tr '\n' ' ')
[ "$sizes" = "A 67108864 B 67108864 " ] || fail "topo= sides at different sizes: $sizes"

# A side with no algorithm for the call says why after the n/a (NVLS on two GB300 trays
# without --mnnvl: more than one NVLink domain).
out=$("$sim" --topo "$gb300" --hosts 2 -b 64M -e 64M --what-if algo=nvls,ring) ||
  fail "algo=nvls,ring on 2 trays failed"
echo "$out" | grep -q " A none .* n/a  # .*nvls cannot run" || fail "no reason for A's none: $out"

# --nvls off: the ring's pick on both sides, a ratio of 1.
out=$("$sim" --topo "$b300" --hosts 1 -b 1G -e 1G --nvls off --what-if algo=all,ring) ||
  fail "--nvls off failed"
echo "$out" | awk '$2 == "B" {exit !($NF == "1.000")}' || fail "with --nvls off all should pick ring"

refused() {
  err=$("$sim" --topo "$b300" --hosts 1 -b 1G -e 1G "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2"
  echo "$err" | grep -q -e "$1" -e "what-if" || fail "$*: message does not name the argument: $err"
}
refused --what-if algo=nvls
refused --what-if algo=nvls,bogus
refused --what-if algo=nvls,
refused --what-if frob=1
refused --what-if "topo=/nonexistent.xml"
refused --nvls maybe
refused --nvls-channels 0
refused --mnnvl-domain 18

# Refusals whose message must hold a given text: refused_with TEXT ARGS...
refused_with() {
  want="$1"
  shift
  err=$("$sim" --topo "$b300" --hosts 1 -b 1G -e 1G "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2"
  echo "$err" | grep -q -e "$want" || fail "$*: message does not say '$want': $err"
}
# A second --what-if is refused, not a silent replacement of the first.
refused_with "what-if given twice" --what-if algo=nvls,ring --what-if algo=ring,tree
# --nvls off with a side of NVLS algorithms only: refused, saying why.
refused_with "nvls off takes NVLS out" --nvls off --what-if algo=nvls,ring
refused_with "side B is NVLS only" --nvls off --what-if algo=all,nvls+nvlstree
echo "braid_sim_what_if: ok"
