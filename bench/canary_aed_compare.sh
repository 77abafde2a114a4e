#!/usr/bin/env bash
# Canary AED, full-size synthetic: ours (Q8_0 and BF16 files; greedy and beam 4) against NeMo's own
# modules in PyTorch (bench/nemo_aed_reference.py, BF16: Debian's torch has oneDNN for bf16 but a generic BLAS for
# F32, which is 40x slower), greedy and beam 4, runs interleaved in this script,
# every run decoding exactly NEW tokens after the prompt.
#   usage: bench/canary_aed_compare.sh MODEL.nemo MODEL_BF16.gguf AUDIO [THREADS=2] [NEW=32] [REPS=3]
# MODEL.nemo: scripts/make-synthetic-checkpoint.py --family canary-aed --preset full; MODEL_BF16.gguf:
# scripts/convert-canary-aed.py (bf16 is its default); a Q8_0 copy is made beside it. NeMo's source tree
# at the pinned commit in $NEMO_SRC (default /tmp/nemo; scripts/nemo_reference/nemo_imports.py says how).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nemo="$1"; model="$2"; audio="$3"; threads="${4:-2}"; new="${5:-32}"; reps="${6:-3}"
py=/usr/bin/python3
bin="$root/build/tools"
q8="${model%.gguf}-Q8_0.gguf"
[ -f "$q8" ] || "$bin/transcribe-quantize" "$model" "$q8" Q8_0 >/dev/null
audio_s="$($py -c "import wave; w = wave.open('$audio'); print(w.getnframes() / w.getframerate())")"
field() { $py -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(' '.join(str(round(j[k], 1)) for k in '$1'.split()))"; }
ours() { # ours MODEL BEAM -> total ms, x real time, peak RSS MB
    "$bin/transcribe-bench" -m "$1" -f "$audio" --threads "$threads" --runs 3 --warmup 1 --fixed-new-tokens "$new" \
        --beam "$2" --json | field "mel_ms encoder_ms prefill_ms decode_ms x_realtime peak_rss_mb" |
        awk '{printf "%.1f %.1f %.0f", $1 + $2 + $3 + $4, $5, $6}'
}
nemo_run() { # nemo_run BEAM -> total ms, peak RSS MB
    PYTHONPATH="${NEMO_SRC:-/tmp/nemo}:$root/scripts/nemo_reference" $py "$root/bench/nemo_aed_reference.py" \
        --nemo "$nemo" --audio "$audio" --threads "$threads" --new "$new" --beam "$1" --runs 3 --dtype bf16 2>/dev/null |
        field "total_ms peak_rss_mb"
}
echo "threads $threads, $(basename "$audio") (${audio_s} s), $new new tokens; ms: median of 3 runs each, interleaved"
printf "%-4s %-6s %14s %14s %14s %9s %9s %10s\n" rep decode "NeMo BF16 ms" "ours BF16 ms" "ours Q8_0 ms" "Q8_0 xRT" "Q8_0 RSS" "NeMo/Q8_0"
for rep in $(seq "$reps"); do
    for beam in 0 4; do
        set -- $(nemo_run "$beam"); n=$1
        set -- $(ours "$model" "$beam"); b=$1
        set -- $(ours "$q8" "$beam"); q=$1; qx=$2; qrss=$3
        printf "%-4s %-6s %14s %14s %14s %9s %9s %10.2f\n" "$rep" "$([ "$beam" = 0 ] && echo greedy || echo beam$beam)" \
            "$n" "$b" "$q" "$qx" "$qrss" "$(echo "$n / $q" | bc -l)"
    done
done
