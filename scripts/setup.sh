#!/usr/bin/env bash
# Sets up a fresh Debian machine: system packages, the pinned ggml tree, a Release build, the bundled
# fixture model converted to GGUF, the real Silero VAD v5 fetched and converted, and a first
# transcription of the bundled jfk.wav with both.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(cmake g++ make pkg-config git ca-certificates openssl python3 python3-numpy python3-onnx python3-yaml
          python3-sentencepiece python3-distributed python3-pytest python3-venv python3-pip python3-setuptools
          python3-wheel
          libsndfile1-dev libsoxr-dev libfftw3-dev libutf8proc-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
          libboost-dev libssl-dev curl clang libclang-rt-dev bc chromium)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash scripts/fetch-ggml.sh
bash scripts/fetch-silero-vad.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRANSCRIBE_BUILD_TESTS=ON >/dev/null
cmake --build build -j"$(nproc)"

mkdir -p models
/usr/bin/python3 scripts/convert-canary-qwen.py \
    --checkpoint tests/fixtures/canary-qwen-tiny/checkpoint --llm tests/fixtures/canary-qwen-tiny/llm \
    -o models/canary-qwen-tiny.gguf --name canary-qwen-tiny
/usr/bin/python3 scripts/convert-silero-vad.py .deps/silero-vad/silero_vad_v5.onnx -o models/silero-vad-v5.gguf
/usr/bin/python3 scripts/convert-parakeet.py --nemo tests/fixtures/parakeet-tdt-tiny/model.nemo \
    -o models/parakeet-tdt-tiny.gguf --name parakeet-tdt-tiny
echo "setup: transcribing tests/fixtures/canary-qwen-tiny/audio/jfk.wav (random-weight fixture model: the words are"
echo "       noise; the speech regions and their times come from the real Silero VAD)"
build/tools/transcribe-cli -m models/canary-qwen-tiny.gguf --vad models/silero-vad-v5.gguf --max-new-tokens 32 \
    --format srt tests/fixtures/canary-qwen-tiny/audio/jfk.wav
