#!/usr/bin/env bash
# Sortformer, full-size synthetic (diar_streaming_sortformer_4spk-v2's shapes): transcribe-diarize (F32 and
# Q8_0 files) against NeMo's own modules in PyTorch (bench/nemo_sortformer_reference.py, F32 and BF16),
# runs interleaved in this script. A recording past the model's offline limit takes the streaming path
# with the model card's long-form sizes on both sides (ours: the automatic mode; NeMo: the same six sizes).
# Ours is timed end to end (process start to exit: model load, audio decode, diarization, post-processing).
# With a Parakeet GGUF, the cost of a speaker-attributed transcript: transcribe-bench with and without
# --diarize on the same recording.
#   usage: bench/sortformer_compare.sh MODEL.nemo AUDIO [THREADS=2] [REPS=3] [PARAKEET.gguf]
# NEMO_F32=1 adds NeMo in F32 to every round (Debian's torch runs F32 products on a generic BLAS: minutes).
# MODEL.nemo: scripts/make-synthetic-checkpoint.py --family sortformer --preset full; the GGUFs are made
# beside it. NeMo's source tree at the pinned commit in $NEMO_SRC (default /tmp/nemo).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nemo="$1"; audio="$2"; threads="${3:-2}"; reps="${4:-3}"; parakeet="${5:-}"
py=/usr/bin/python3
bin="$root/build/tools"
f32="${nemo%.nemo}-F32.gguf"; q8="${nemo%.nemo}-Q8_0.gguf"
[ -f "$f32" ] || $py "$root/scripts/convert-sortformer.py" --nemo "$nemo" -o "$f32" --outtype f32 >/dev/null
[ -f "$q8" ] || "$bin/transcribe-quantize" "$f32" "$q8" Q8_0 >/dev/null
audio_s="$($py -c "import wave; w = wave.open('$audio'); print(w.getnframes() / w.getframerate())")"
long="$($py -c "print(int($audio_s > 90))")"
sizes=(--spkcache-len 188 --fifo-len 40 --spkcache-update-period 300 --chunk-len 340 --chunk-left-context 1
       --chunk-right-context 40)
ours() { # ours MODEL -> seconds, peak RSS MB
    /usr/bin/time -f "%e %M" -o /tmp/sortformer_compare.time "$bin/transcribe-diarize" -m "$1" --threads "$threads" \
        "$audio" >/dev/null
    awk '{printf "%.2f %.0f", $1, $2 / 1024}' /tmp/sortformer_compare.time
}
nemo_run() { # nemo_run DTYPE -> seconds, peak RSS MB
    PYTHONPATH="${NEMO_SRC:-/tmp/nemo}:$root/scripts/nemo_reference" $py "$root/bench/nemo_sortformer_reference.py" \
        --nemo "$nemo" --audio "$audio" --threads "$threads" --dtype "$1" \
        $([ "$long" = 1 ] && echo --streaming "${sizes[@]}") 2>/dev/null |
        $py -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('%.2f %.0f' % (j['total_ms'] / 1000, j['peak_rss_mb']))"
}
bench_total() { # bench_total [--diarize F32.gguf] -> total ms, diarize ms, peak RSS MB
    "$bin/transcribe-bench" -m "$parakeet" -f "$audio" --threads "$threads" --runs 1 --warmup 0 --json "$@" |
        $py -c "import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('%.0f %.0f %.0f' % (1000 * j['audio_s'] / j['x_realtime'], j.get('diarize_ms', 0), j['peak_rss_mb']))"
}
echo "threads $threads, $(basename "$audio") (${audio_s} s), $([ "$long" = 1 ] && echo "streaming, long-form sizes" || echo offline)"
printf "%-4s %10s %10s %10s %10s %9s %9s %9s %12s\n" rep "NeMo F32" "NeMo BF16" "ours F32" "ours Q8_0" "F32 xRT" "Q8_0 xRT" \
    "Q8_0 RSS" "NeMo BF16/Q8"
for rep in $(seq "$reps"); do
    nf=-; [ "${NEMO_F32:-0}" = 1 ] && { set -- $(nemo_run f32); nf=$1; }
    set -- $(nemo_run bf16); nb=$1
    set -- $(ours "$f32"); of=$1
    set -- $(ours "$q8"); oq=$1; oqrss=$2
    printf "%-4s %10s %10s %10s %10s %9.1f %9.1f %9s %12.2f\n" "$rep" "$nf" "$nb" "$of" "$oq" \
        "$(echo "$audio_s / $of" | bc -l)" "$(echo "$audio_s / $oq" | bc -l)" "$oqrss" "$(echo "$nb / $oq" | bc -l)"
done
[ -n "$parakeet" ] || exit 0
echo "speaker-attributed transcript, $(basename "$parakeet"): transcribe-bench total ms, plain and with --diarize (Q8_0 diarizer)"
printf "%-4s %10s %12s %12s %10s %10s\n" rep "plain ms" "diarized ms" "diarize ms" "cost" "RSS MB"
for rep in $(seq "$reps"); do
    set -- $(bench_total); p=$1
    set -- $(bench_total --diarize "$q8"); d=$1; dz=$2; rss=$3
    printf "%-4s %10s %12s %12s %9.1f%% %10s\n" "$rep" "$p" "$d" "$dz" "$(echo "100 * ($d - $p) / $p" | bc -l)" "$rss"
done
