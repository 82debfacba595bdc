# What every braid-train smoke script starts with (sourced, with the script's arguments
# BRAID_TRAIN BRAIDRUN): $train and $braidrun, a skip (77) where Fashion-MNIST is absent, set -e,
# and $f, a temporary file removed on exit.
train="$1"
braidrun="$2"
d=/usr/share/datasets/fashion-mnist
if [ ! -f "$d/train-images-idx3-ubyte.gz" ]; then echo "SKIP: $d is absent"; exit 77; fi
set -e
f=$(mktemp)
trap 'rm -f "$f"' EXIT
