#!/usr/bin/env bash
# Braid installed as NCCL is: `meson install` of BUILD into a scratch prefix (DESTDIR), then
#  1. the files a user of NCCL and of Braid looks for are there (libraries with their
#     symlinks, nccl.h, braid/braid.h, braid.pc, nccl.pc, the perf binaries and tools);
#  2. an NCCL program (nccl_app.c) built with `pkg-config --cflags --libs nccl` runs on it, by
#     its rpath and through LD_LIBRARY_PATH;
#  3. where NVIDIA's NCCL is installed (/usr/local/cuda: nccl.h and libnccl.so), the same program
#     built against NVIDIA's header and library runs unchanged on Braid's libnccl.so.2 through
#     LD_LIBRARY_PATH, and nccl_abi_dump.c prints the same ABI against both headers.
# Otherwise 3 is skipped, saying so.
#   nccl_install.sh BUILD SOURCE_DIR(tests/compat)
set -euo pipefail
build="$1" src="$2"
# The build's C compiler and, in a sanitizer build, its -fsanitize (the installed libraries need
# the sanitizer's runtime in the program) and the libraries that runtime needs: CC,
# NCCL_APP_CFLAGS and NCCL_APP_LIBS from tests/compat/meson.build.
read -ra cc <<<"${CC:-cc} ${NCCL_APP_CFLAGS:-}"
read -ra libs <<<"${NCCL_APP_LIBS:-}"  # after the sources
tmp="$(mktemp -d /tmp/braid-install.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
fail() { echo "nccl_install: $*" >&2; exit 1; }

meson install -C "$build" --no-rebuild --destdir "$root" --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install failed"; }

pc="$(find "$root" -name nccl.pc -path '*pkgconfig*' | head -n1)"
[ -n "$pc" ] || fail "no nccl.pc installed"
pcdir="$(dirname "$pc")"
[ -f "$pcdir/braid.pc" ] || fail "no braid.pc beside $pc"
export PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH=
# (pkgconf puts the sysroot in front of --variable's paths too; pkg-config does not.)
libdir="$root$(PKG_CONFIG_SYSROOT_DIR='' pkg-config --variable=libdir nccl)"
incdir="$root$(PKG_CONFIG_SYSROOT_DIR='' pkg-config --variable=includedir nccl)"
for f in "$libdir/libnccl.so" "$libdir/libnccl.so.2" "$libdir/libbraid.so" "$incdir/nccl.h" \
         "$incdir/braid/braid.h"; do
  [ -e "$f" ] || fail "${f#"$root"} is not installed"
done
bindir="$(find "$root" -type d -name bin | head -n1)"
for t in all_reduce_perf braid-tune; do
  [ -x "$bindir/$t" ] || fail "$t is not installed in ${bindir#"$root"}"
done
echo "nccl_install: installed $(find "$root" -type f | wc -l) files; nccl.pc and braid.pc in ${pcdir#"$root"}"

run_app() {  # BINARY WHAT [LIBRARY_PATH]
  local out
  out="$(LD_LIBRARY_PATH="${3:-}" "$1" 2>&1)" || fail "$2: $out"
  grep -q "^nccl_app: version [0-9]*, 3 ranks, ok$" <<<"$out" || fail "$2 printed: $out"
  echo "nccl_app ($2): $out"
}

# 1. Relinking: -lnccl against the installed Braid, found by pkg-config, with an rpath as the
# README shows (libnccl.so.2 finds libbraid beside itself through its own $ORIGIN runpath).
read -ra flags <<<"$(pkg-config --cflags --libs nccl)"
"${cc[@]}" -std=c11 -D_POSIX_C_SOURCE=200809L "$src/nccl_app.c" "${flags[@]}" -Wl,-rpath,"$libdir" \
  -lpthread "${libs[@]}" -o "$tmp/app_braid" ||
  fail "nccl_app.c does not build with pkg-config's flags: ${flags[*]}"
run_app "$tmp/app_braid" "built with pkg-config --cflags --libs nccl"
v_braid="$("$tmp/app_braid" | sed 's/.*version \([0-9]*\),.*/\1/')"
# 2. The same program, its rpath overridden at run time by LD_LIBRARY_PATH (no relink).
run_app "$tmp/app_braid" "run through LD_LIBRARY_PATH" "$libdir"

# 3. An application built against NVIDIA's NCCL, run on Braid's libnccl.so.2.
cuda="${CUDA_HOME:-/usr/local/cuda}"
nvlib=""
for d in "$cuda/lib64" "$cuda/lib"; do [ -e "$d/libnccl.so" ] && nvlib="$d" && break; done
if [ ! -f "$cuda/include/nccl.h" ] || [ -z "$nvlib" ]; then
  echo "nccl_install: skipped the NVIDIA-built program and the ABI comparison: no NVIDIA NCCL" \
       "(nccl.h and libnccl.so) under $cuda"
  exit 0
fi
nv_version="$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\)$/\1/p' "$cuda/include/nccl.h")"
"${cc[@]}" -std=c11 -D_POSIX_C_SOURCE=200809L "$src/nccl_app.c" -I"$cuda/include" -L"$nvlib" -lnccl \
  -lpthread "${libs[@]}" -o "$tmp/app_nvidia" || fail "nccl_app.c does not build against NVIDIA's NCCL in $cuda"
readelf -d "$tmp/app_nvidia" | grep -q 'NEEDED.*\[libnccl\.so\.2\]' ||
  fail "the NVIDIA-built program does not need libnccl.so.2"
run_app "$tmp/app_nvidia" "built against NVIDIA's NCCL $nv_version, run on Braid's libnccl.so.2" \
  "$libdir"
v_nv="$(LD_LIBRARY_PATH="$libdir" "$tmp/app_nvidia" | sed 's/.*version \([0-9]*\),.*/\1/')"
[ "$v_nv" = "$v_braid" ] || fail "the NVIDIA-built program reported version $v_nv, not Braid's $v_braid"

"${cc[@]}" -std=c11 "$src/nccl_abi_dump.c" -I"$cuda/include" "${libs[@]}" -o "$tmp/abi_nvidia"
"${cc[@]}" -std=c11 "$src/nccl_abi_dump.c" -I"$incdir" "${libs[@]}" -o "$tmp/abi_braid"
"$tmp/abi_nvidia" >"$tmp/abi_nvidia.txt"
"$tmp/abi_braid" >"$tmp/abi_braid.txt"
diff -u "$tmp/abi_nvidia.txt" "$tmp/abi_braid.txt" >&2 ||
  fail "the ABI differs from NVIDIA's NCCL $nv_version header (above: - NVIDIA, + Braid)"
echo "nccl_install: $(wc -l <"$tmp/abi_braid.txt") ABI values the same as NVIDIA's NCCL $nv_version header"
