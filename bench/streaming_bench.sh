#!/usr/bin/env bash
# Cache-aware streaming (#44), full-size synthetic weights of nvidia/nemotron-speech-streaming-en-0.6b's
# shapes: one stream's compute per second of audio and each encoder step's time, the audio pushed 20 ms at a
# time as fast as it goes (transcribe-bench --native-stream), at every lookahead, for BF16 and Q8_0 files,
# interleaved; and the same audio offline (one pass, the default context) for the ratio.
#   usage: bench/streaming_bench.sh CHECKPOINT_DIR AUDIO [THREADS=2] [RUNS=3]
# CHECKPOINT_DIR: scripts/make-synthetic-checkpoint.py --family parakeet-streaming --preset full (model.nemo);
# the GGUF files are made once under it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ckpt="$(cd "$1" && pwd)"; audio="$2"; threads="${3:-2}"; runs="${4:-3}"
py=/usr/bin/python3
bin="$root/build/tools"
[ -f "$ckpt/BF16.gguf" ] || TRANSCRIBE_GGUF_PY="$root/.deps/llama.cpp/gguf-py" \
    $py "$root/scripts/convert-parakeet.py" --nemo "$ckpt/model.nemo" -o "$ckpt/BF16.gguf" >/dev/null
[ -f "$ckpt/Q8_0.gguf" ] || "$bin/transcribe-quantize" "$ckpt/BF16.gguf" "$ckpt/Q8_0.gguf" Q8_0 >/dev/null
for type in Q8_0 BF16; do
    for ctx in 70,13 70,6 70,1 70,0; do
        echo "$type stream --att-context-size $ctx: $("$bin/transcribe-bench" -m "$ckpt/$type.gguf" -f "$audio" --threads "$threads" \
            --runs "$runs" --warmup 1 --native-stream --att-context-size "$ctx" --json)"
    done
    echo "$type offline: $("$bin/transcribe-bench" -m "$ckpt/$type.gguf" -f "$audio" --threads "$threads" --runs "$runs" --warmup 1 --json \
        | $py -c 'import json,sys; j=json.load(sys.stdin); j.pop("tokens"); print(json.dumps(j))')"
done
