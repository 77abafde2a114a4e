#!/usr/bin/env bash
# Silero VAD speed, ours against onnxruntime's on the same machine, one thread each, interleaved:
#   bench/vad_compare.sh ORT_NODE_MODULES [MINUTES] [ROUNDS]
# ORT_NODE_MODULES: a node_modules with onnxruntime-node@1.30.0
#   (ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@1.30.0).
# The audio: jfk.wav, the fixture's speech/silence clip and silence, repeated to MINUTES minutes.
# onnxruntime runs the fixture's tools/run_vad.js (the reference protocol, one session.run per
# 512-sample chunk); its wall_ms and our transcribe-vad's vad_ms both time the model alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ort="${1:?usage: vad_compare.sh ORT_NODE_MODULES [MINUTES] [ROUNDS]}"
minutes="${2:-10}"; rounds="${3:-3}"
shared="$root/../shared/fixtures/silero-vad"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$root" "$shared" "$work/long.wav" "$minutes" <<'PY'
import sys, wave, numpy as np
root, shared, out, minutes = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def rd(p):
    with wave.open(p) as w: return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
unit = np.concatenate([rd(root + "/tests/fixtures/canary-qwen-tiny/audio/jfk.wav"), np.zeros(16000 * 4, "<i2"),
                       rd(shared + "/audio/vad_mix_public.wav"), np.zeros(16000 * 6, "<i2")])
n = int(minutes * 60 * 16000)
x = np.tile(unit, n // len(unit) + 1)[:n]
with wave.open(out, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(x.tobytes())
PY
model="$root/models/silero-vad-v5.gguf"
onnx="$root/.deps/silero-vad/silero_vad_v5.onnx"
echo "audio: $minutes min; one thread each; ms per minute of audio"
for r in $(seq "$rounds"); do
  ours=$("$root/build/tools/transcribe-vad" -m "$model" --threads 1 --json "$work/long.wav" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["vad_ms"])')
  (cd "$shared/tools" && NODE_PATH="$ort" node run_vad.js --model "$onnx" --out "$work/ort" --threads 1 long="$work/long.wav" >/dev/null)
  theirs=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["clips"]["long"]["wall_ms"])' "$work/ort/run.json")
  /usr/bin/python3 -c 'import sys; o,t,m=map(float,sys.argv[1:4]); print(f"round {sys.argv[4]}: ours {o/m:.1f} ms/min, onnxruntime {t/m:.1f} ms/min, {t/o:.1f}x")' "$ours" "$theirs" "$minutes" "$r"
done
"$root/build/tools/transcribe-vad" -m "$model" --threads 1 --json "$work/long.wav" > "$work/ours.json"
/usr/bin/python3 -c '
import json, sys, numpy as np
o = np.array(json.load(open(sys.argv[1]))["probs"]); t = np.load(sys.argv[2])
print(f"probabilities over {len(t)} chunks: max |ours - onnxruntime| = {np.abs(o - t).max():.2e}")' "$work/ours.json" "$work/ort/long.probs.npy"
