#!/usr/bin/env bash
# Batched decoding, ours against llama.cpp built from the same fetched tree, runs interleaved:
#   ours: transcribe-bench --batch 1 and --batch B (B copies of the audio decoded together; aggregate
#         decode = every sequence's tokens over the decode time), Q8_0 and Q4_K_M;
#   llama.cpp on the Qwen3 half: llama-batched-bench (B sequences decoding in parallel after a prompt
#         of the same length, as llama-server's slots do: S_TG = aggregate decode), llama-bench with
#         -b/-ub B (the prompt processed B tokens per weight pass), and llama-bench tg at depth PROMPT.
#   usage: bench/batch_compare.sh MODEL_BF16.gguf AUDIO [THREADS=2] [NEW_TOKENS=24] [B=8] [REPS=3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; audio="$2"; threads="${3:-2}"; new="${4:-24}"; batch="${5:-8}"; reps="${6:-3}"
py=/usr/bin/python3
bin="$root/build/tools"
llama="$root/build-llama/bin"
if [ ! -x "$llama/llama-batched-bench" ] || [ ! -x "$llama/llama-bench" ]; then
    cmake -S "$root/.deps/llama.cpp" -B "$root/build-llama" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
    cmake --build "$root/build-llama" --target llama-bench llama-batched-bench -j"$(nproc)" >/dev/null
fi
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
field() { $py -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
prompt=$("$bin/transcribe-bench" -m "$model" -f "$audio" --threads "$threads" --runs 1 --warmup 0 \
         --fixed-new-tokens 2 --json | field prefill_tokens)
echo "threads $threads, prompt $prompt tokens, $new new tokens, batch $batch, audio $audio"
for dtype in Q8_0 Q4_K_M; do
    m="$work/model-$dtype.gguf"
    [ -f "$m" ] || "$bin/transcribe-quantize" "$model" "$m" "$dtype" >/dev/null
    lm="$work/llama-$dtype.gguf"
    [ -f "$lm" ] || $py "$root/bench/export-llama-qwen3.py" "$m" "$lm" >/dev/null
done
ours() { # dtype batch -> "per-sequence aggregate"
    "$bin/transcribe-bench" -m "$work/model-$1.gguf" -f "$audio" --threads "$threads" --runs 2 --warmup 1 \
        --fixed-new-tokens "$new" --batch "$2" --json |
        $py -c "import json,sys; j=json.loads(sys.stdin.read()); print('%.2f %.2f %.0f' % (j['decode_tokens_per_s'], j['aggregate_decode_tokens_per_s'], j['peak_rss_mb']))"
}
printf "%-4s %-7s %10s %10s %7s %10s %10s %7s %11s %9s %10s %10s %7s\n" rep dtype "ours b1" "ours b$batch" "x" \
    "llama b1" "llama b$batch" "x" "ours/llama" "ours MB" "llama pp" "ours tg1" "/llama"
for rep in $(seq 1 "$reps"); do
    for dtype in Q8_0 Q4_K_M; do
        lm="$work/llama-$dtype.gguf"
        read -r o1 _ _ <<<"$(ours "$dtype" 1)"
        read -r _ ob rss <<<"$(ours "$dtype" "$batch")"
        # llama.cpp: B sequences after a prompt each (-pps: not shared), S_TG = all sequences' tokens / time.
        lb=$("$llama/llama-batched-bench" -m "$lm" -c $(( (prompt + new) * batch + 64 )) -b 2048 -ub 512 \
             -npp "$prompt" -ntg "$new" -npl "1,$batch" -t "$threads" --output-format jsonl 2>/dev/null |
             $py -c "import json,sys; r=[json.loads(l) for l in sys.stdin if l.startswith('{')]; print(' '.join('%.2f' % x['speed_tg'] for x in r))")
        read -r l1 lbb <<<"$lb"
        # llama-bench: the prompt B tokens per pass (-b/-ub B), and one sequence's decode at depth PROMPT.
        lpp=$("$llama/llama-bench" -m "$lm" -p "$prompt" -n 0 -b "$batch" -ub "$batch" -t "$threads" -r 2 -o jsonl 2>/dev/null | field avg_ts)
        ltg=$("$llama/llama-bench" -m "$lm" -p 0 -n "$new" -d "$prompt" -t "$threads" -r 2 -o jsonl 2>/dev/null | field avg_ts)
        printf "%-4s %-7s %10.2f %10.2f %7.2f %10.2f %10.2f %7.2f %11.2f %9.0f %10.2f %10.2f %7.2f\n" "$rep" "$dtype" \
            "$o1" "$ob" "$(echo "$ob / $o1" | bc -l)" "$l1" "$lbb" "$(echo "$lbb / $l1" | bc -l)" \
            "$(echo "$ob / $lbb" | bc -l)" "$rss" "$lpp" "$o1" "$(echo "$o1 / $ltg" | bc -l)"
    done
done
