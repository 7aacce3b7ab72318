"""--bf16 / --memory-efficient-bf16 without a TPU (plugins/fairseq_fixes.py).

fairseq's options.py:200-201 sets tpu=True whenever --bf16 is given; the plugin undoes
that at distributed_utils.call_main unless a TPU is really in use."""
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch

from nesyseq.plugins import fairseq_fixes
from nesyseq.plugins.fairseq_fixes import resolve_bf16_tpu, tpu_requested_explicitly

REPO = Path(__file__).resolve().parents[1]


def cfg(bf16=True, tpu=True):
    return Namespace(common=Namespace(bf16=bf16, tpu=tpu))


def test_fairseq_still_implies_tpu_from_bf16():
    """The bug the fix is for is still in the pinned fairseq (else the fix is dead code)."""
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["/nonexistent", "--arch", "transformer", "--bf16"])
    assert args.tpu is True


@pytest.mark.parametrize("xla,cuda,argv,tpu_after", [
    (False, True, ["data", "--bf16"], False),       # a GPU host: bf16 on CUDA
    (False, False, ["data", "--bf16"], False),      # CPU: bf16 on CPU
    (True, True, ["data", "--bf16"], False),        # torch_xla installed beside CUDA: still the GPU
    (True, False, ["data", "--bf16"], True),        # a TPU host: fairseq's meaning kept
    (False, True, ["data", "--bf16", "--tpu"], True),  # asked for explicitly: never touched
])
def test_implied_tpu_is_undone_only_without_a_tpu(xla, cuda, argv, tpu_after):
    c = cfg()
    changed = resolve_bf16_tpu(c, argv=argv, xla_available=xla, cuda_available=cuda)
    assert c.common.tpu is tpu_after
    assert changed is (not tpu_after)


def test_fp32_and_plain_tpu_configs_are_left_alone():
    for c in (cfg(bf16=False, tpu=True), cfg(bf16=False, tpu=False), cfg(bf16=True, tpu=False)):
        before = vars(c.common).copy()
        assert resolve_bf16_tpu(c, argv=[], xla_available=False, cuda_available=True) is False
        assert vars(c.common) == before


def test_explicit_tpu_flag_parsing():
    assert tpu_requested_explicitly(["x", "--tpu"])
    assert not tpu_requested_explicitly(["x", "--bf16", "--tpu-foo"])


def test_call_main_is_patched_once():
    from fairseq.distributed import utils as distributed_utils

    assert getattr(distributed_utils.call_main, "_nesyseq_fixed", False)
    fairseq_fixes._install_bf16_fix()  # idempotent: no double wrapping
    assert distributed_utils.call_main.__closure__ is not None
    inner = [c.cell_contents for c in distributed_utils.call_main.__closure__
             if callable(c.cell_contents) and getattr(c.cell_contents, "__name__", "") == "call_main"]
    assert inner and not getattr(inner[0], "_nesyseq_fixed", False)


@pytest.fixture(scope="module")
def tiny_translation(tmp_path_factory):
    d = tmp_path_factory.mktemp("bf16data")
    import random

    rng = random.Random(0)
    for split, n in (("train", 200), ("valid", 30)):
        with open(d / f"{split}.src", "w") as f, open(d / f"{split}.tgt", "w") as g:
            for _ in range(n):
                a, b = rng.randint(0, 99), rng.randint(0, 99)
                f.write(" ".join(f"{a}+{b}") + "\n")
                g.write(" ".join(str(a + b)) + "\n")
    subprocess.run([sys.executable, "-m", "fairseq_cli.preprocess", "-s", "src", "-t", "tgt",
                    "--trainpref", str(d / "train"), "--validpref", str(d / "valid"),
                    "--destdir", str(d / "bin"), "--joined-dictionary", "--workers", "1"],
                   check=True, capture_output=True)
    return d / "bin"


def test_memory_efficient_bf16_takes_the_same_path():
    """--memory-efficient-bf16 sets bf16 (and so tpu) in fairseq's options.py exactly as --bf16
    does; the fix undoes the implied tpu for it too.  (Its training run is in
    tests/test_precision_cuda.py on CUDA; on CPU the e2e test below trains --bf16 only, to keep
    the suite under 10 minutes.)"""
    from fairseq import options

    argv = ["/nonexistent", "--arch", "transformer", "--memory-efficient-bf16"]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    assert args.bf16 is True and args.memory_efficient_bf16 is True and args.tpu is True
    c = cfg()
    assert resolve_bf16_tpu(c, argv=argv[1:], xla_available=False, cuda_available=False) is True
    assert c.common.tpu is False


@pytest.mark.slow
def test_fairseq_train_bf16_on_cpu(tiny_translation, tmp_path):
    """fairseq-train --bf16 runs (here on the CPU; on CUDA in tests/test_precision_cuda.py):
    fairseq's FP16Optimizer (chosen only for --fp16/--bf16) with fp32 master weights, tpu=False in
    the saved config.
    (fairseq saves bf16 weights cast to fp32, utils.move_to_cpu, so the file's dtypes say nothing.)"""
    save = tmp_path / "ck"
    out = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.train", str(tiny_translation), "--user-dir", str(REPO / "user_dir"),
         "--task", "translation", "-s", "src", "-t", "tgt", "--arch", "tp_transformer_tiny",
         "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "2000", "--max-update", "4", "--cpu", "--bf16",
         "--save-dir", str(save), "--no-epoch-checkpoints", "--log-format", "simple", "--seed", "1"],
        capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fairseq's implied --tpu is undone" in out.stderr + out.stdout
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu")  # weights_only=True
    assert state["cfg"]["common"]["tpu"] is False and state["cfg"]["common"]["bf16"] is True
    opt = state["last_optimizer_state"]
    name = state["optimizer_history"][-1]["optimizer_name"]
    assert name == "FP16Optimizer"
    # fp32 master weights: the Adam moments are kept for fp32 parameters
    moments = [s["exp_avg"] for s in opt["state"].values()]
    assert moments and all(m.dtype == torch.float32 for m in moments)
