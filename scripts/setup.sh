#!/usr/bin/env bash
# Installs what Braid needs on Debian 12 (only what is missing), configures Meson once and
# builds. Idempotent: a second run installs nothing and rebuilds only what changed.
# Usage: scripts/setup.sh [--no-build | --base-packages] [BUILD_DIR]   (default: build;
# --no-build installs and configures only; --base-packages installs every package but torch's
# and stops: CI then starts its sanitizer builds, which leave torch out, while the next call
# installs torch's large packages)
# With torch (python3-torch), the build makes the package braid_torch in BUILD_DIR/python, and
# this script writes braid_torch.pth into /usr/bin/python3's site-packages
# (/usr/local/lib/python3.11/dist-packages) naming that folder, so `import braid_torch` works
# from any shell; the last BUILD_DIR set up this way wins.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1 base_only=0
case "${1:-}" in
  --no-build) build=0; shift ;;
  --base-packages) base_only=1; shift ;;
esac
BUILD_DIR=${1:-build}
PACKAGES=(g++ meson ninja-build pkg-config libgtest-dev libopenmpi-dev openmpi-bin clang-format libucx-dev libtinyxml2-dev libhwloc-dev libibverbs-dev libarchive-dev nlohmann-json3-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist gnuplot-nox)
TORCH_PACKAGES=(python3-dev python3-torch libtorch-dev pybind11-dev)
[ "$base_only" = 1 ] || PACKAGES+=("${TORCH_PACKAGES[@]}")
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "# installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  # dpkg without an fsync per file (--force-unsafe-io): torch's packages unpack in a fraction
  # of the time; a crash mid-install would need the install again, nothing more.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io "${missing[@]}" >/dev/null
fi
[ "$base_only" = 0 ] || exit 0
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  echo "# configuring Braid in $BUILD_DIR (its first build takes about 5 minutes on 2 cores)" >&2
  meson setup "$BUILD_DIR" --buildtype=release >/dev/null
fi
[ "$build" = 0 ] || ninja -C "$BUILD_DIR" >/dev/null
if grep -q braid_torch "$BUILD_DIR/build.ninja" 2>/dev/null; then
  site="$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')"
  line="$(cd "$BUILD_DIR" && pwd)/python"
  if [ "$(cat "$site/braid_torch.pth" 2>/dev/null)" != "$line" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO mkdir -p "$site"
    echo "$line" | $SUDO tee "$site/braid_torch.pth" >/dev/null
    echo "# braid_torch: $site/braid_torch.pth -> $line" >&2
  fi
fi
