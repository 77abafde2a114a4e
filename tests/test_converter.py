"""Converter error table, LoRA merge, storage policy and the synthetic checkpoint generator.

Run with Debian's python3 (numpy) from tests/: python3 -m unittest -v test_converter
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CONVERTER = ROOT / "scripts" / "convert-canary-qwen.py"
SYNTH = ROOT / "scripts" / "make-synthetic-checkpoint.py"
FIXTURE = ROOT / "tests" / "fixtures" / "canary-qwen-tiny"
sys.path.insert(0, os.environ.get("TRANSCRIBE_GGUF_PY", str(ROOT / ".deps" / "llama.cpp" / "gguf-py")))
import gguf  # noqa: E402


def run_converter(ckpt, llm, out, *extra):
    return subprocess.run([sys.executable, str(CONVERTER), "--checkpoint", str(ckpt), "--llm", str(llm), "-o", str(out),
                           *extra], capture_output=True, text=True)


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), n


def rewrite_safetensors(src, dst, edit):
    """Copies src to dst with edit(header) applied to the JSON header (data bytes untouched)."""
    header, n = read_safetensors_header(src)
    edit(header)
    blob = json.dumps(header).encode()
    with open(src, "rb") as f, open(dst, "wb") as g:
        f.seek(8 + n)
        g.write(struct.pack("<Q", len(blob)))
        g.write(blob)
        shutil.copyfileobj(f, g)


class ConverterErrors(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.ckpt = self.tmp / "ckpt"
        self.ckpt.mkdir()
        shutil.copyfile(FIXTURE / "checkpoint" / "config.json", self.ckpt / "config.json")
        os.symlink(FIXTURE / "checkpoint" / "model.safetensors", self.ckpt / "model.safetensors")
        self.out = self.tmp / "out.gguf"

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def expect_error(self, result, *needles):
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("error:", result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)
        self.assertFalse(self.out.exists(), "a failed conversion must not leave a partial file")

    def test_missing_checkpoint_dir(self):
        self.expect_error(run_converter(self.tmp / "nope", FIXTURE / "llm", self.out), "checkpoint directory not found")

    def test_missing_safetensors(self):
        (self.ckpt / "model.safetensors").unlink()
        self.expect_error(run_converter(self.ckpt, FIXTURE / "llm", self.out), "model.safetensors")

    def test_missing_tokenizer_file(self):
        llm = self.tmp / "llm"
        shutil.copytree(FIXTURE / "llm", llm)
        (llm / "merges.txt").unlink()
        self.expect_error(run_converter(self.ckpt, llm, self.out), "merges.txt")

    def test_missing_tensor(self):
        (self.ckpt / "model.safetensors").unlink()
        name = "perception.encoder.layers.1.self_attn.linear_pos.weight"
        rewrite_safetensors(FIXTURE / "checkpoint" / "model.safetensors", self.ckpt / "model.safetensors",
                            lambda h: h.pop(name))
        self.expect_error(run_converter(self.ckpt, FIXTURE / "llm", self.out), "missing tensor", name)

    def test_wrong_shape(self):
        (self.ckpt / "model.safetensors").unlink()
        name = "llm.base_model.model.model.layers.0.mlp.up_proj.weight"

        def transpose(h):
            h[name]["shape"] = list(reversed(h[name]["shape"]))
        rewrite_safetensors(FIXTURE / "checkpoint" / "model.safetensors", self.ckpt / "model.safetensors", transpose)
        self.expect_error(run_converter(self.ckpt, FIXTURE / "llm", self.out), name, "[64, 192]", "expected [192, 64]")

    def test_not_a_salm_config(self):
        shutil.copyfile(FIXTURE / "llm" / "config.json", self.ckpt / "config.json")
        self.expect_error(run_converter(self.ckpt, FIXTURE / "llm", self.out), "not a NeMo SALM config")

    def test_llm_config_not_qwen3(self):
        llm = self.tmp / "llm"
        shutil.copytree(FIXTURE / "llm", llm)
        cfg = json.loads((llm / "config.json").read_text())
        cfg["model_type"] = "llama"
        (llm / "config.json").write_text(json.dumps(cfg))
        self.expect_error(run_converter(self.ckpt, llm, self.out), "not a Qwen3 config")

    def test_garbage_safetensors(self):
        (self.ckpt / "model.safetensors").unlink()
        (self.ckpt / "model.safetensors").write_bytes(b"\xff" * 64)
        self.expect_error(run_converter(self.ckpt, FIXTURE / "llm", self.out), "safetensors")


class ConverterOutput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp())
        cls.path = cls.tmp / "tiny.gguf"
        r = run_converter(FIXTURE / "checkpoint", FIXTURE / "llm", cls.path)
        assert r.returncode == 0, r.stderr
        cls.reader = gguf.GGUFReader(str(cls.path))
        cls.tensors = {t.name: t for t in cls.reader.tensors}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def field(self, key):
        f = self.reader.fields[key]
        return f.contents()

    def test_metadata(self):
        self.assertEqual(self.field("general.architecture"), "canary_qwen")
        self.assertEqual(self.field("canary_qwen.audio_token_id"), 151669)
        self.assertAlmostEqual(self.field("canary_qwen.lora_scale"), 4.0)
        self.assertEqual(self.field("canary_qwen.prompt_prefix"), [151644, 872, 198, 3167, 3114, 279, 2701, 25, 220])
        self.assertEqual(self.field("canary_qwen.prompt_suffix"), [151645, 198, 151644, 77091, 198])
        self.assertEqual(self.field("encoder.n_layers"), 2)
        self.assertEqual(self.field("llm.head_dim"), 16)
        tokens = self.field("tokenizer.ggml.tokens")
        self.assertEqual(tokens[151669], "<|audioplaceholder|>")
        self.assertEqual(self.field("tokenizer.ggml.token_type")[151669], gguf.TokenType.CONTROL)

    def test_storage_policy(self):
        T = gguf.GGMLQuantizationType
        self.assertEqual(self.tensors["token_embd.weight"].tensor_type, T.BF16)
        self.assertEqual(self.tensors["enc.blk.0.attn.q.weight"].tensor_type, T.BF16)
        self.assertEqual(self.tensors["llm.blk.0.attn_q.weight"].tensor_type, T.BF16)
        for name in ("llm.blk.0.attn_q.lora_a", "llm.blk.0.attn_q.lora_b", "llm.blk.0.attn_v.lora_b", "mel.window", "mel.filterbank",
                     "enc.blk.0.conv.dw.weight", "enc.sub.conv0.weight", "enc.blk.0.conv.bn.running_var",
                     "enc.blk.0.attn.q.bias", "llm.blk.0.attn_norm.weight"):
            self.assertEqual(self.tensors[name].tensor_type, T.F32, name)

    def test_lora_beside_its_base_weight_with_config_scale(self):
        header, n = read_safetensors_header(FIXTURE / "checkpoint" / "model.safetensors")
        raw = np.memmap(FIXTURE / "checkpoint" / "model.safetensors", dtype=np.uint8, mode="r", offset=8 + n)

        def load(name):
            b, e = header[name]["data_offsets"]
            u = raw[b:e].view(np.uint16).astype(np.uint32) << 16
            return u.view(np.float32).reshape(header[name]["shape"]).astype(np.float64)

        def stored(name, shape):
            t = self.tensors[name]
            if t.tensor_type == gguf.GGMLQuantizationType.BF16:
                u = np.array(t.data).view(np.uint16).astype(np.uint32) << 16
                return u.view(np.float32).reshape(shape).astype(np.float64)
            return np.array(t.data, dtype=np.float64).reshape(shape)
        p = "llm.base_model.model.model.layers.1.self_attn.v_proj."
        base, a, b = load(p + "base_layer.weight"), load(p + "lora_A.default.weight"), load(p + "lora_B.default.weight")
        got_w = stored("llm.blk.1.attn_v.weight", base.shape)
        got_a = stored("llm.blk.1.attn_v.lora_a", a.shape)
        got_b = stored("llm.blk.1.attn_v.lora_b", b.shape)
        self.assertTrue(np.array_equal(got_w, base))
        self.assertTrue(np.array_equal(got_a, a))
        self.assertLess(np.abs(got_b - 4.0 * b).max(), 1e-7)  # lora_alpha / r = 16 / 4 from the config
        # Together they are the spec's FP32 merge W + (alpha/r) B A.
        self.assertLess(np.abs(got_w + got_b @ got_a - (base + 4.0 * b @ a)).max(), 1e-6)
        # BF16 weights are copied bit-exactly.
        b, e = header["embed_tokens.weight"]["data_offsets"]
        self.assertTrue(np.array_equal(np.array(self.tensors["token_embd.weight"].data).view(np.uint16).ravel(),
                                       raw[b:e].view(np.uint16)))


class SyntheticCheckpoint(unittest.TestCase):
    def test_small_preset_converts(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            r = subprocess.run([sys.executable, str(SYNTH), "--preset", "small", "--out", str(tmp / "s")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            header, _ = read_safetensors_header(tmp / "s" / "checkpoint" / "model.safetensors")
            fixture_header, _ = read_safetensors_header(FIXTURE / "checkpoint" / "model.safetensors")
            self.assertEqual(set(header), set(fixture_header))  # same layers (2 + 2), same names
            self.assertEqual({v["dtype"] for k, v in header.items() if k != "__metadata__"}, {"BF16", "I64"})
            r = run_converter(tmp / "s" / "checkpoint", tmp / "s" / "llm", tmp / "s.gguf")
            self.assertEqual(r.returncode, 0, r.stderr)
            reader = gguf.GGUFReader(str(tmp / "s.gguf"))
            self.assertEqual(reader.fields["encoder.d_model"].contents(), 128)
            self.assertAlmostEqual(reader.fields["canary_qwen.lora_scale"].contents(), 2.0)

    def test_small_streaming_preset_converts_as_a_cache_aware_rnnt(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            r = subprocess.run([sys.executable, str(SYNTH), "--family", "parakeet-streaming", "--preset", "small",
                                "--out", str(tmp / "s")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([sys.executable, str(PARAKEET_CONVERTER), "--nemo", str(tmp / "s" / "model.nemo"), "-o",
                                str(tmp / "s.gguf")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            fields = gguf.GGUFReader(str(tmp / "s.gguf")).fields
            self.assertEqual(bytes(fields["general.architecture"].parts[-1]).decode(), "parakeet_rnnt")
            self.assertEqual([fields["encoder.att_context_sizes"].parts[i].tolist()[0]
                              for i in fields["encoder.att_context_sizes"].data], [70, 13, 70, 6, 70, 1, 70, 0])

    def test_full_preset_has_the_real_shapes(self):
        sys.path.insert(0, str(ROOT / "scripts"))
        import importlib.util
        spec = importlib.util.spec_from_file_location("synth", SYNTH)
        synth = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(synth)
        specs = {name: shape for name, shape, _ in synth.tensor_specs(synth.PRESETS["full"])}
        self.assertEqual(specs["embed_tokens.weight"], (151936, 2048))
        self.assertEqual(specs["perception.encoder.pre_encode.out.weight"], (1024, 4096))
        self.assertEqual(specs["perception.encoder.layers.31.conv.pointwise_conv1.weight"], (2048, 1024, 1))
        self.assertEqual(specs["llm.base_model.model.model.layers.27.self_attn.k_proj.weight"], (1024, 2048))
        self.assertEqual(specs["llm.base_model.model.model.layers.27.mlp.down_proj.weight"], (2048, 6144))
        n_params = sum(int(np.prod(s)) for n, s in specs.items() if "lora" not in n and "num_batches" not in n)
        self.assertGreater(n_params, 2.5e9)
        self.assertLess(n_params, 2.6e9)


class TorchCheckpointWriter(unittest.TestCase):
    """scripts/nemo_archive.py writes the .nemo state dicts of the synthetic checkpoints: past 2 GiB (the
    full Parakeet preset's is 2.47 GB) an archive must stay one that torch's reader (torch 1.13's miniz)
    opens, as NeMo's restore does with torch.load."""

    def test_an_archive_past_2_gib_has_no_zip64_records_and_loads(self):
        sys.path.insert(0, str(ROOT / "scripts"))
        from nemo_archive import write_torch_checkpoint
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "big.ckpt"
            n = 110_000_000  # 440 MB a tensor, 2.2 GB in all

            def tensors():
                for i in range(5):
                    yield f"t{i}", np.full((n,), i, dtype=np.float32)
            write_torch_checkpoint(path, tensors())
            self.assertGreater(path.stat().st_size, 2**31)
            with open(path, "rb") as f:
                f.seek(-4096, os.SEEK_END)
                tail = f.read()
            self.assertNotIn(b"PK\x06\x06", tail)  # no ZIP64 end record below 4 GiB, as torch.save writes it
            self.assertIn(b"PK\x05\x06", tail)
            try:
                import torch
            except ImportError:
                return  # Debian's python3-torch is not installed here: the structural check above stands
            state = torch.load(str(path), map_location="cpu")
            self.assertEqual(list(state), [f"t{i}" for i in range(5)])
            self.assertEqual([float(state[f"t{i}"][-1]) for i in range(5)], [0.0, 1.0, 2.0, 3.0, 4.0])


PARAKEET_CONVERTER = ROOT / "scripts" / "convert-parakeet.py"
PARAKEET_NEMO = ROOT / "tests" / "fixtures" / "parakeet-tdt-tiny" / "model.nemo"
PARAKEET_RNNT_NEMO = ROOT / "tests" / "fixtures" / "parakeet-rnnt-tiny" / "model.nemo"
STREAMING_NEMO = ROOT / "tests" / "fixtures" / "streaming-tiny" / "model.nemo"
PARAKEET_CTC_NEMO = ROOT / "tests" / "fixtures" / "parakeet-ctc-tiny" / "model.nemo"


def nemo_members(path):
    import tarfile
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_nemo(path, members):
    import io
    import tarfile
    with tarfile.open(path, "w:") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def rewrite_checkpoint(data, edit):
    """The torch zip with edit(name, bytes) -> bytes applied to every member."""
    import io
    import zipfile
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            dst.writestr(name, edit(name, src.read(name)))
    return out.getvalue()


class NemoConverterCase(unittest.TestCase):
    """A .nemo converter run on a fixture archive, edited or not (CONVERTER, NEMO: the subclass's)."""
    CONVERTER = NEMO = None

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.out = self.tmp / "out.gguf"
        self.members = nemo_members(self.NEMO)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def convert(self, nemo, *extra):
        return subprocess.run([sys.executable, str(self.CONVERTER), "--nemo", str(nemo), "-o", str(self.out), *extra],
                              capture_output=True, text=True)

    def convert_edited(self, edit):
        members = dict(self.members)
        edit(members)
        path = self.tmp / "edited.nemo"
        write_nemo(path, members)
        return self.convert(path)

    def expect_error(self, result, *needles):
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)
        self.assertFalse(self.out.exists(), "a failed conversion must not leave a partial file")


class ParakeetConverter(NemoConverterCase):
    CONVERTER, NEMO = PARAKEET_CONVERTER, PARAKEET_NEMO

    def test_metadata_and_storage(self):
        r = self.convert(PARAKEET_NEMO, "--outtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        field = lambda k: g.fields[k].parts[g.fields[k].data[0]].tolist()
        strings = lambda k: [bytes(g.fields[k].parts[i]).decode() for i in g.fields[k].data]
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_tdt")
        self.assertEqual([g.fields["parakeet_tdt.durations"].parts[i].tolist()[0] for i in g.fields["parakeet_tdt.durations"].data],
                         [0, 1, 2, 3, 4])
        self.assertEqual(field("parakeet_tdt.vocab_size"), [128])
        self.assertEqual(field("parakeet_tdt.max_symbols"), [10])
        self.assertEqual(strings("parakeet_tdt.punctuation"), ["'", ",", "."])  # the fixture README's set
        self.assertEqual(field("encoder.xscaling"), [False])
        types = {t.name: t.tensor_type.name for t in g.tensors}
        self.assertEqual(types["pred.lstm.0.weight"], "BF16")
        self.assertEqual(types["pred.lstm.0.bias"], "F32")
        self.assertEqual(types["joint.out.weight"], "BF16")
        self.assertEqual(types["enc.blk.0.conv.dw.weight"], "F32")
        self.assertNotIn("enc.blk.0.attn.q.bias", types)  # use_bias=false: no conformer biases

    def test_a_ctc_checkpoint_is_parakeet_ctc_with_its_head(self):
        """EncDecCTCModelBPE (a ConvASRDecoder head, no joint): architecture parakeet_ctc, the head's 1x1
        convolution as a [vocab + 1, d_model] matrix (blank last) and its bias in F32, no transducer keys."""
        r = self.convert(PARAKEET_CTC_NEMO, "--outtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        field = lambda k: g.fields[k].parts[g.fields[k].data[0]].tolist()
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_ctc")
        self.assertEqual((field("parakeet_ctc.vocab_size"), field("parakeet_ctc.blank_id")), ([128], [128]))
        self.assertNotIn("parakeet_ctc.durations", g.fields)
        tensors = {t.name: t for t in g.tensors}
        self.assertEqual(list(tensors["ctc.weight"].shape), [64, 129])  # gguf lists ne0 first
        self.assertEqual(tensors["ctc.weight"].tensor_type.name, "BF16")
        self.assertEqual(tensors["ctc.bias"].tensor_type.name, "F32")
        self.assertFalse(any(n.startswith(("joint.", "pred.")) for n in tensors))

        def wrong_width(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"feat_in: 64", b"feat_in: 65", 1)
        self.members = nemo_members(PARAKEET_CTC_NEMO)
        self.out.unlink()
        self.expect_error(self.convert_edited(wrong_width), "feat_in")

    def test_an_rnnt_checkpoint_is_parakeet_rnnt_without_durations(self):
        """EncDecRNNTBPEModel with the standard loss (parakeet-rnnt-tiny): architecture parakeet_rnnt, the
        joint's vocab + 1 outputs, no durations key, the decoding's max_symbols. The loss decides, as
        EncDecRNNTModel does: the TDT fixture's config with a default loss and no durations is RNNT; a
        multi-blank loss is an error; a TDT joint without durations is one too."""
        r = self.convert(PARAKEET_RNNT_NEMO, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        field = lambda k: g.fields[k].parts[g.fields[k].data[0]].tolist()
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_rnnt")
        self.assertNotIn("parakeet_rnnt.durations", g.fields)
        self.assertEqual(field("parakeet_rnnt.max_symbols"), [3])
        self.assertEqual((field("parakeet_rnnt.vocab_size"), field("parakeet_rnnt.blank_id")), ([128], [128]))
        tensors = {t.name: t for t in g.tensors}
        self.assertEqual(list(tensors["joint.out.weight"].shape), [32, 129])
        self.assertFalse(any(n.startswith("ctc.") for n in tensors))
        self.out.unlink()

        def multiblank(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"loss_name: tdt", b"loss_name: multiblank_rnnt")
        self.expect_error(self.convert_edited(multiblank), "multi-blank")

        def rnnt_loss_with_tdt_joint(members):  # durations gone, the joint still has 5 extra outputs
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"loss_name: tdt", b"loss_name: default") \
                .replace(b"durations", b"other_key")
        self.expect_error(self.convert_edited(rnnt_loss_with_tdt_joint), "do not match vocab 128 + 0 durations")

    def test_a_non_tdt_loss_keeps_the_decodings_own_durations_and_max_symbols_per_step(self):
        """EncDecRNNTModel copies durations into the decoding only for the tdt loss; another loss leaves the
        decoding's own, and RNNTDecoding is TDT whenever it has them. max_symbols falls back to the greedy
        config's max_symbols_per_step."""
        def default_loss(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"loss_name: tdt", b"loss_name: default") \
                .replace(b"max_symbols: 10", b"max_symbols_per_step: 7")
        r = self.convert_edited(default_loss)
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_tdt")
        self.assertEqual([g.fields["parakeet_tdt.durations"].parts[i].tolist()[0] for i in g.fields["parakeet_tdt.durations"].data],
                         [0, 1, 2, 3, 4])
        self.assertEqual(g.fields["parakeet_tdt.max_symbols"].parts[g.fields["parakeet_tdt.max_symbols"].data[0]].tolist(), [7])

    def test_a_hybrid_gets_the_transducer_and_its_aux_ctc_head(self):
        """EncDecHybridRNNTCTCBPEModel (parakeet-tdt-ctc-tiny): architecture parakeet_tdt with every transducer
        tensor, the aux_ctc head as ctc.weight / ctc.bias (from ctc_decoder.*) and its decoding section's
        segment rules under parakeet_tdt.ctc.*; an aux_ctc head of another vocabulary is an error."""
        hybrid = ROOT / "tests" / "fixtures" / "parakeet-tdt-ctc-tiny" / "model.nemo"
        r = self.convert(hybrid, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_tdt")
        tensors = {t.name: t for t in g.tensors}
        self.assertEqual(list(tensors["ctc.weight"].shape), [64, 129])
        self.assertIn("joint.out.weight", tensors)
        self.assertIn("parakeet_tdt.ctc.segment_separators", g.fields)
        self.assertIn("parakeet_tdt.ctc.segment_gap_threshold", g.fields)
        hybrid_head = np.array(tensors["ctc.weight"].data)
        # The hybrid was assembled with parakeet-ctc-tiny's head, whose conversion meets NeMo's CTC goldens
        # (test_parakeet_ctc): the same weights must come out of the hybrid.
        ctc_out = self.tmp / "ctc.gguf"
        r = subprocess.run([sys.executable, str(self.CONVERTER), "--nemo", str(PARAKEET_CTC_NEMO), "-o", str(ctc_out),
                            "--outtype", "f32"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        ctc_head = {t.name: t for t in gguf.GGUFReader(str(ctc_out)).tensors}["ctc.weight"]
        np.testing.assert_array_equal(hybrid_head, np.asarray(ctc_head.data))
        try:
            import torch
        except ImportError:
            torch = None  # Debian's python3-torch is not installed here: the comparison above stands
        if torch is not None:
            head = torch.load(io.BytesIO(nemo_members(PARAKEET_CTC_NEMO)["./model_weights.ckpt"]), map_location="cpu")
            np.testing.assert_array_equal(hybrid_head, head["decoder.decoder_layers.0.weight"].numpy()[:, :, 0])

        def other_vocab(members):
            head, _, tail = members["./model_config.yaml"].rpartition(b"num_classes: 128")  # aux_ctc's, the last
            members["./model_config.yaml"] = head + b"num_classes: 127" + tail
        self.members = nemo_members(hybrid)
        self.out.unlink()
        self.expect_error(self.convert_edited(other_vocab), "aux_ctc")

    def test_a_hybrids_open_aux_ctc_fields_are_filled_as_nemo_fills_them(self):
        """NeMo's hybrid fills aux_ctc.decoder's feat_in from the encoder and its class count from the
        tokenizer when the config leaves them open (feat_in null, num_classes -1, no vocabulary): the same
        head converts."""
        hybrid = ROOT / "tests" / "fixtures" / "parakeet-tdt-ctc-tiny" / "model.nemo"
        import yaml
        self.members = nemo_members(hybrid)

        def open_fields(members):
            cfg = yaml.safe_load(members["./model_config.yaml"])
            cfg["aux_ctc"]["decoder"].update(feat_in=None, num_classes=-1, vocabulary=[])
            members["./model_config.yaml"] = yaml.safe_dump(cfg, sort_keys=False).encode()
        r = self.convert_edited(open_fields)
        self.assertEqual(r.returncode, 0, r.stderr)
        tensors = {t.name: t for t in gguf.GGUFReader(str(self.out)).tensors}
        self.assertEqual(list(tensors["ctc.weight"].shape), [64, 129])

    def test_segment_rules_from_the_decoding_section(self):
        """NeMo's segment separators and gap threshold come from the model's decoding section (the fixture
        sets neither: NeMo's defaults ['.', '!', '?'] and no gap)."""
        def rules():
            g = gguf.GGUFReader(str(self.out))
            seps = [bytes(g.fields["parakeet_tdt.segment_separators"].parts[i]).decode()
                    for i in g.fields["parakeet_tdt.segment_separators"].data]
            gap = g.fields["parakeet_tdt.segment_gap_threshold"]
            return seps, gap.parts[gap.data[0]].tolist()[0]
        self.assertEqual(self.convert(PARAKEET_NEMO).returncode, 0)
        self.assertEqual(rules(), ([".", "!", "?"], 0))

        def custom(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(
                b"decoding:\n", "decoding:\n  segment_seperators: ['。', '?']\n  segment_gap_threshold: 12\n".encode())
        r = self.convert_edited(custom)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(rules(), (["。", "?"], 12))
        self.out.unlink()

        def bad(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(
                b"decoding:\n", b"decoding:\n  segment_gap_threshold: -3\n")
        self.expect_error(self.convert_edited(bad), "segment_gap_threshold")

    def test_missing_and_unreadable_archives(self):
        self.expect_error(self.convert(self.tmp / "none.nemo"), "not found")
        (self.tmp / "junk.nemo").write_bytes(b"\x00" * 1000)
        self.expect_error(self.convert(self.tmp / "junk.nemo"), "not a .nemo archive")
        self.expect_error(self.convert_edited(lambda m: m.pop("./model_config.yaml")), "model_config.yaml")
        self.expect_error(self.convert_edited(lambda m: m.update({"./model_config.yaml": b"encoder: [unclosed"})),
                          "not valid YAML")
        self.expect_error(self.convert_edited(lambda m: m.update({"./model_weights.ckpt": b"PK\x03\x04 broken"})),
                          "model_weights.ckpt")

    def test_a_pickle_that_would_run_code_is_refused(self):
        def poison(members):
            members["./model_weights.ckpt"] = rewrite_checkpoint(
                members["./model_weights.ckpt"],
                lambda name, data: b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueR." if name.endswith("data.pkl") else data)
        self.expect_error(self.convert_edited(poison), "os.system")

    def test_missing_tensor_and_wrong_config(self):
        def drop(members):
            members["./model_weights.ckpt"] = rewrite_checkpoint(
                members["./model_weights.ckpt"],
                lambda name, data: data.replace(b"joint.joint_net.2.bias", b"joint.joint_net.9.bias"))
        self.expect_error(self.convert_edited(drop), "missing tensor", "joint.joint_net.2.bias")

        def not_tdt(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"durations", b"other_key")
        self.expect_error(self.convert_edited(not_tdt), "not a TDT model")


AED_NEMO = Path(__file__).resolve().parent / "fixtures" / "canary-aed-tiny" / "model.nemo"
AED_V2_NEMO = Path(__file__).resolve().parent / "fixtures" / "canary-aed-v2-tiny" / "model.nemo"
AED_CONVERTER = Path(__file__).resolve().parent.parent / "scripts" / "convert-canary-aed.py"


class StreamingConverter(NemoConverterCase):
    """Cache-aware streaming checkpoints (streaming-tiny's hybrid): the encoder's causal subsampling, causal
    convolutions, LayerNorm conv module and attention contexts as keys; NeMo's checks on them."""
    CONVERTER, NEMO = PARAKEET_CONVERTER, STREAMING_NEMO

    def test_cache_aware_keys_and_tensors(self):
        r = self.convert(STREAMING_NEMO, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        ints = lambda k: [g.fields[k].parts[i].tolist()[0] for i in g.fields[k].data]
        string = lambda k: bytes(g.fields[k].parts[-1]).decode()
        self.assertEqual(bytes(g.fields["general.architecture"].parts[-1]).decode(), "parakeet_rnnt")
        self.assertEqual(g.fields["encoder.causal_subsampling"].parts[-1].tolist(), [True])
        self.assertEqual(ints("encoder.conv_context"), [8, 0])  # conv_context_size causal, kernel 9
        self.assertEqual(string("encoder.conv_norm"), "layer_norm")
        self.assertEqual(string("encoder.att_context_style"), "chunked_limited")
        self.assertEqual(ints("encoder.att_context_sizes"), [70, 13, 70, 6, 70, 1, 70, 0])
        tensors = {t.name: t for t in g.tensors}
        self.assertEqual(list(tensors["enc.sub.out.weight"].shape), [32 * 11, 64])  # 80 bins -> 41 -> 21 -> 11
        self.assertIn("enc.blk.0.conv.norm.weight", tensors)
        self.assertNotIn("enc.blk.0.conv.bn.running_mean", tensors)
        self.assertIn("ctc.weight", tensors)  # the hybrid's CTC head
        # An offline model keeps its files as they were: none of these keys.
        self.out.unlink()
        self.assertEqual(self.convert(PARAKEET_NEMO, "--outtype", "f32").returncode, 0)
        plain = gguf.GGUFReader(str(self.out)).fields
        for key in ("encoder.causal_subsampling", "encoder.conv_context", "encoder.conv_norm", "encoder.att_context_sizes"):
            self.assertNotIn(key, plain)

    def test_contexts_nemo_refuses_are_refused(self):
        def edited(old, new):
            def edit(members):
                cfg = members["./model_config.yaml"]
                self.assertIn(old, cfg)
                members["./model_config.yaml"] = cfg.replace(old, new, 1)
            return edit
        # chunked_limited: the left context a whole number of chunks (70 % (12 + 1) != 0).
        self.expect_error(self.convert_edited(edited(b"- - 70\n    - 13", b"- - 70\n    - 12")), "should be zero")
        self.expect_error(self.convert_edited(edited(b"conv_context_size: causal", b"conv_context_size: [3, 3]")),
                          "conv_context_size")
        self.expect_error(self.convert_edited(edited(b"att_context_style: chunked_limited", b"att_context_style: sliding")),
                          "att_context_style")
        self.expect_error(self.convert_edited(edited(b"conv_norm_type: layer_norm", b"conv_norm_type: group_norm")),
                          "conv_norm_type")


class CanaryAedConverter(NemoConverterCase):
    """scripts/convert-canary-aed.py: metadata of both tokenizer kinds, and one clear line for each config
    it cannot take (no partial file left)."""
    CONVERTER, NEMO = AED_CONVERTER, AED_NEMO

    def test_metadata_of_both_tokenizers(self):
        r = self.convert(AED_NEMO, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        field = lambda k: g.fields[k].contents()
        self.assertEqual(field("general.architecture"), "canary_aed")
        self.assertEqual(field("canary_aed.languages"), ["en", "de", "es", "fr"])
        self.assertEqual(field("canary_aed.language_tokens"), [22, 23, 24, 25])
        self.assertEqual((field("canary_aed.token.bos"), field("canary_aed.token.eos"), field("canary_aed.token.pad")), (4, 3, 2))
        self.assertEqual(field("canary_aed.prompt_encoding"), "ids")
        self.assertEqual(field("tokenizer.ggml.model"), "canary")
        self.assertEqual(len(field("tokenizer.ggml.tokens")), 507)
        self.assertNotIn("dec.output.weight", {t.name for t in g.tensors})  # tied: the embedding serves
        r = self.convert(AED_V2_NEMO, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        self.assertEqual(field("canary_aed.prompt_encoding"), "text")
        self.assertEqual(field("tokenizer.ggml.model"), "llama")
        self.assertEqual(field("tokenizer.ggml.remove_extra_whitespaces"), False)
        self.assertEqual(field("tokenizer.ggml.add_space_prefix"), True)

    def test_configs_it_cannot_take(self):
        def edit_config(old, new):
            def edit(members):
                assert old in members["./model_config.yaml"]
                members["./model_config.yaml"] = members["./model_config.yaml"].replace(old, new)
            return edit
        self.expect_error(self.convert_edited(edit_config(b"prompt_format: canary2", b"prompt_format: canary")),
                          "prompt_format 'canary' is not supported")
        self.expect_error(self.convert_edited(edit_config(b"  num_layers: 0", b"  num_layers: 2")),
                          "Transformer encoder")
        self.expect_error(self.convert_edited(edit_config(b"hidden_act: relu", b"hidden_act: gelu")), "relu")
        self.expect_error(self.convert_edited(edit_config(b"type: agg", b"type: wpe")), "tokenizer type")

        def drop(members):
            members["./model_weights.ckpt"] = rewrite_checkpoint(
                members["./model_weights.ckpt"],
                lambda name, data: data.replace(b"transf_decoder._decoder.final_layer_norm.bias",
                                                b"transf_decoder._decoder.final_layer_norm.bixs"))
        self.expect_error(self.convert_edited(drop), "missing tensor", "final_layer_norm.bias")


class SortformerConverter(NemoConverterCase):
    """scripts/convert-sortformer.py: the streaming keys (NeMo's inference sizes, the model's cache constants,
    whether it was trained for streaming) and the mel normalisation of both released configurations."""
    CONVERTER, NEMO = ROOT / "scripts" / "convert-sortformer.py", ROOT / "tests" / "fixtures" / "sortformer-tiny" / "model.nemo"

    def test_streaming_keys_and_normalisation(self):
        r = self.convert(self.NEMO, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        field = lambda k: g.fields[k].contents()
        self.assertEqual(field("general.architecture"), "sortformer")
        sizes = ("spkcache_len", "fifo_len", "spkcache_update_period", "chunk_len", "chunk_left_context", "chunk_right_context")
        self.assertEqual([field("sortformer.streaming." + k) for k in sizes], [188, 188, 144, 6, 1, 7])
        self.assertEqual(field("sortformer.streaming.spkcache_sil_frames_per_spk"), 3)
        self.assertAlmostEqual(field("sortformer.streaming.sil_threshold"), 0.2, places=6)
        self.assertFalse(field("sortformer.streaming.trained"))  # v1's config: an offline model
        self.assertNotIn("mel.normalize", g.fields)  # per_feature, the default
        # v2's layout (the synthetic generator's: streaming_mode true, normalize NA, a cache constant changed).
        synth = self.tmp / "v2"
        r = subprocess.run([sys.executable, str(SYNTH), "--family", "sortformer", "--preset", "small", "--out", str(synth)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        members = nemo_members(synth / "model.nemo")
        import yaml
        cfg = yaml.safe_load(members["./model_config.yaml"])
        cfg["sortformer_modules"]["sil_threshold"] = 0.3
        members["./model_config.yaml"] = yaml.safe_dump(cfg, sort_keys=False).encode()
        write_nemo(self.tmp / "v2.nemo", members)
        r = self.convert(self.tmp / "v2.nemo")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        self.assertTrue(field("sortformer.streaming.trained"))
        self.assertEqual(field("mel.normalize"), "none")
        self.assertEqual(field("mel.n_mels"), 128)
        self.assertAlmostEqual(field("sortformer.streaming.sil_threshold"), 0.3, places=6)

    def test_configs_it_cannot_take(self):
        def edit(members):
            members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"normalize: per_feature",
                                                                                    b"normalize: all_features")
        self.expect_error(self.convert_edited(edit), "unsupported mel normalisation all_features")

    def test_a_falsy_normalize_is_no_normalisation(self):
        """FilterbankFeatures normalises only when `normalize` is truthy: null (or false) is the log-mel as it
        is, like v2's "NA"."""
        for value in (b"null", b"false"):
            def edit(members, value=value):
                members["./model_config.yaml"] = members["./model_config.yaml"].replace(b"normalize: per_feature",
                                                                                        b"normalize: " + value)
            r = self.convert_edited(edit)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(gguf.GGUFReader(str(self.out)).fields["mel.normalize"].contents(), "none", value)



QWEN3_ASR_CONVERTER = ROOT / "scripts" / "convert-qwen3-asr.py"
QWEN3_ASR_FIXTURE = ROOT / "tests" / "fixtures" / "qwen3-asr-tiny" / "checkpoint"


class Qwen3AsrConverter(unittest.TestCase):
    """scripts/convert-qwen3-asr.py on the released layout (qwen3-asr-tiny's checkpoint folder)."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.ckpt = self.tmp / "ckpt"
        shutil.copytree(QWEN3_ASR_FIXTURE, self.ckpt)
        self.out = self.tmp / "out.gguf"

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def convert(self, folder=None, *extra):
        return subprocess.run([sys.executable, str(QWEN3_ASR_CONVERTER), "--checkpoint", str(folder or self.ckpt), "-o",
                               str(self.out), *extra], capture_output=True, text=True)

    def expect_error(self, r, *needles):
        self.assertEqual(r.returncode, 1, r.stdout)
        for needle in needles:
            self.assertIn(needle, r.stderr)
        self.assertFalse(self.out.exists(), "a failed conversion must not leave a partial file")

    def test_metadata_prompt_and_storage(self):
        r = self.convert(None, "--outtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        kv = {f.name: f for f in g.fields.values()}
        text = lambda k: bytes(kv[k].parts[-1]).decode()
        ints = lambda k: [int(kv[k].parts[i][0]) for i in kv[k].data]
        self.assertEqual(text("general.architecture"), "qwen3_asr")
        self.assertEqual(text("qwen3_asr.prompt_system"), "<|im_start|>system\n")
        self.assertEqual(text("qwen3_asr.prompt_user"), "<|im_end|>\n<|im_start|>user\n<|audio_start|>")
        self.assertEqual(text("qwen3_asr.prompt_assistant"), "<|audio_end|><|im_end|>\n<|im_start|>assistant\n")
        tok = json.loads((self.ckpt / "tokenizer_config.json").read_text())["added_tokens_decoder"]
        ids = {v["content"]: int(k) for k, v in tok.items()}
        self.assertEqual(ints("qwen3_asr.eos_token_ids"), [ids["<|im_end|>"], ids["<|endoftext|>"]])
        # skip_special_tokens: every special added token dropped from the text, <asr_text> (not special) kept.
        drop = ints("tokenizer.drop_ids")
        self.assertIn(ids["<|audio_pad|>"], drop)
        self.assertNotIn(ids["<asr_text>"], drop)
        self.assertEqual(int(kv["mel.whisper_pad_samples"].parts[-1][0]), 0)
        types = {t.name: t.tensor_type.name for t in g.tensors}
        self.assertEqual(types["enc.down1.weight"], "F32")
        self.assertEqual(types["enc.down2.weight"], "BF16")  # an im2col product's matrix
        self.assertEqual(types["enc.pos_enc"], "F32")
        self.assertEqual(types["enc.blk.0.attn_q.weight"], "BF16")
        self.assertEqual(types["llm.output.weight"], "BF16")  # the untied head

    def test_sharded_checkpoint_converts_to_the_same_tensors(self):
        single = self.tmp / "single.gguf"
        self.assertEqual(self.convert(None, "--outtype", "f32").returncode, 0)
        self.out.rename(single)
        header, n = read_safetensors_header(self.ckpt / "model.safetensors")
        names = sorted(k for k in header if k != "__metadata__")
        blob = (self.ckpt / "model.safetensors").read_bytes()[8 + n:]
        weight_map = {}
        for shard, part in (("model-00001-of-00002.safetensors", names[::2]), ("model-00002-of-00002.safetensors", names[1::2])):
            h, data, at = {}, b"", 0
            for name in part:
                b0, b1 = header[name]["data_offsets"]
                h[name] = dict(header[name], data_offsets=[at, at + b1 - b0])
                data += blob[b0:b1]
                at += b1 - b0
                weight_map[name] = shard
            hb = json.dumps(h).encode()
            (self.ckpt / shard).write_bytes(struct.pack("<Q", len(hb)) + hb + data)
        (self.ckpt / "model.safetensors").unlink()
        (self.ckpt / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        r = self.convert(None, "--outtype", "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        a, b = gguf.GGUFReader(str(single)), gguf.GGUFReader(str(self.out))
        self.assertEqual([t.name for t in a.tensors], [t.name for t in b.tensors])
        for x, y in zip(a.tensors, b.tensors):
            np.testing.assert_array_equal(np.array(x.data), np.array(y.data), x.name)

    def test_bad_checkpoints_name_what_they_are(self):
        cfg = json.loads((self.ckpt / "config.json").read_text())
        # An aligner's config without what the aligner needs (its head's classes, the <timestamp> token).
        aligner = dict(cfg, thinker_config=dict(cfg["thinker_config"], model_type="qwen3_forced_aligner"))
        (self.ckpt / "config.json").write_text(json.dumps(aligner))
        self.expect_error(self.convert(), "forced aligner config without classify_num")
        aligner = dict(aligner, timestamp_token_id=1, timestamp_segment_time=80)
        aligner["thinker_config"]["classify_num"] = 10
        (self.ckpt / "config.json").write_text(json.dumps(aligner))
        self.expect_error(self.convert(), "<timestamp>", "not Qwen3-ASR's tokenizer")
        (self.ckpt / "config.json").write_text(json.dumps(dict(cfg, model_type="qwen2_audio")))
        self.expect_error(self.convert(), "not a Qwen3-ASR config")
        (self.ckpt / "config.json").write_text(json.dumps(cfg))
        tok = json.loads((self.ckpt / "tokenizer_config.json").read_text())
        tok["added_tokens_decoder"] = {k: v for k, v in tok["added_tokens_decoder"].items() if v["content"] != "<asr_text>"}
        (self.ckpt / "tokenizer_config.json").write_text(json.dumps(tok))
        self.expect_error(self.convert(), "<asr_text>", "not Qwen3-ASR's tokenizer")
        self.expect_error(self.convert(self.tmp / "nowhere"), "checkpoint directory not found")
        self.expect_error(self.convert(ROOT / "tests" / "fixtures" / "canary-qwen-tiny" / "checkpoint"), "not a Qwen3-ASR config")


QWEN3_ALIGNER_FIXTURE = ROOT / "tests" / "fixtures" / "qwen3-aligner-tiny" / "checkpoint"


class Qwen3AlignerConverter(Qwen3AsrConverter):
    """scripts/convert-qwen3-asr.py on Qwen3-ForcedAligner's released layout (qwen3-aligner-tiny's folder)."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.ckpt = self.tmp / "ckpt"
        shutil.copytree(QWEN3_ALIGNER_FIXTURE, self.ckpt)
        self.out = self.tmp / "out.gguf"

    def test_metadata_prompt_and_storage(self):
        r = self.convert(None, "--outtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = gguf.GGUFReader(str(self.out))
        kv = {f.name: f for f in g.fields.values()}
        u32 = lambda k: int(kv[k].parts[-1][0])
        self.assertEqual(bytes(kv["general.architecture"].parts[-1]).decode(), "qwen3_forced_aligner")
        cfg = json.loads((self.ckpt / "config.json").read_text())
        tok = json.loads((self.ckpt / "tokenizer_config.json").read_text())["added_tokens_decoder"]
        ids = {v["content"]: int(k) for k, v in tok.items()}
        self.assertEqual(u32("qwen3_forced_aligner.timestamp_token_id"), ids["<timestamp>"])
        self.assertEqual(u32("qwen3_forced_aligner.timestamp_token_id"), cfg["timestamp_token_id"])
        self.assertEqual(u32("qwen3_forced_aligner.audio_start_token_id"), ids["<|audio_start|>"])
        self.assertEqual(u32("qwen3_forced_aligner.audio_end_token_id"), ids["<|audio_end|>"])
        self.assertEqual(u32("qwen3_forced_aligner.audio_token_id"), ids["<|audio_pad|>"])
        self.assertEqual(float(kv["qwen3_forced_aligner.timestamp_segment_ms"].parts[-1][0]), cfg["timestamp_segment_time"])
        self.assertEqual(u32("qwen3_forced_aligner.max_audio_ms"), 180000)  # MAX_FORCE_ALIGN_INPUT_SECONDS
        self.assertEqual(u32("llm.head_rows"), cfg["thinker_config"]["classify_num"])
        self.assertNotIn("qwen3_forced_aligner.eos_token_ids", kv)  # it generates nothing
        shapes = {t.name: [int(x) for x in t.shape] for t in g.tensors}
        self.assertEqual(shapes["llm.output.weight"], [64, cfg["thinker_config"]["classify_num"]])
        self.assertEqual({t.name: t.tensor_type.name for t in g.tensors}["llm.output.weight"], "BF16")

    def test_bad_checkpoints_name_what_they_are(self):
        cfg = json.loads((self.ckpt / "config.json").read_text())
        (self.ckpt / "config.json").write_text(json.dumps(dict(cfg, timestamp_token_id=cfg["timestamp_token_id"] - 1)))
        self.expect_error(self.convert(), "is not <timestamp>")



WHISPER_CONVERTER = ROOT / "scripts" / "convert-whisper.py"
WHISPER_FIXTURE = ROOT / "tests" / "fixtures" / "whisper-tiny"
# transformers' WhisperForConditionalGeneration names for openai/whisper's (models/whisper/convert_openai_to_hf.py).
HF_RENAMES = [("encoder.positional_embedding", "encoder.embed_positions.weight"),
              ("decoder.positional_embedding", "decoder.embed_positions.weight"),
              ("decoder.token_embedding", "decoder.embed_tokens"), ("encoder.ln_post", "encoder.layer_norm"),
              ("decoder.ln.", "decoder.layer_norm."), (".blocks.", ".layers."), (".cross_attn_ln", ".encoder_attn_layer_norm"),
              (".cross_attn.", ".encoder_attn."), (".attn_ln", ".self_attn_layer_norm"), (".attn.", ".self_attn."),
              (".query", ".q_proj"), (".key", ".k_proj"), (".value", ".v_proj"), (".out.", ".out_proj."),
              (".mlp.0", ".fc1"), (".mlp.2", ".fc2"), (".mlp_ln", ".final_layer_norm")]


def write_hf_whisper(folder: Path):
    """The whisper-tiny fixture's weights and tokenizer in transformers' layout: model.safetensors under
    transformers' names, config.json, vocab.json (GPT-2's byte-level strings), added_tokens.json and
    generation_config.json with the fixture's alignment heads."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from nemo_archive import TorchCheckpoint  # the reader the converter uses for model.pt
    src = TorchCheckpoint((WHISPER_FIXTURE / "model.pt").read_bytes(), "model.pt")
    dims = src.meta["dims"]
    header, blobs, offset = {}, [], 0
    for name in sorted(src.tensors):
        arr, _ = src.raw(name)
        hf = name
        for ours, theirs in HF_RENAMES:
            hf = hf.replace(ours, theirs)
        data = np.ascontiguousarray(arr).tobytes()
        header["model." + hf] = {"dtype": "F16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    (folder / "config.json").write_text(json.dumps({
        "num_mel_bins": dims["n_mels"], "max_source_positions": dims["n_audio_ctx"], "d_model": dims["n_audio_state"],
        "encoder_attention_heads": dims["n_audio_head"], "encoder_layers": dims["n_audio_layer"],
        "vocab_size": dims["n_vocab"], "max_target_positions": dims["n_text_ctx"],
        "decoder_attention_heads": dims["n_text_head"], "decoder_layers": dims["n_text_layer"]}))
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    char, n = {}, 0
    for b in range(256):
        char[b] = chr(b) if b in printable else chr(256 + n)
        n += b not in printable
    import base64
    lines = [l.split() for l in (WHISPER_FIXTURE / "multilingual.tiktoken").read_text().splitlines() if l]
    (folder / "vocab.json").write_text(json.dumps({"".join(char[b] for b in base64.b64decode(t)): int(r) for t, r in lines}))
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in json.loads(
        (WHISPER_FIXTURE / "MANIFEST.json").read_text())["tokenizer"]["language_codes"]] + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    (folder / "added_tokens.json").write_text(json.dumps({t: len(lines) + i for i, t in enumerate(specials)}))
    (folder / "generation_config.json").write_text(json.dumps({"alignment_heads": [[1, 0], [1, 1]]}))


def gguf_contents(path: Path):
    r = gguf.GGUFReader(str(path))
    fields = {k: (f.types, [bytes(p) for p in f.parts]) for k, f in r.fields.items() if k != "general.name"}
    tensors = {t.name: (t.tensor_type, tuple(t.shape), bytes(t.data)) for t in r.tensors}
    return fields, tensors


class WhisperConverter(unittest.TestCase):
    def test_both_layouts_give_the_same_gguf(self):
        """OpenAI's model.pt + multilingual.tiktoken and the same weights in transformers' layout give the
        same tensors and metadata (alignment heads: whisper's default for the file, generation_config's
        for the folder, the same heads here)."""
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            write_hf_whisper(tmp / "hf")
            outs = []
            for src in (WHISPER_FIXTURE / "model.pt", tmp / "hf"):
                out = tmp / (src.name + ".gguf")
                r = subprocess.run([sys.executable, str(WHISPER_CONVERTER), "--checkpoint", str(src), "-o", str(out),
                                    "--outtype", "f16"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                outs.append(gguf_contents(out))
            self.assertEqual(outs[0][1].keys(), outs[1][1].keys())
            for name in outs[0][1]:
                self.assertEqual(outs[0][1][name], outs[1][1][name], name)
            self.assertEqual(outs[0][0], outs[1][0])

    def test_the_synthetic_generator_writes_openais_layout(self):
        """make-synthetic-checkpoint.py --family whisper: the fixture's state-dict names, dims keys and float16
        storage (OpenAI's layout, which whisper.load_model reads), at the preset's dims; it converts."""
        sys.path.insert(0, str(ROOT / "scripts"))
        from nemo_archive import TorchCheckpoint
        fixture = TorchCheckpoint((WHISPER_FIXTURE / "model.pt").read_bytes(), "fixture")
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            r = subprocess.run([sys.executable, str(SYNTH), "--family", "whisper", "--preset", "toy", "--out",
                                str(tmp / "w")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            made = TorchCheckpoint((tmp / "w" / "model.pt").read_bytes(), "made")
            self.assertEqual(set(made.tensors), set(fixture.tensors))
            self.assertEqual(made.meta["dims"].keys(), fixture.meta["dims"].keys())
            self.assertEqual(made.meta["dims"]["n_audio_state"], 64)
            for name in fixture.tensors:
                self.assertEqual(made.shape(name), fixture.shape(name), name)  # the toy dims are the fixture's
                self.assertEqual(made.raw(name)[0].dtype, np.float16, name)
            r = subprocess.run([sys.executable, str(WHISPER_CONVERTER), "--checkpoint", str(tmp / "w" / "model.pt"),
                                "-o", str(tmp / "w.gguf")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([sys.executable, str(SYNTH), "--family", "whisper", "--preset", "full", "--out",
                                str(tmp / "x")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--family whisper takes --preset", r.stderr)

    def test_bad_inputs_name_what_is_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            write_hf_whisper(tmp / "hf")
            (tmp / "hf" / "vocab.json").unlink()
            cases = [(tmp / "hf", "vocab.json not found"),
                     (ROOT / "tests" / "fixtures" / "canary-aed-tiny" / "model.nemo", "not an OpenAI Whisper checkpoint"),
                     (tmp / "nothing.pt", "checkpoint not found")]
            for src, says in cases:
                r = subprocess.run([sys.executable, str(WHISPER_CONVERTER), "--checkpoint", str(src), "-o", str(tmp / "o.gguf")],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 1, src)
                self.assertIn(says, r.stderr, src)
                self.assertFalse((tmp / "o.gguf").exists())
            shutil.copy(WHISPER_FIXTURE / "model.pt", tmp / "model.pt")  # no tokenizer beside it
            r = subprocess.run([sys.executable, str(WHISPER_CONVERTER), "--checkpoint", str(tmp / "model.pt"), "-o",
                                str(tmp / "o.gguf")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("multilingual.tiktoken", r.stderr)


if __name__ == "__main__":
    unittest.main()
