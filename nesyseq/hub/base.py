"""What every family's object shares: how it is built from a checkpoint, and where it runs.

``GeneratorFamily`` is fairseq's ``GeneratorHubInterface`` (``.generate``, beam search, ``.cuda()``)
for the families that decode; ``ModelFamily`` a plain module around one model for those that score
or read features.  Each family subclasses one and adds its own question (``.solve``,
``.features``, ``.entails``, ...).
"""
from __future__ import annotations

from fairseq.hub_utils import GeneratorHubInterface
from torch import nn


def _build(cfg, state, data):
    from nesyseq.hub.checkpoint import build

    return build(cfg, state, data)


class GeneratorFamily(GeneratorHubInterface):
    family = ""

    def __init__(self, cfg, task, models, path=None):
        super().__init__(cfg, task, models)
        self.path = path

    @classmethod
    def from_checkpoint(cls, path, cfg, state, data):
        task, model = _build(cfg, state, data)
        return cls(cfg, task, [model], path)


class ModelFamily(nn.Module):
    family = ""

    def __init__(self, cfg, task, model, path=None):
        super().__init__()
        self.cfg, self.task, self.model, self.path = cfg, task, model, path

    @classmethod
    def from_checkpoint(cls, path, cfg, state, data):
        task, model = _build(cfg, state, data)
        return cls(cfg, task, model, path)

    @property
    def device(self):
        return next(self.model.parameters()).device
