#!/usr/bin/env bash
# Speculative decoding against plain greedy, in one script, runs interleaved (this machine's memory
# bandwidth drifts between minutes: a ratio is only taken within one round):
#   plain    transcribe-bench --fixed-new-tokens N (its JSON's `tokens` are the ids every other run must give)
#   perfect  --draft-ids: the plain run's own ids
#   every8   --draft-ids: those ids with every 8th one changed (id + 1)
#   random   --draft-ids: N seeded random ids
#   model    --draft DRAFT.gguf (when given): a real draft model's transcript, every stage counted
# Prints per round each run's decode ms, the plain/drafted ratio, steps, kept/drafted draft tokens, and
# whether its ids equal the plain run's; the last round's JSON lines are kept in $WORK.
#   usage: bench/speculative_compare.sh MODEL.gguf AUDIO [THREADS=2] [NEW_TOKENS=24] [ROUNDS=3] [DRAFT.gguf]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; audio="$2"; threads="${3:-2}"; new="${4:-24}"; rounds="${5:-3}"; draft="${6:-}"
py=/usr/bin/python3
bench="$root/build/tools/transcribe-bench"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
run() { # name [extra args...] -> one JSON line in $work/NAME.json
    local name="$1"; shift
    "$bench" -m "$model" -f "$audio" --threads "$threads" --runs 3 --warmup 1 --fixed-new-tokens "$new" --json "$@" \
        > "$work/$name.json"
}
run plain
$py - "$work" "$new" <<'EOF'
import json, random, sys
work, n = sys.argv[1], int(sys.argv[2])
ids = json.load(open(f"{work}/plain.json"))["tokens"]
open(f"{work}/perfect.txt", "w").write(" ".join(map(str, ids)))
open(f"{work}/every8.txt", "w").write(" ".join(str((t + 1) % 151936 if i % 8 == 7 else t) for i, t in enumerate(ids)))
rng = random.Random(1)
open(f"{work}/random.txt", "w").write(" ".join(str(rng.randrange(151936)) for _ in range(n)))
EOF
kinds="perfect every8 random"
[ -n "$draft" ] && kinds="$kinds model"
echo "model $model, audio $audio, $threads threads, $new new tokens, $rounds rounds"
printf "%-5s %-8s %10s %10s %7s %6s %9s %10s %8s %5s\n" round draft "plain ms" "draft ms" "x" steps "kept/sent" "whole x" "draft ms" ids
for round in $(seq 1 "$rounds"); do
    for kind in $kinds; do
        # Plain and drafted back to back, their order swapped every other round.
        if [ "$kind" = model ]; then args=(--draft "$draft"); else args=(--draft-ids "$work/$kind.txt"); fi
        if [ $(( round % 2 )) = 1 ]; then run plain; run "$kind" "${args[@]}"; else run "$kind" "${args[@]}"; run plain; fi
        $py - "$work" "$kind" "$round" <<'EOF'
import json, sys
work, kind, rnd = sys.argv[1], sys.argv[2], sys.argv[3]
p, d = json.load(open(f"{work}/plain.json")), json.load(open(f"{work}/{kind}.json"))
whole = lambda j: j["mel_ms"] + j["encoder_ms"] + j["prefill_ms"] + j["decode_ms"] + j.get("draft_ms", 0)
print("%-5s %-8s %10.1f %10.1f %7.2f %6d %9s %10.2f %8.1f %5s" % (
    rnd, kind, p["decode_ms"], d["decode_ms"], p["decode_ms"] / d["decode_ms"], d["decode_steps"],
    "%d/%d" % (d["accepted_tokens"], d["drafted_tokens"]), whole(p) / whole(d), d["draft_ms"],
    "same" if d["tokens"] == p["tokens"] else "DIFF"))
EOF
    done
done
