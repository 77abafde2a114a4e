#!/usr/bin/env bash
# Qwen3-ASR against the seed system (github:handy-computer/transcribe.cpp, its qwen3_asr family) on the same
# weights: a synthetic checkpoint folder of the released layout (scripts/make-synthetic-checkpoint.py
# --family qwen3-asr --preset 0.6b|1.7b), converted by each system's own converter (the seed's reads it
# through bench/shims' safetensors, torch from Debian's python3-torch) and quantized by each one's
# quantizer. Random weights never end a transcript, so the seed decodes to its own budget (256 new tokens,
# its src/arch/qwen3_asr/model.cpp k_max_new; a truncated run reports no tokens, so SEED_TOKENS says how
# many); ours then decodes exactly as many (--fixed-new-tokens), and the end-to-end times compare the
# same work: mel + encoder + prefill + decode, medians (ours) against means (its transcribe-bench), interleaved.
#   usage: bench/qwen3_asr_compare.sh SEED_DIR CHECKPOINT_DIR AUDIO [THREADS=2] [RUNS=3] [REPS=2]
# SEED_DIR: the seed's source tree built in SEED_DIR/build (cmake -B build -DTRANSCRIBE_BUILD_TOOLS=ON),
# its transcribe-bench taking a truncated run's timings rather than stopping at it (the harness's status
# checks; only the two after transcribe_run, warmup and timed, ever see a truncation; its timings are the library's):
#   sed -i 's/st != TRANSCRIBE_OK) {/st != TRANSCRIBE_OK \&\& st != TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {/' \
#       SEED_DIR/tools/transcribe-bench/main.cpp
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seed="$(cd "$1" && pwd)"; ckpt="$(cd "$2" && pwd)"; audio="$3"; threads="${4:-2}"; runs="${5:-3}"; reps="${6:-2}"
py=/usr/bin/python3
seed_tokens="${SEED_TOKENS:-256}"
# The seed's converter names the released variants only: which one these shapes are.
variant=$($py -c "import json,sys; h=json.load(open(sys.argv[1]))['thinker_config']['text_config']['hidden_size']; print('qwen3-asr-0.6b' if h == 1024 else 'qwen3-asr-1.7b')" "$ckpt/config.json")
out="$ckpt.bench"; mkdir -p "$out"
[ -f "$out/ours-BF16.gguf" ] || TRANSCRIBE_GGUF_PY="$root/.deps/llama.cpp/gguf-py" \
    $py "$root/scripts/convert-qwen3-asr.py" --checkpoint "$ckpt" -o "$out/ours-BF16.gguf" >/dev/null
[ -f "$out/ours-Q8_0.gguf" ] || "$root/build/tools/transcribe-quantize" "$out/ours-BF16.gguf" "$out/ours-Q8_0.gguf" Q8_0 >/dev/null
[ -f "$out/seed-BF16.gguf" ] || PYTHONPATH="$root/bench/shims:$root/.deps/llama.cpp/gguf-py" \
    $py "$seed/scripts/convert-qwen3_asr.py" "$ckpt" "$out/seed-BF16.gguf" --variant "$variant" >/dev/null
[ -f "$out/seed-Q8_0.gguf" ] || "$seed/build/bin/transcribe-quantize" "$out/seed-BF16.gguf" "$out/seed-Q8_0.gguf" --quant Q8_0 >/dev/null
theirs() { # mean encode_ms, mean total_ms, tokens
    "$seed/build/bin/transcribe-bench" --model "$out/seed-$1.gguf" --sample "$audio" --threads "$threads" --iters "$runs" \
        --warmup 1 2>/dev/null | $py -c "
import json, sys
d = json.loads(sys.stdin.read(), strict=False); s = d['summary']  # its hyp_text may hold raw control characters
print(round(s['encode_ms']['mean'], 1), round(s['total_ms']['mean'], 1), d['n_tokens'] or $seed_tokens)"
}
ours() { # median encoder_ms, median mel + encoder + prefill + decode, peak RSS MB
    "$root/build/tools/transcribe-bench" -m "$out/ours-$1.gguf" -f "$audio" --threads "$threads" --runs "$runs" --warmup 1 \
        --fixed-new-tokens "$2" --json | $py -c "
import json, sys
d = json.loads(sys.stdin.read().splitlines()[-1])
print(round(d['encoder_ms'], 1), round(d['mel_ms'] + d['encoder_ms'] + d['prefill_ms'] + d['decode_ms'], 1), round(d['peak_rss_mb']))"
}
echo "$(basename "$ckpt"), threads $threads, $(basename "$audio"); ms, interleaved"
printf "%-4s %-5s %7s %9s %9s %7s %9s %9s %7s %6s\n" rep type tokens enc_ours enc_seed ratio e2e_ours e2e_seed ratio rss
for rep in $(seq "$reps"); do
    for q in BF16 Q8_0; do
        read -r te tt tn < <(theirs "$q")
        read -r oe ot orss < <(ours "$q" "$tn")
        printf "%-4s %-5s %7s %9s %9s %7.2f %9s %9s %7.2f %6s\n" "$rep" "$q" "$tn" "$oe" "$te" "$(echo "$te / $oe" | bc -l)" \
            "$ot" "$tt" "$(echo "$tt / $ot" | bc -l)" "$orss"
    done
done
