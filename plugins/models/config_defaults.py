"""Model options that several models share: option groups (nested configs), the symbolic
group, and how a config is completed for arch presets.

Option groups.  A set of options that several models share (entity dropout, the symbolic
stream) is one nested ``FairseqDataclass`` inside each model's config, as fairseq nests
``QuantNoiseConfig`` inside ``TransformerConfig``.  The fields of a group keep their full
option names (``cfg.entity_drop.entity_dropout_words``), because fairseq's own machinery
turns a nested dataclass into flags and back by the field names alone: for a registered
model's config, ``gen_parser_from_dataclass`` adds a nested field under its own name
(``--entity-dropout-words``, no prefix), and ``convert_namespace_to_omegaconf`` reads it back
from that flat name into ``model.entity_drop.entity_dropout_words``.  So the command line
stays what it was, and Hydra / a saved config hold the group as a nested node.  The groups:
``SymbolicConfig`` here (``cfg.symbolic`` of tp_transformer and folnet_transformer) and
``EntityDropoutConfig`` beside its module (plugins/layers/entity_dropout.py; ``cfg.entity_drop``
of tpr_rnn / stpr and tp_transformer).

Completing a config.  fairseq merges a model's dataclass into the config only when the config
names the model itself (fairseq/models/__init__.py ``build_model``); for an arch preset
(``stpr_babi``, ``tp_transformer_math``...) it only calls the preset function.  So a checkpoint
saved before an option existed, or before its group did (``entity_dropout_words`` as a
top-level field), or an argparse-era Namespace, would build without it.  Presets call
``fill_missing_fields`` after setting their own values, and ``build_model`` reads an argparse
Namespace through ``GroupedConfig.from_namespace``.  A saved config that names the model itself
(``_name: tp_transformer``) is merged with the dataclass by fairseq before any of our code runs,
and that merge drops the keys the dataclass lacks: ``--task babi_qa`` moves such a config's flat
fields into their groups first (``nest_flat_options``).
"""
import dataclasses
from argparse import Namespace
from typing import Dict, Optional

from fairseq.dataclass import FairseqDataclass
from fairseq.utils import safe_getattr
from omegaconf import DictConfig, OmegaConf, open_dict


def set_default(args, name: str, value) -> None:
    """An arch preset's value for ``name``, unless the config (the command line) has one."""
    if safe_getattr(args, name, None) is None:
        setattr(args, name, value)


def option_groups(dc_cls) -> Dict[str, type]:
    """{field name: its FairseqDataclass type} for the nested option groups of ``dc_cls``."""
    return {f.name: f.type for f in dataclasses.fields(dc_cls)
            if isinstance(f.type, type) and issubclass(f.type, FairseqDataclass)}


def _default(f):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _fill(node, dc_cls) -> None:
    """Give ``node`` every plain field of ``dc_cls`` that it lacks, at its default."""
    for f in dataclasses.fields(dc_cls):
        if f.name.startswith("_") or hasattr(node, f.name) or f.name in option_groups(dc_cls):
            continue
        value = _default(f)
        if value is not dataclasses.MISSING:
            setattr(node, f.name, value)


def fill_missing_fields(cfg, dc_cls) -> None:
    """Complete ``cfg`` with the fields of the dataclass ``dc_cls`` that it lacks, at their defaults;
    fairseq's private fields (``_name``) and fields without a default are left alone.

    A DictConfig (in ``open_dict``) or a dataclass instance gets each option group as a nested
    node: fields of a group found flat at the top (a config saved before the group existed) move
    into it.  An argparse Namespace keeps the groups' fields flat, the form fairseq's
    ``convert_namespace_to_omegaconf`` reads them in; ``GroupedConfig.from_namespace`` nests them."""
    groups = option_groups(dc_cls)
    _fill(cfg, dc_cls)
    for name, group_cls in groups.items():
        if isinstance(cfg, Namespace):
            _fill(cfg, group_cls)
            continue
        sub_names = [f.name for f in dataclasses.fields(group_cls) if not f.name.startswith("_")]
        if isinstance(cfg, DictConfig):
            flat = {k: cfg[k] for k in sub_names if k in cfg}
            if name not in cfg or cfg[name] is None:
                cfg[name] = {}
            node = cfg[name]
            for k, v in flat.items():
                node[k] = v
                del cfg[k]
        else:
            flat = {k: getattr(cfg, k) for k in sub_names if k in vars(cfg)}
            if getattr(cfg, name, None) is None:
                setattr(cfg, name, group_cls())
            node = getattr(cfg, name)
            for k, v in flat.items():
                setattr(node, k, v)
                delattr(cfg, k)
        _fill(node, group_cls)


def nest_flat_options(cfg) -> None:
    """Move the flat fields of a saved model config (a DictConfig) into the option groups of the
    model it names, before fairseq's ``build_model`` merges it with the model's dataclass (a
    checkpoint written before the groups existed).  Configs of other models are left alone."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY

    if not isinstance(cfg, DictConfig) or "_name" not in cfg:
        return
    dc_cls = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY.get(cfg._name))
    if dc_cls is None or not option_groups(dc_cls):
        return
    with open_dict(cfg):
        fill_missing_fields(cfg, dc_cls)


@dataclasses.dataclass
class GroupedConfig(FairseqDataclass):
    """A model config with option groups (nested dataclasses); ``from_namespace`` reads a flat
    argparse Namespace (a preset applied to command-line args, an argparse-era checkpoint) into it."""

    @classmethod
    def from_namespace(cls, args):
        if isinstance(args, cls):
            return args
        if isinstance(args, DictConfig):
            args = Namespace(**OmegaConf.to_container(args, resolve=True))
        groups = option_groups(cls)
        config = cls()
        for f in dataclasses.fields(cls):
            if f.name.startswith("_") or f.name in groups or not hasattr(args, f.name):
                continue
            setattr(config, f.name, getattr(args, f.name))
        for name, group_cls in groups.items():
            given = getattr(args, name, None)
            if isinstance(given, dict):
                given = Namespace(**given)
            setattr(config, name, group_cls.from_namespace(given if given is not None else args))
        return config


def as_grouped(cfg, dc_cls):
    """``cfg`` as the model reads it: an argparse Namespace becomes a ``dc_cls`` instance with its
    groups nested (fairseq hands ``build_model`` a Namespace on its argparse path); a DictConfig or
    dataclass is completed in place (``fill_missing_fields``) and returned."""
    if isinstance(cfg, Namespace):
        return dc_cls.from_namespace(cfg)
    if isinstance(cfg, DictConfig):
        with open_dict(cfg):
            fill_missing_fields(cfg, dc_cls)
    else:
        fill_missing_fields(cfg, dc_cls)
    return cfg


@dataclasses.dataclass
class SymbolicConfig(FairseqDataclass):
    """The symbolic stream of a seq2seq model (symbol-shift equivariance; ``cfg.symbolic`` of
    tp_transformer and folnet_transformer)."""
    symbolic_embeddings: bool = dataclasses.field(default=False, metadata={
        "help": "hybrid embeddings x -> E x ⊕ α_x e_φ(x) (symbol-shift equivariance; φ numbers the source's "
                "distinct words by first appearance) and a symbolic state through every layer"})
    symbolic_output: bool = dataclasses.field(default=False, metadata={
        "help": "output p = β softmax(E^T z) + (1-β) B_φ softmax(s) (fp32); without --symbolic-embeddings "
                "the symbolic input is the plain one-hot e_φ(x) (α ≡ 1)"})
    max_symbols: Optional[int] = dataclasses.field(default=None, metadata={
        "help": "cap on m, the number of context symbols (words first seen later get no symbolic part)"})


def is_symbolic(cfg) -> bool:
    """Whether a model config with a ``symbolic`` group turns the symbolic stream on."""
    return bool(cfg.symbolic.symbolic_embeddings or cfg.symbolic.symbolic_output)
