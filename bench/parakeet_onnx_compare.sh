#!/usr/bin/env bash
# Parakeet's encoder: ours (Q8_0 and BF16 files) against NeMo's own ONNX export run by onnxruntime (fp32; the
# graph onnxruntime's quantize_dynamic makes, int8; the same with only the MatMuls quantized, int8 mm, the
# faster), on the same mel and the same machine, runs interleaved in this script.
#   usage: bench/parakeet_onnx_compare.sh ONNX_DIR MODEL_Q8_0.gguf MODEL_BF16.gguf AUDIO ORT_NODE_MODULES [THREADS=2] [ROUNDS=3] [RUNS=5]
# ONNX_DIR: bench/export_parakeet_onnx.py's output for the .nemo the GGUFs were converted from
#   (PYTHONPATH=/tmp/nemo:scripts/nemo_reference /usr/bin/python3 bench/export_parakeet_onnx.py --nemo M.nemo --out DIR).
# ORT_NODE_MODULES: a node_modules with onnxruntime-node@1.30.0 (npm install --ignore-scripts onnxruntime-node@1.30.0:
#   its install script only fetches CUDA files).
# Times: medians of RUNS after a warm-up, in ms. Encoder: ours transcribe-bench's encoder_ms (the FastConformer
# and the joint's encoder projection), onnxruntime session.run of the exported encoder. Decode (where ONNX_DIR
# has NeMo's decoder+joint export): ours transcribe-bench's decode_ms, onnxruntime the greedy loop of
# bench/onnx_parakeet_run.cjs over the fp32 encoder's output (one decoder+joint call a step, fp32 and int8).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
onnx="$1"; q8="$2"; bf16="$3"; audio="$4"; ort="$5"; threads="${6:-2}"; rounds="${7:-3}"; runs="${8:-5}"
py=/usr/bin/python3
bin="$root/build/tools"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
# The mel both sides get: ours, dumped (the same features NeMo's preprocessor computes: tests/test_mel).
TRANSCRIBE_DUMP_DIR="$work" "$bin/transcribe-bench" -m "$q8" -f "$audio" --threads "$threads" --runs 1 --json >/dev/null
n_valid="$($py -c "import wave; w = wave.open('$audio'); print(w.getnframes() * 16000 // w.getframerate() // 160)")"
field() { $py -c "import json,sys; j=json.loads(sys.stdin.read()); print(' '.join(str(round(j[k], 1)) for k in '$1'.split()))"; }
run_ort() { NODE_PATH="$ort" node "$root/bench/onnx_parakeet_run.cjs" --mel "$work/mel.npy" --n-valid "$n_valid" \
            --threads "$threads" --runs "$runs" "$@"; }
ort_ms() { run_ort --encoder "$onnx/encoder-$1.onnx" | field encoder_ms; }
ort_decode_ms() { run_ort --encoder "$onnx/encoder-fp32.onnx" --decoder-joint "$onnx/decoder_joint-$1.onnx" \
                  --config "$onnx/decoder_joint.json" | field decode_ms; }
echo "threads $threads, $(basename "$audio") ($n_valid mel frames); encoder ms, median of $runs runs each, interleaved"
printf "%-6s %9s %9s %11s %10s %10s   %s\n" round "ort fp32" "ort int8" "ort int8 mm" "ours BF16" "ours Q8_0" \
       "ort's fastest int8 / ours: BF16, Q8_0"
for r in $(seq "$rounds"); do
    f=$(ort_ms fp32); i=$(ort_ms int8); m=$(ort_ms int8-matmul)
    b=$("$bin/transcribe-bench" -m "$bf16" -f "$audio" --threads "$threads" --runs "$runs" --json | field encoder_ms)
    q=$("$bin/transcribe-bench" -m "$q8" -f "$audio" --threads "$threads" --runs "$runs" --json | field encoder_ms)
    best=$(echo "if ($i < $m) $i else $m" | bc -l)
    printf "%-6s %9s %9s %11s %10s %10s   %.2fx, %.2fx\n" "$r" "$f" "$i" "$m" "$b" "$q" "$(echo "$best / $b" | bc -l)" \
           "$(echo "$best / $q" | bc -l)"
done
[ -f "$onnx/decoder_joint-fp32.onnx" ] || exit 0
echo "decode (greedy over the same encoder output), ms, median of $runs runs each, interleaved"
printf "%-6s %12s %12s %10s %10s\n" round "ort fp32" "ort int8 mm" "ours BF16" "ours Q8_0"
for r in $(seq "$rounds"); do
    f=$(ort_decode_ms fp32); i=$(ort_decode_ms int8)
    b=$("$bin/transcribe-bench" -m "$bf16" -f "$audio" --threads "$threads" --runs "$runs" --json | field decode_ms)
    q=$("$bin/transcribe-bench" -m "$q8" -f "$audio" --threads "$threads" --runs "$runs" --json | field decode_ms)
    printf "%-6s %12s %12s %10s %10s\n" "$r" "$f" "$i" "$b" "$q"
done
