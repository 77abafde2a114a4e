#!/usr/bin/env bash
# Fetches the pinned llama.cpp tree (ggml, gguf-py, vocab test data) from the npm package
# node-llama-cpp, verifies the package integrity, and clones its git bundle into .deps/llama.cpp.
# Idempotent: a tree already at the pinned commit is left alone.
set -euo pipefail

PKG="node-llama-cpp@3.21.1"
INTEGRITY="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
COMMIT="80fb11ac73e66d89eae2c6a91d8a77428fa733ed"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/.deps/llama.cpp}"

if [ -d "$dest/.git" ] && [ "$(git -C "$dest" rev-parse HEAD 2>/dev/null)" = "$COMMIT" ]; then
    echo "fetch-ggml: $dest already at $COMMIT"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$root/scripts/npm-pack-verified.sh"
tgz="$(npm_pack_verified "$PKG" "$INTEGRITY" "$tmp" fetch-ggml)"

tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$dest"
git -C "$dest" -c advice.detachedHead=false checkout -q "$COMMIT"
echo "fetch-ggml: $dest at $COMMIT"
