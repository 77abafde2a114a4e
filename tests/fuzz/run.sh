#!/usr/bin/env bash
# Builds the libFuzzer targets (preset "fuzz", or FUZZ_PRESET: "asan" builds them beside the test suite,
# as CI does, so one sanitizer build serves both), makes the seed corpora, replays the checked-in
# regression inputs, then fuzzes each target for a bounded time.
#   usage: tests/fuzz/run.sh [SECONDS_PER_TARGET=60] [TARGETS="model_load audio tokenizer server"]
# FUZZ_RUNS=N also stops each target after N executions (the long run: FUZZ_RUNS=1000000 ... 2400).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
secs="${1:-60}"
targets="${2:-model_load audio tokenizer server}"
preset="${FUZZ_PRESET:-fuzz}"
build="$root/build-$preset"
rm -f "$build"/crash-* 2>/dev/null || true
cmake --preset "$preset" >/dev/null
cmake --build "$build" --target fuzz_model_load fuzz_audio fuzz_tokenizer fuzz_server make_test_audio_fuzz -j"$(nproc)" >/dev/null
seeds="$build/fuzz-seeds"
/usr/bin/python3 tests/fuzz/make_seeds.py "$seeds" tests/fixtures/canary-qwen-tiny \
    .deps/llama.cpp/models/ggml-vocab-qwen2.gguf.inp "$build/tests/fuzz/make_test_audio_fuzz" >/dev/null
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in $targets; do
    case "$t" in
        model_load) seed="$seeds/model"; extra=(-dict=tests/fuzz/gguf.dict -max_len=65536 -rss_limit_mb=4096) ;;
        audio) seed="$seeds/audio"; extra=(-max_len=65536) ;;
        tokenizer) seed="$seeds/tokenizer"; extra=(-max_len=4096) ;;
        server) seed="$seeds/server"; extra=(-max_len=65536) ;;
        *) echo "unknown target $t" >&2; exit 2 ;;
    esac
    bin="$build/tests/fuzz/fuzz_$t"
    regressions="tests/fuzz/regressions/$t"
    if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
        "$bin" "${extra[@]}" "$regressions"/* >/dev/null 2>&1 || { echo "fuzz_$t: a regression input fails again" >&2; exit 1; }
    fi
    corpus="$build/corpus/$t"
    mkdir -p "$corpus"
    echo "fuzz_$t: ${secs}s${FUZZ_RUNS:+ or $FUZZ_RUNS executions}"
    status=0
    runs=()
    [ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
    "$bin" "${extra[@]}" "${runs[@]}" -max_total_time="$secs" -timeout=60 -print_final_stats=1 -artifact_prefix="$build/crash-$t-" \
        "$corpus" "$seed" > "$build/fuzz-$t.log" 2>&1 || status=$?
    grep -E "stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY|Done" "$build/fuzz-$t.log" || true
    rm -f "$build"/crash-"$t"-slow-unit-* # slow inputs are reported, not failures
    if ls "$build"/crash-"$t"-* >/dev/null 2>&1; then
        echo "fuzz_$t: found a failing input: $(ls "$build"/crash-"$t"-*)" >&2
        exit 1
    fi
    if [ "$status" -ne 0 ]; then
        echo "fuzz_$t: exited with status $status (see $build/fuzz-$t.log)" >&2
        tail -20 "$build/fuzz-$t.log" >&2
        exit 1
    fi
done
