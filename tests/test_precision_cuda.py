"""Every precision fairseq offers, on CUDA, for every model family: 200 updates of
``fairseq-train`` with --bf16, --memory-efficient-bf16, --fp16 and --amp track the fp32 loss
curve.  CUDA only (``make test-gpu`` runs it; tools/gpu_lane.py runs it as its own step, precision, last); the
option handling is tests/test_bf16_option.py's, on CPU.

Tolerance: at every logged update (every 20) the loss is within 10% of fp32's, relative to
fp32's loss + 0.05.  Reduced precision changes the trajectory, not the curve: a model that does
not learn in bf16 (fp32 master weights missing, the loss scaler stuck, a NaN) leaves it by far
more, and a missing or NaN point counts as an infinite gap.  The data and the per-family
commands are the GPU lane's smoke runs (tools/gpu_lane.py, SMOKE), so both see the same models.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only (make test-gpu)")

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_lane", REPO / "tools" / "gpu_lane.py")
lane = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lane)

UPDATES, LOG_EVERY, RTOL, ATOL = 200, 20, 0.10, 0.05
PRECISIONS = {"bf16": ["--bf16"], "memory_efficient_bf16": ["--memory-efficient-bf16"],
              "fp16": ["--fp16"], "amp": ["--amp"]}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("precision")
    lane.write_corpora(work)
    env = lane.lane_env(None)
    for step in lane.plan(sys.executable, work, ["smoke"]):
        if step.kind == "prepare":
            subprocess.run(step.cmd, check=True, cwd=str(work), env=env, capture_output=True, timeout=step.timeout)
    return work


def train(work, family, name, flags):
    kind, args = lane.SMOKE[family]
    data = work / "data" / kind / ("bin/task1" if kind == "qa" else "bin")
    cmd = lane._train(sys.executable, data, work / "ckpt" / family / name, args, updates=UPDATES)
    cmd[cmd.index("--log-interval") + 1] = str(LOG_EVERY)
    p = subprocess.run(cmd + flags, cwd=str(work), env=lane.lane_env(None), capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, (family, name, (p.stdout + p.stderr)[-3000:])
    curve = lane.loss_curve(p.stdout + p.stderr)
    assert curve and curve[-1][0] == UPDATES, (family, name, curve)
    return curve


_fp32 = {}


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("family", list(lane.SMOKE))
def test_precision_tracks_fp32(work, family, precision, record_property):
    if family not in _fp32:
        _fp32[family] = train(work, family, "fp32", [])
        assert _fp32[family][-1][1] < _fp32[family][0][1]  # the reference itself learns
    curve = train(work, family, precision, PRECISIONS[precision])
    gap = lane.curve_deviation(_fp32[family], curve, ATOL)
    record_property("max_relative_gap", f"{gap:.4f}")
    print(f"{family} {precision}: max relative gap to fp32 {gap:.4f}; "
          f"final loss {curve[-1][1]:.3f} vs fp32 {_fp32[family][-1][1]:.3f}")
    assert gap <= RTOL, (family, precision, gap, curve, _fp32[family])
