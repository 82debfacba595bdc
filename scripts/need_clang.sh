# Sourced by fuzz.sh and sanitize.sh: installs clang, its runtime libraries (libFuzzer and
# the sanitizers' runtimes: Debian's libclang-rt-14-dev) and its linker (lld: a sanitized test
# links in 0.40 CPU-s, 0.93 with ld.bfd) when $CXX is clang and one is missing, then checks
# that $CXX runs.
need_clang() {
  case "$CXX" in *clang*) ;; *) return 0 ;; esac
  if ! command -v "$CXX" >/dev/null || ! command -v ld.lld >/dev/null ||
      ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q 'install ok installed'; then
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    # A fresh image has no package lists yet: update once if the first try fails.
    local install=($sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq
      --no-install-recommends clang libclang-rt-14-dev lld)
    "${install[@]}" >/dev/null 2>&1 || { $sudo apt-get update -qq && "${install[@]}" >/dev/null; } ||
      true
  fi
  if ! command -v "$CXX" >/dev/null || ! command -v ld.lld >/dev/null ||
      ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q 'install ok installed'; then
    echo "$(basename "$0"): $CXX or clang's runtimes missing (apt-get install clang libclang-rt-14-dev lld)" >&2
    exit 2
  fi
}
