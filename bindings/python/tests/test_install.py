"""pip install of the package, offline, into a fresh virtual environment that sees Debian's packages:
the installed copy carries libtranscribe.so and transcribes."""
import os
import shutil
import subprocess
import sys


def test_pip_install_offline(paths, tmp_path):
    src = tmp_path / "python"
    shutil.copytree(paths["root"] / "bindings" / "python", src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                                                              "__pycache__", "*.so"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRANSCRIBE_LIBRARY")}
    env["TRANSCRIBE_LIBRARY"] = os.environ.get("TRANSCRIBE_LIBRARY", str(paths["root"] / "build" / "src" / "libtranscribe.so"))
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", str(src)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    del env["TRANSCRIBE_LIBRARY"]  # the installed package finds its own copy
    code = ("import transcribe, sys; m = transcribe.Model(sys.argv[1]); "
            "print(transcribe.__file__); print(m.transcribe(sys.argv[2]).text)")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code, str(paths["models"] / "parakeet-tdt-tiny-f32.gguf"),
                        str(paths["parakeet"] / "audio" / "jfk_div8.wav")], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    where, text = r.stdout.splitlines()
    assert where.startswith(str(venv))
    assert text == (paths["parakeet"] / "golden" / "jfk_div8" / "text.txt").read_text().strip()
