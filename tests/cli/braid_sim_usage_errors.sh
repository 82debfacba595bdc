#!/bin/sh
# braid-sim's usage errors that depend on more than one flag: exit 2 and a message naming the
# flag and its constraint (--mnnvl-domain K: 1..H dividing --hosts H; -b/-e: at most 2^48
# bytes for the call on all ranks), refused before the table's header.
#   braid_sim_usage_errors.sh BRAID_SIM GB300_XML
sim="$1"
gb300="$2"
fail() { echo "braid_sim_usage_errors: $*" >&2; exit 1; }

refused_with() {
  want="$1"
  shift
  out=$("$sim" --topo "$gb300" "$@" 2>/tmp/braid_sim_usage_errors.$$)
  rc=$?
  err=$(cat /tmp/braid_sim_usage_errors.$$)
  rm -f /tmp/braid_sim_usage_errors.$$
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2: $err"
  [ -z "$out" ] || fail "$*: printed before refusing: $out"
  echo "$err" | grep -q -e "$want" || fail "$*: message does not say '$want': $err"
}
# --mnnvl-domain above --hosts (was cut down to --hosts), not dividing it (was exit 1), or
# below 1.
refused_with "mnnvl-domain 1000: must be 1..4 (--hosts) and divide" --hosts 4 --mnnvl \
  --mnnvl-domain 1000
refused_with "mnnvl-domain 3: must be 1..4 (--hosts) and divide" --hosts 4 --mnnvl --mnnvl-domain 3
refused_with "bad value '0' for --mnnvl-domain" --hosts 4 --mnnvl --mnnvl-domain 0
refused_with "bad value '-1' for --mnnvl-domain" --hosts 4 --mnnvl --mnnvl-domain -1
# Whole domains are taken.
"$sim" --topo "$gb300" --hosts 4 --mnnvl --mnnvl-domain 2 -b 1M -e 1M >/dev/null ||
  fail "--mnnvl-domain 2 of --hosts 4 refused"
# Sizes past 2^48 bytes: refused at the flags (-b/-e), or for the job's ranks (-e).
refused_with "^braid-sim: -e .* more than 2^48 bytes" --hosts 1 -b 99999T -e 99999T
refused_with "^braid-sim: -e .* more than 2^48 bytes" --hosts 1 -b 1K -e 300T
refused_with "^braid-sim: -e .* 4096 ranks is more than 2^48 bytes" --hosts 1024 -b 1G -e 128T
refused_with "^braid-sim: -e .* more than 2^48 bytes" --hosts 1024 -b 1G -e 128T \
  --what-if algo=all,ring
echo "braid_sim_usage_errors: ok"
