"""Complete a model config with its dataclass defaults, for arch presets.

fairseq merges a model's dataclass into the config only when the config names the model itself
(fairseq/models/__init__.py ``build_model``); for an arch preset (``stpr_babi``,
``tp_transformer_math``...) it only calls the preset function.  So a checkpoint saved before an
option existed, or an argparse-era Namespace, would build with that option missing.  Presets call
``fill_missing_fields`` after setting their own values.
"""
import dataclasses


def fill_missing_fields(cfg, dc_cls) -> None:
    """Give ``cfg`` (Namespace or DictConfig in ``open_dict``) every field of the dataclass
    ``dc_cls`` that it lacks, at its default; fairseq's private fields (``_name``) and fields
    without a default are left alone."""
    for f in dataclasses.fields(dc_cls):
        if f.name.startswith("_") or hasattr(cfg, f.name):
            continue
        if f.default_factory is not dataclasses.MISSING:
            setattr(cfg, f.name, f.default_factory())
        elif f.default is not dataclasses.MISSING:
            setattr(cfg, f.name, f.default)
