"""The two command-line device choices outside plugins/ (``make coverage`` found them never run):
``nesyseq evaluate math`` decodes with ``--cpu`` unless told otherwise only when torch sees no CUDA
device, and ``nesyseq quickstart`` trains with ``--cpu`` only then.  Both arms on a CPU machine,
torch's answer set by hand."""
import argparse

import pytest
import torch

from nesyseq.cli import quickstart
from nesyseq.evaluations.math_eval import decode_on_cpu


@pytest.mark.parametrize("cuda", [False, True])
def test_evaluate_math_decodes_on_cpu_only_without_cuda_unless_told(monkeypatch, cuda):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert decode_on_cpu(None) is (not cuda)
    assert decode_on_cpu(True) is True and decode_on_cpu(False) is False   # an explicit choice stands


@pytest.mark.parametrize("cuda", [False, True])
def test_quickstart_trains_with_cpu_flag_only_without_cuda(monkeypatch, tmp_path, cuda):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert quickstart._has_cuda() is cuda
    args = argparse.Namespace(arch="tp_transformer_tiny", lr=1e-3, max_tokens=100, max_update=1, seed=1)
    argv = quickstart.train_command(tmp_path / "bin", tmp_path / "ck", args)
    assert ("--cpu" in argv) is (not cuda)
