#!/bin/sh
# Byte-count settings (braid::parseByteSize), through all_reduce_perf on 2 thread ranks: valid
# values with suffixes up to T run without a warning; a malformed value warns once, naming the
# variable that was set (NCCL_X too), and the run goes on with the default; a well-formed value
# out of range fails init (issue 38), naming the variable and the range. Under braidrun the
# warning comes once (braidrun's), not once more per rank.
#   env_byte_counts.sh ALL_REDUCE_PERF BRAIDRUN
perf="$1"
braidrun="$2"
e=$(mktemp)
trap 'rm -f "$e"' EXIT
BRAID_CACHE_BYTES=1T BRAID_CHUNKSIZE=64KiB BRAID_BUFFSIZE=1m "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 \
  2> "$e" >/dev/null || { echo "valid values: exit $?"; cat "$e"; exit 1; }
if grep -q BRAID_ "$e"; then echo "valid values warned:"; cat "$e"; exit 1; fi
for v in "BRAID_CHUNKSIZE=1.5M" "BRAID_BUFFSIZE=2X"; do
  env "$v" "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 2> "$e" >/dev/null ||
    { echo "$v: exit $?"; cat "$e"; exit 1; }
  grep -q "WARN ${v%%=*}=" "$e" || { echo "$v: no warning naming it"; cat "$e"; exit 1; }
done
for v in "BRAID_CHUNKSIZE=1T" "BRAID_CACHE_BYTES=2T" "NCCL_BUFFSIZE=1T"; do
  if env "$v" "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 > "$e" 2>&1; then
    echo "$v: init succeeded"; cat "$e"; exit 1
  fi
  grep -q "${v%%=*}=\"${v#*=}\" is not a byte count in" "$e" ||
    { echo "$v: no error naming it"; cat "$e"; exit 1; }
done
n=$(BRAID_CHUNKSIZE=1.5M "$braidrun" -n 2 -- "$perf" -b 8 -e 8 -n 1 -w 0 2>&1 |
  grep -c "WARN BRAID_CHUNKSIZE=")
[ "$n" = 1 ] || { echo "braidrun -n 2: the warning came $n times"; exit 1; }
echo ok
