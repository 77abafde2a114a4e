"""Paths the tests use: the built checkout (models converted by ctest's fixture step) and the fixtures.
TRANSCRIBE_TEST_MODELS / TRANSCRIBE_CLI override where the converted models and the CLI are."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
MODELS = Path(os.environ.get("TRANSCRIBE_TEST_MODELS", ROOT / "build" / "test-models"))
CLI = Path(os.environ.get("TRANSCRIBE_CLI", ROOT / "build" / "tools" / "transcribe-cli"))
CANARY = ROOT / "tests" / "fixtures" / "canary-qwen-tiny"
PARAKEET = ROOT / "tests" / "fixtures" / "parakeet-tdt-tiny"


@pytest.fixture(scope="session")
def paths():
    return {"models": MODELS, "cli": CLI, "canary": CANARY, "parakeet": PARAKEET, "root": ROOT}
