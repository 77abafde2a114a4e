#!/usr/bin/env bash
# Parakeet-TDT, full-size synthetic: ours (BF16 and Q8_0 files) against plain PyTorch bf16 on the
# encoder (mel + FastConformer x24 + the joint's encoder projection), runs interleaved in this script.
#   usage: bench/parakeet_compare.sh MODEL_BF16.gguf AUDIO [THREADS=2] [REPS=3]
# MODEL_BF16.gguf: scripts/make-synthetic-checkpoint.py --family parakeet-tdt --preset full, then
# scripts/convert-parakeet.py (bf16 is its default); a Q8_0 copy is made beside it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; audio="$2"; threads="${3:-2}"; reps="${4:-3}"
py=/usr/bin/python3
bin="$root/build/tools"
q8="${model%.gguf}-Q8_0.gguf"
[ -f "$q8" ] || "$bin/transcribe-quantize" "$model" "$q8" Q8_0 >/dev/null
samples="$($py -c "import wave; print(wave.open('$audio').getnframes())")"
field() { $py -c "import json,sys; j=json.loads(sys.stdin.read()); print(' '.join(str(round(j[k], 1)) for k in '$1'.split()))"; }
echo "threads $threads, $(basename "$audio") ($samples samples); ms: median of 3 runs each, interleaved"
printf "%-4s %18s %18s %18s %9s %9s\n" rep "torch bf16 enc" "ours BF16 mel+enc" "ours Q8_0 mel+enc" "Q8_0 xRT" "Q8_0 RSS"
for rep in $(seq "$reps"); do
    t=$($py "$root/bench/torch_reference.py" encoder --family parakeet --threads "$threads" --dtype bf16 \
        --samples "$samples" --runs 3 | field encoder_ms)
    b=$("$bin/transcribe-bench" -m "$model" -f "$audio" --threads "$threads" --runs 3 --json | field "mel_ms encoder_ms")
    q=$("$bin/transcribe-bench" -m "$q8" -f "$audio" --threads "$threads" --runs 3 --json |
        field "mel_ms encoder_ms x_realtime peak_rss_mb")
    set -- $b; bsum=$(echo "$1 + $2" | bc -l)
    set -- $q; qsum=$(echo "$1 + $2" | bc -l); qx=$3; qrss=$4
    printf "%-4s %18s %18.1f %18.1f %9s %9s   torch/ours: BF16 %.2fx, Q8_0 %.2fx\n" "$rep" "$t" "$bsum" "$qsum" "$qx" "$qrss" \
        "$(echo "$t / $bsum" | bc -l)" "$(echo "$t / $qsum" | bc -l)"
done
