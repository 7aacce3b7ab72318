"""Every tp_transformer arch builds through both fairseq APIs: the argparse
``Namespace`` (older scripts, argparse-era checkpoints) and the dataclass config."""
import argparse

import pytest
from omegaconf import OmegaConf

import plugins  # noqa: F401  (registers the models)
from fairseq import models
from fairseq.data import Dictionary
from plugins.models.tp_transformer import TPTransformerConfig, TPTransformerModel

ARCHS = sorted(models.ARCH_MODEL_INV_REGISTRY["tp_transformer"])


class _Task:
    def __init__(self):
        d = Dictionary()
        for i in range(20):
            d.add_symbol(f"s{i}")
        self.source_dictionary = self.target_dictionary = d


def _shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("arch", ARCHS)
def test_arch_builds_from_namespace_and_dataclass(arch):
    assert {"tp_transformer_math", "transformer_math", "tp_transformer_tiny"} <= set(ARCHS)
    task = _Task()
    # argparse API: fairseq applies the arch function, then build_model(Namespace)
    from_ns = models.build_model(argparse.Namespace(arch=arch), task)
    # dataclass API: the same preset as a TPTransformerConfig (what Hydra passes)
    args = argparse.Namespace(arch=arch)
    models.ARCH_CONFIG_REGISTRY[arch](args)
    fields = TPTransformerConfig.__dataclass_fields__
    cfg = TPTransformerConfig(**{k: v for k, v in vars(args).items() if k in fields})
    from_dc = TPTransformerModel.build_model(cfg, task)
    assert _shapes(from_ns) == _shapes(from_dc)
    # Hydra's DictConfig path (merge with the dataclass defaults)
    dc = OmegaConf.create({"_name": "tp_transformer", **{k: getattr(cfg, k) for k in fields
                                                          if not k.startswith("_")}})
    assert _shapes(models.build_model(dc, task)) == _shapes(from_dc)
    # the preset's sizes really arrive in the model
    d = from_ns.encoder.embedding.dim
    assert d == cfg.encoder_embed_dim and len(from_ns.encoder.layers) == cfg.encoder_layers
    has_roles = any("role" in k for k in _shapes(from_ns))
    assert has_roles == (not cfg.no_embedding_role or not cfg.no_role_binding)
