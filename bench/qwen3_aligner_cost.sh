#!/usr/bin/env bash
# What word times from Qwen3-ForcedAligner cost on top of a Qwen3-ASR transcript: the CLI's wall time and
# peak RSS transcribing AUDIO with ASR.gguf alone and with --align-with ALIGNER.gguf, interleaved in one
# script (the two runs differ only by the alignment: the same model, audio, threads and token budget). Random
# weights never end a transcript, so each run decodes to TOKENS new tokens; the aligner then times that
# text's units (printed). Full-size files: scripts/make-synthetic-checkpoint.py --family qwen3-asr /
# qwen3-aligner --preset 0.6b, converted by scripts/convert-qwen3-asr.py, quantized by transcribe-quantize.
#   usage: bench/qwen3_aligner_cost.sh ASR.gguf ALIGNER.gguf AUDIO [THREADS=2] [REPS=3] [TOKENS=64]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
asr="$1"; aligner="$2"; audio="$3"; threads="${4:-2}"; reps="${5:-3}"; tokens="${6:-64}"
cli="$root/build/tools/transcribe-cli"
run() { # wall seconds, peak RSS MB, units aligned (words in the JSON)
    local t; t=$(mktemp)
    /usr/bin/time -f "%e %M" -o "$t" "$cli" -m "$asr" "$@" --threads "$threads" --max-new-tokens "$tokens" --json \
        "$audio" 2>/dev/null | /usr/bin/python3 -c "import json,sys; print(len(json.load(sys.stdin).get('words') or []))" >"$t.n"
    read -r wall kb <"$t"; echo "$wall $((kb / 1024)) $(cat "$t.n")"; rm -f "$t" "$t.n"
}
printf "%-6s %10s %10s %8s %10s %10s\n" rep asr_s aligned_s words asr_rss aligned_rss
for ((i = 1; i <= reps; i++)); do
    read -r a_s a_rss _ < <(run)
    read -r b_s b_rss n < <(run --align-with "$aligner")
    printf "%-6s %10s %10s %8s %10s %10s\n" "$i" "$a_s" "$b_s" "$n" "$a_rss" "$b_rss"
done
