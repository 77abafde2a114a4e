#!/usr/bin/env bash
# Realtime soak (#44 item 6): transcribe-server over TLS (a self-signed certificate made here) with MODEL
# and VAD, SESSIONS sessions at real-time pace for MINUTES each (realtime_soak.mjs); the JSON line it
# prints, then the server's peak RSS. Exit 1 on any session problem or unanswered /health.
# usage: bench/realtime_soak.sh MODEL.gguf VAD.gguf AUDIO.wav [SESSIONS=16] [MINUTES=10] [THREADS=2] [TURNS=server_vad]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model=$1 vad=$2 audio=$3 sessions=${4:-16} minutes=${5:-10} threads=${6:-2} turns=${7:-server_vad}
client="$root/build/realtime-client"
mkdir -p "$client"
cp "$root/tests/realtime/package.json" "$root/tests/realtime/package-lock.json" "$root/bench/realtime_soak.mjs" "$client/"
(cd "$client" && { test -d node_modules/ws || npm ci --no-audit --no-fund --silent; })
dir=$(mktemp -d)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
port=$((20000 + RANDOM % 20000))
"$root/build/tools/transcribe-server" -m "$model" --vad "$vad" --port "$port" --threads "$threads" \
    --max-realtime "$sessions" --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sfk "https://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
status=0
node "$client/realtime_soak.mjs" "$port" "$dir/cert.pem" "$audio" "$sessions" "$minutes" "$server" "$turns" || status=$?
echo "server peak RSS: $(grep VmHWM /proc/$server/status | awk '{print $2 / 1024 " MB"}')"
exit $status
