#!/usr/bin/env bash
# Whisper, full-size synthetic weights of a released model's shapes: ours against whisper.cpp built from its
# own source, on the same weights, each converted by its own converter and quantized by its own quantizer
# (F16, Q8_0, Q5_0), runs interleaved in this script. Per precision: the encoder (one 30 s window), and one
# window end to end (log-mel + encoder + prompt + exactly NEW greedy tokens, no timestamps, English), medians
# of RUNS runs after a warm-up, in one process per engine and file, whose peak RSS is reported.
#   usage: bench/whisper_compare.sh WHISPER_CPP_DIR CHECKPOINT_DIR AUDIO [THREADS=2] [NEW=100] [RUNS=3] [REPS=2]
# WHISPER_CPP_DIR: a whisper.cpp source tree (fetch github:ggml-org/whisper.cpp) configured and built in
# its build/ (cmake -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build --target whisper-quantize).
# CHECKPOINT_DIR: scripts/make-synthetic-checkpoint.py --family whisper --preset base|small|... (model.pt,
# multilingual.tiktoken, mel_filters.npz; whisper.cpp's convert-pt-to-ggml.py needs torch: Debian's
# python3-torch). Files are made once under CHECKPOINT_DIR/{ours,whisper.cpp}/.
# The harness for whisper.cpp is bench/whisper_cpp_run.cpp (built here against WHISPER_CPP_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wcpp="$(cd "$1" && pwd)"; ckpt="$(cd "$2" && pwd)"; audio="$3"
threads="${4:-2}"; new="${5:-100}"; runs="${6:-3}"; reps="${7:-2}"
py=/usr/bin/python3
bin="$root/build/tools"
mkdir -p "$ckpt/ours" "$ckpt/whisper.cpp/whisper/assets"

# whisper.cpp's converter wants an openai/whisper tree for the filterbank and the tokenizer.
for f in mel_filters.npz multilingual.tiktoken; do ln -sf "$ckpt/$f" "$ckpt/whisper.cpp/whisper/assets/$f"; done
if [ ! -f "$ckpt/whisper.cpp/F16.bin" ]; then
    $py "$wcpp/models/convert-pt-to-ggml.py" "$ckpt/model.pt" "$ckpt/whisper.cpp" "$ckpt/whisper.cpp" >/dev/null
    mv "$ckpt/whisper.cpp/ggml-model.bin" "$ckpt/whisper.cpp/F16.bin"
fi
[ -f "$ckpt/ours/F16.gguf" ] || TRANSCRIBE_GGUF_PY="$root/.deps/llama.cpp/gguf-py" \
    $py "$root/scripts/convert-whisper.py" --checkpoint "$ckpt/model.pt" -o "$ckpt/ours/F16.gguf" --outtype f16 >/dev/null
for q in Q8_0 Q5_0; do
    [ -f "$ckpt/ours/$q.gguf" ] || "$bin/transcribe-quantize" "$ckpt/ours/F16.gguf" "$ckpt/ours/$q.gguf" "$q" >/dev/null
    [ -f "$ckpt/whisper.cpp/$q.bin" ] ||
        "$wcpp/build/bin/whisper-quantize" "$ckpt/whisper.cpp/F16.bin" "$ckpt/whisper.cpp/$q.bin" "${q,,}" >/dev/null 2>&1
done
harness="$ckpt/whisper.cpp/whisper_cpp_run"
[ -x "$harness" ] || g++ -O2 -std=c++17 "$root/bench/whisper_cpp_run.cpp" -I"$wcpp/include" -I"$wcpp/ggml/include" \
    -L"$wcpp/build/bin" -lwhisper -lggml -lggml-base -lsndfile -Wl,-rpath,"$wcpp/build/bin" -o "$harness"

field() { $py -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(' '.join(str(round(j[k], 1)) for k in '$1'.split()))"; }
keys="encoder_ms mel_ms prefill_ms decode_ms peak_rss_mb"
ours() {
    "$bin/transcribe-bench" -m "$ckpt/ours/$1.gguf" -f "$audio" --threads "$threads" --runs "$runs" --warmup 1 \
        --language en --no-timestamps --temperature 0 --fixed-new-tokens "$new" --json | field "$keys"
}
theirs() { "$harness" "$ckpt/whisper.cpp/$1.bin" "$audio" "$threads" "$new" "$runs" | field "$keys"; }

echo "$(basename "$ckpt"), threads $threads, $(basename "$audio"), $new new tokens; ms: medians of $runs runs; interleaved"
printf "%-4s %-5s %10s %10s %7s %12s %12s %7s %9s %9s\n" rep type "enc ours" "enc w.cpp" ratio "e2e ours" "e2e w.cpp" ratio \
    "RSS ours" "RSS w.cpp"
for rep in $(seq "$reps"); do
    for q in F16 Q8_0 Q5_0; do
        set -- $(ours "$q"); oe=$1; ot=$(echo "$2 + $1 + $3 + $4" | bc -l); orss=$5
        set -- $(theirs "$q"); te=$1; tt=$(echo "$2 + $1 + $3 + $4" | bc -l); trss=$5
        printf "%-4s %-5s %10.1f %10.1f %7.2f %12.1f %12.1f %7.2f %9.0f %9.0f\n" "$rep" "$q" "$oe" "$te" \
            "$(echo "$te / $oe" | bc -l)" "$ot" "$tt" "$(echo "$tt / $ot" | bc -l)" "$orss" "$trss"
    done
done
