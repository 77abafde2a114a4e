#!/usr/bin/env bash
# What word times from Qwen3-ForcedAligner cost beside transcribing: the CLI's wall time and peak RSS aligning
# TEXT in AUDIO (transcribe-cli -m ALIGNER --text) and transcribing the same AUDIO with a Qwen3-ASR model
# (random weights never end a transcript: it decodes TOKENS new tokens), interleaved in one script, each
# run a fresh process (load included, as a user runs it). Full-size files: scripts/make-synthetic-checkpoint.py
# --family qwen3-aligner / qwen3-asr --preset 0.6b, converted by scripts/convert-qwen3-asr.py, quantized by
# transcribe-quantize.
#   usage: bench/qwen3_aligner_cost.sh ALIGNER.gguf ASR.gguf AUDIO TEXT [THREADS=2] [REPS=3] [TOKENS=64]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
aligner="$1"; asr="$2"; audio="$3"; text="$4"; threads="${5:-2}"; reps="${6:-3}"; tokens="${7:-64}"
cli="$root/build/tools/transcribe-cli"
run() { # wall seconds, peak RSS MB, words in the JSON
    local t; t=$(mktemp)
    /usr/bin/time -f "%e %M" -o "$t" "$cli" "$@" --threads "$threads" --json "$audio" 2>/dev/null |
        /usr/bin/python3 -c "import json,sys; print(len(json.load(sys.stdin).get('words') or []))" >"$t.n"
    read -r wall kb <"$t"; echo "$wall $((kb / 1024)) $(cat "$t.n")"; rm -f "$t" "$t.n"
}
printf "%-4s %9s %8s %9s %9s %9s\n" rep align_s words align_MB asr_s asr_MB
for ((i = 1; i <= reps; i++)); do
    read -r a_s a_mb n < <(run -m "$aligner" --text "$text")
    read -r b_s b_mb _ < <(run -m "$asr" --max-new-tokens "$tokens")
    printf "%-4s %9s %8s %9s %9s %9s\n" "$i" "$a_s" "$n" "$a_mb" "$b_s" "$b_mb"
done
