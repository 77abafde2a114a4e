#!/usr/bin/env bash
# One stage's time, this checkout against another commit, runs interleaved (base, then this, per round):
# builds transcribe-bench at BASE in a worktree (against the same fetched ggml tree), then runs
#   transcribe-bench -m MODEL -f AUDIO --threads THREADS --runs 3 --warmup 1 --fixed-new-tokens 2 --json
# with each binary and prints the STAGE's median (encoder_ms, prefill_ms, ...) and base / this.
#   usage: bench/commit_ab.sh BASE MODEL.gguf AUDIO [STAGE=encoder_ms] [ROUNDS=3] [THREADS=2]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base="$1"; model="$2"; audio="$3"; stage="${4:-encoder_ms}"; rounds="${5:-3}"; threads="${6:-2}"
py=/usr/bin/python3
tree="${WORK:-/tmp}/transcribe-ab-$(git -C "$root" rev-parse --short "$base")"
if [ ! -x "$tree/build/tools/transcribe-bench" ]; then
    [ -d "$tree" ] || git -C "$root" worktree add -f "$tree" "$base" >/dev/null
    { cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release -DTRANSCRIBE_BUILD_TESTS=OFF \
          -DTRANSCRIBE_LLAMA_DIR="$root/.deps/llama.cpp" &&
      cmake --build "$tree/build" --target transcribe-bench -j"$(nproc)"; } > "$tree.build.log" 2>&1 ||
        { tail -20 "$tree.build.log"; exit 1; }
fi
stage_of() {
    "$1" -m "$model" -f "$audio" --threads "$threads" --runs 3 --warmup 1 --fixed-new-tokens 2 --json |
        $py -c "import json,sys; print('%.1f' % json.loads(sys.stdin.read())['$stage'])"
}
echo "round | base $base | this $(git -C "$root" rev-parse --short HEAD) | base / this  ($stage, median of 3)"
for r in $(seq 1 "$rounds"); do
    a=$(stage_of "$tree/build/tools/transcribe-bench")
    b=$(stage_of "$root/build/tools/transcribe-bench")
    echo "$r | $a | $b | $($py -c "print('%.2f' % ($a / $b))")"
done
