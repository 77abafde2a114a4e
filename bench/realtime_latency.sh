#!/usr/bin/env bash
# The Realtime API's latency (end of a turn to its completed event) and how many real-time streams one
# server sustains: transcribe-server with MODEL and VAD on THREADS threads, then, for each count in
# STREAMS, that many sessions at once playing AUDIO at real-time pace ROUNDS times (realtime_latency.mjs),
# after one untimed session.
# usage: bench/realtime_latency.sh MODEL.gguf VAD.gguf AUDIO.wav [THREADS] ["1 2 4"] [ROUNDS] [STAGGER_MS]
# STAGGER_MS: the sessions start that far apart (default 0: together, their turns ending at once).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model=$1 vad=$2 audio=$3 threads=${4:-2} counts=${5:-"1 2 4"} rounds=${6:-2} stagger=${7:-0}
client="$root/build/realtime-client"
mkdir -p "$client"
cp "$root/tests/realtime/package.json" "$root/tests/realtime/package-lock.json" "$root/bench/realtime_latency.mjs" "$client/"
(cd "$client" && { test -d node_modules/ws || npm ci --no-audit --no-fund --silent; })
port=$((20000 + RANDOM % 20000))
max=$(echo "$counts" | tr ' ' '\n' | sort -n | tail -1)
"$root/build/tools/transcribe-server" -m "$model" --vad "$vad" --port "$port" --threads "$threads" \
    --parallel 1 --queue 64 --max-realtime "$max" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
node "$client/realtime_latency.mjs" "$port" "$audio" 1 1 >/dev/null # warm-up: the first run sets up the graphs
for n in $counts; do
    node "$client/realtime_latency.mjs" "$port" "$audio" "$n" "$rounds" "$stagger"
done
echo "server peak RSS: $(grep VmHWM /proc/$server/status | awk '{print $2 / 1024 " MB"}')"
