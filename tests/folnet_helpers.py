"""Helpers for the FOLNet tests: tiny models built without a fairseq task."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

REPO = Path(__file__).resolve().parents[1]
USER_DIR = REPO / "user_dir"


def tiny_dictionary(n: int = 12) -> Dictionary:
    d = Dictionary()
    for i in range(n):
        d.add_symbol(chr(ord("a") + i))
    return d


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(arch: str, dictionary=None, **overrides):
    """Build ``arch`` exactly as fairseq does from a Namespace (arch defaults, then dataclass)."""
    d = dictionary or tiny_dictionary()
    args = argparse.Namespace(**overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    model_cls = ARCH_MODEL_REGISTRY[arch]
    cfg = model_cls.__dataclass.from_namespace(args)
    model = model_cls.build_model(cfg, _Task(d))
    return model.double().eval(), d


def random_tokens(d, B, T, gen=None):
    return torch.randint(d.nspecial, len(d), (B, T), generator=gen)


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny models run ~100x faster single-threaded on a busy 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
