#!/usr/bin/env bash
# Ours vs llama.cpp (llama-bench, built from the same fetched tree) on the Qwen3 half, and vs plain
# PyTorch on prefill and on the encoder, with runs interleaved in this one script.
#   usage: bench/compare.sh MODEL_BF16.gguf AUDIO [THREADS=2] [NEW_TOKENS=24] [DTYPES="BF16 Q8_0 Q4_K_M"]
# MODEL_BF16.gguf is a converted Canary-Qwen file (e.g. from scripts/make-synthetic-checkpoint.py --preset full).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; audio="$2"; threads="${3:-2}"; new="${4:-24}"; dtypes="${5:-BF16 Q8_0 Q4_K_M}"
py=/usr/bin/python3
bin="$root/build/tools"
llama_bench="$root/build-llama/bin/llama-bench"
if [ ! -x "$llama_bench" ]; then
    cmake -S "$root/.deps/llama.cpp" -B "$root/build-llama" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
    cmake --build "$root/build-llama" --target llama-bench -j"$(nproc)" >/dev/null
fi
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { $py -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }

# Prompt length of this audio (14 prompt ids + audio rows), from one short run.
prompt=$("$bin/transcribe-bench" -m "$model" -f "$audio" --threads "$threads" --runs 1 --warmup 0 \
         --fixed-new-tokens 2 --json | field prefill_tokens 2>/dev/null || true)
prompt="${prompt:-152}"
echo "threads $threads, prompt $prompt tokens, $new new tokens, audio $audio"
printf "%-8s %10s %10s %7s %10s %10s %7s %8s %8s %9s\n" dtype "pp ours" "pp llama" ratio "tg ours" "tg llama" ratio "x rt" "RSS MB" "GGUF MB"
for dtype in $dtypes; do
    m="$model"
    if [ "$dtype" != "BF16" ]; then
        m="$work/model-$dtype.gguf"
        [ -f "$m" ] || "$bin/transcribe-quantize" "$model" "$m" "$dtype" >/dev/null
    fi
    lm="$work/llama-$dtype.gguf"
    [ -f "$lm" ] || $py "$root/bench/export-llama-qwen3.py" "$m" "$lm" >/dev/null
    : > "$work/ours-$dtype.txt"; : > "$work/llama-$dtype.txt"
    for rep in 1 2 3; do  # interleaved: ours, llama.cpp, ours, ...
        "$bin/transcribe-bench" -m "$m" -f "$audio" --threads "$threads" --runs 2 --warmup 1 \
            --fixed-new-tokens "$new" --json >> "$work/ours-$dtype.txt"
        # pp from an empty cache; tg with the prompt already in the cache (-d), as our decode runs.
        "$llama_bench" -m "$lm" -p "$prompt" -n 0 -t "$threads" -r 2 -o jsonl 2>/dev/null >> "$work/llama-$dtype.txt"
        "$llama_bench" -m "$lm" -p 0 -n "$new" -d "$prompt" -t "$threads" -r 2 -o jsonl 2>/dev/null >> "$work/llama-$dtype.txt"
    done
    pp_ours=$($py -c "import json; [print(json.loads(l)['prefill_tokens_per_s']) for l in open('$work/ours-$dtype.txt')]" | median)
    tg_ours=$($py -c "import json; [print(json.loads(l)['decode_tokens_per_s']) for l in open('$work/ours-$dtype.txt')]" | median)
    xrt=$($py -c "import json; [print(json.loads(l)['x_realtime']) for l in open('$work/ours-$dtype.txt')]" | median)
    rss=$($py -c "import json; [print(json.loads(l)['peak_rss_mb']) for l in open('$work/ours-$dtype.txt')]" | median)
    pp_llama=$($py -c "import json; [print(json.loads(l)['avg_ts']) for l in open('$work/llama-$dtype.txt') if json.loads(l)['n_prompt'] > 0]" | median)
    tg_llama=$($py -c "import json; [print(json.loads(l)['avg_ts']) for l in open('$work/llama-$dtype.txt') if json.loads(l)['n_gen'] > 0]" | median)
    size=$(( $(stat -c %s "$m") / 1000000 ))
    printf "%-8s %10.1f %10.1f %7.2f %10.2f %10.2f %7.2f %8.2f %8.0f %9d\n" "$dtype" "$pp_ours" "$pp_llama" \
        "$(echo "$pp_ours / $pp_llama" | bc -l)" "$tg_ours" "$tg_llama" "$(echo "$tg_ours / $tg_llama" | bc -l)" "$xrt" "$rss" "$size"
done
if $py -c "import torch" 2>/dev/null; then
    # Interleaved twice (PyTorch LM, PyTorch encoder, ours), as these machines drift between minutes.
    echo "PyTorch $($py -c 'import torch; print(torch.__version__)'), $threads threads, interleaved with ours on $model"
    echo "(ours: encoder_ms is mel + encoder + projection; prefill as above):"
    samples="$($py -c "import wave; print(wave.open('$audio').getnframes())")"
    for rep in 1 2; do
        $py "$root/bench/torch_reference.py" lm --threads "$threads" --prompt "$prompt" --new "$new" --dtype bf16
        $py "$root/bench/torch_reference.py" encoder --threads "$threads" --dtype bf16 --samples "$samples" --runs 3
        "$bin/transcribe-bench" -m "$model" -f "$audio" --threads "$threads" --runs 3 --fixed-new-tokens 2 --json
    done
    $py "$root/bench/torch_reference.py" encoder --threads "$threads" --dtype f32 --samples "$samples" --runs 1
fi
