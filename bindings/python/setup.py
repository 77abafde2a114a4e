"""pip install ./bindings/python: the transcribe package, with libtranscribe.so from the build tree
bundled when there is one (else the package finds it where `cmake --install` put it, or at
$TRANSCRIBE_LIBRARY). No compiler and no PyPI package is needed; numpy is optional; the batch tool
needs Dask (Debian: python3-distributed)."""

import glob
import os
import shutil

from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
built = os.environ.get("TRANSCRIBE_LIBRARY") or os.path.join(here, "..", "..", "build", "src", "libtranscribe.so")
bundled = []
if os.path.exists(built):
    target = os.path.join(here, "transcribe", "libtranscribe.so")
    shutil.copyfile(os.path.realpath(built), target)
    bundled = ["libtranscribe.so"]

setup(
    name="transcribe",
    version="0.1.0",
    description="Speech to text on ggml (Canary-Qwen, Parakeet-TDT): the C library through ctypes, and Dask batch jobs",
    packages=["transcribe"],
    package_data={"transcribe": bundled},
    python_requires=">=3.9",
    extras_require={"batch": ["distributed"], "numpy": ["numpy"]},
)
