#!/usr/bin/env bash
# Whisper on a long recording: ours with --vad (Silero VAD's speech pieces) against whisper.cpp's default run
# (whisper-cli with its defaults: beam 5, best of 5, temperature fallback), the same weights and precision,
# one run each, one after the other; wall time and peak RSS from /usr/bin/time.
#   usage: bench/whisper_long_compare.sh WHISPER_CPP_DIR CHECKPOINT_DIR AUDIO VAD.gguf [TYPE=F16] [THREADS=2]
# CHECKPOINT_DIR holds the files bench/whisper_compare.sh made (ours/TYPE.gguf, whisper.cpp/TYPE.bin).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wcpp="$(cd "$1" && pwd)"; ckpt="$(cd "$2" && pwd)"; audio="$3"; vad="$4"; type="${5:-F16}"; threads="${6:-2}"
out="$(mktemp -d)"
measure() { /usr/bin/time -f "%e %M" -o "$out/time" "$@" >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }; cat "$out/time"; }
echo "$(basename "$audio") $type threads $threads"
set -- $(measure "$root/build/tools/transcribe-cli" -m "$ckpt/ours/$type.gguf" --vad "$vad" --threads "$threads" --json \
    -o "$out/ours.json" "$audio"); ours_s=$1; ours_kb=$2
echo "ours --vad: ${ours_s} s, peak RSS $((ours_kb / 1024)) MB"
set -- $(measure "$wcpp/build/bin/whisper-cli" -m "$ckpt/whisper.cpp/$type.bin" -t "$threads" -oj -of "$out/theirs" -f "$audio"); theirs_s=$1; theirs_kb=$2
echo "whisper.cpp default: ${theirs_s} s, peak RSS $((theirs_kb / 1024)) MB"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
ours = json.load(open(f"{out}/ours.json"))
theirs = json.loads(open(f"{out}/theirs.json", "rb").read().decode("utf-8", "replace"))  # whisper.cpp may cut a character
t = ours["timings"]
print(f"ours: {len(ours['segments'])} segments, {t['n_decode_tokens']} decoded tokens, encoder {t['encode_ms'] / 1000:.1f} s, "
      f"decode {t['decode_ms'] / 1000:.1f} s, VAD {t['vad_ms'] / 1000:.1f} s; whisper.cpp: {len(theirs['transcription'])} segments")
PY
echo "whisper.cpp / ours: $(echo "$theirs_s / $ours_s" | bc -l | cut -c1-5)"
rm -rf "$out"
