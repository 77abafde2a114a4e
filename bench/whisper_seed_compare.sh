#!/usr/bin/env bash
# Whisper's encoder against the seed system (github:handy-computer/transcribe.cpp, its whisper family) on the
# same weights: its converter reads a Hugging Face folder, which bench/whisper_hf_folder.py writes from the
# synthetic model.pt (safetensors read through bench/shims, torch from Debian's python3-torch); its quantizer
# makes Q8_0 and Q5_0. Its transcribe-bench times whole transcriptions (its own decoding, of another length
# than ours on random weights), so the encoder is what compares: its mean encode_ms over RUNS iterations
# against our median encoder_ms, interleaved.
#   usage: bench/whisper_seed_compare.sh SEED_DIR CHECKPOINT_DIR AUDIO [THREADS=2] [RUNS=3] [REPS=2]
# SEED_DIR: the seed's source tree built in SEED_DIR/build (cmake -B build -DTRANSCRIBE_BUILD_TOOLS=ON);
# CHECKPOINT_DIR as for bench/whisper_compare.sh, whose ours/*.gguf it uses.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seed="$(cd "$1" && pwd)"; ckpt="$(cd "$2" && pwd)"; audio="$3"; threads="${4:-2}"; runs="${5:-3}"; reps="${6:-2}"
py=/usr/bin/python3
mkdir -p "$ckpt/seed"
[ -f "$ckpt/hf/model.safetensors" ] || $py "$root/bench/whisper_hf_folder.py" "$ckpt" "$ckpt/hf" >/dev/null
[ -f "$ckpt/seed/F16.gguf" ] || PYTHONPATH="$root/bench/shims:$root/.deps/llama.cpp/gguf-py" \
    $py "$seed/scripts/convert-whisper.py" "$ckpt/hf" "$ckpt/seed/F16.gguf" --variant whisper-base >/dev/null
for q in Q8_0 Q5_0; do
    [ -f "$ckpt/seed/$q.gguf" ] || "$seed/build/bin/transcribe-quantize" "$ckpt/seed/F16.gguf" "$ckpt/seed/$q.gguf" --quant "$q" >/dev/null
done
ours() {
    "$root/build/tools/transcribe-bench" -m "$ckpt/ours/$1.gguf" -f "$audio" --threads "$threads" --runs "$runs" --warmup 1 \
        --language en --no-timestamps --temperature 0 --fixed-new-tokens 8 --json |
        $py -c "import json,sys; print(round(json.loads(sys.stdin.read().splitlines()[-1])['encoder_ms'], 1))"
}
theirs() {
    "$seed/build/bin/transcribe-bench" --model "$ckpt/seed/$1.gguf" --sample "$audio" --threads "$threads" --iters "$runs" \
        --warmup 1 2>/dev/null | $py -c "import json,sys; print(round(json.load(sys.stdin)['summary']['encode_ms']['mean'], 1))"
}
echo "$(basename "$ckpt"), threads $threads, $(basename "$audio"); encoder ms, interleaved"
printf "%-4s %-5s %10s %10s %7s\n" rep type ours seed ratio
for rep in $(seq "$reps"); do
    for q in F16 Q8_0 Q5_0; do
        o=$(ours "$q"); t=$(theirs "$q")
        printf "%-4s %-5s %10s %10s %7.2f\n" "$rep" "$q" "$o" "$t" "$(echo "$t / $o" | bc -l)"
    done
done
