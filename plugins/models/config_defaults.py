"""Model options that several models share, the one way an arch preset is written, and how a
model's ``build_model`` reads its config, including one saved by an older nesyseq.

Option groups.  A set of options that several models share (entity dropout, the symbolic
stream) is one nested ``FairseqDataclass`` inside each model's config, as fairseq nests
``QuantNoiseConfig`` inside ``TransformerConfig``.  The fields of a group keep their full
option names (``cfg.entity_drop.entity_dropout_words``), because fairseq's own machinery
turns a nested dataclass into flags and back by the field names alone: for a registered
model's config, ``gen_parser_from_dataclass`` adds a nested field under its own name
(``--entity-dropout-words``, no prefix), and ``convert_namespace_to_omegaconf`` reads it back
from that flat name into ``model.entity_drop.entity_dropout_words``.  So the command line
keeps one spelling per option, and Hydra / a saved config hold the group as a nested node.  The
groups: ``SymbolicConfig`` here (``cfg.symbolic`` of tp_transformer and folnet_transformer) and
``EntityDropoutConfig`` beside its module (plugins/layers/entity_dropout.py; ``cfg.entity_drop``
of tpr_rnn / stpr and tp_transformer).

Presets.  An arch preset (``--arch tp_transformer_tiny``) is ``preset(args, name=value, ...)``
with the values that differ from the model's dataclass defaults: each applies unless the command
line gave that option.  The dataclass defaults are written once, in the dataclass.

Reading the config.  Every model's ``build_model`` starts with ``cfg = model_config(cfg, Config)``.
fairseq hands it one of three things: a complete DictConfig (fairseq-train, Hydra, a checkpoint
written by this version), an argparse Namespace (``fairseq.models.build_model`` on a Namespace:
the preset has run on the flags given, the other fields are absent), or the config of a checkpoint
written before some of today's fields existed.  The Namespace becomes a dataclass instance; an
old checkpoint's config is upgraded in place (:func:`upgrade_saved_config`); a complete one is
used as it is.  fairseq merges a saved config that names the model itself (``_name:
tp_transformer``) with the dataclass before any of our code runs, and that merge drops the keys
the dataclass lacks, so ``--task babi_qa`` upgrades such a config first when it loads a
checkpoint (:func:`upgrade_named_config`).
"""
import dataclasses
from argparse import Namespace
from typing import Any, Dict, Optional

from fairseq.dataclass import FairseqDataclass
from fairseq.utils import safe_getattr
from omegaconf import DictConfig, OmegaConf, open_dict


def option_groups(dc_cls) -> Dict[str, Any]:
    """{field name: its FairseqDataclass type} for the nested option groups of ``dc_cls``."""
    return {f.name: f.type for f in dataclasses.fields(dc_cls)
            if isinstance(f.type, type) and issubclass(f.type, FairseqDataclass)}


@dataclasses.dataclass
class GroupedConfig(FairseqDataclass):
    """A model config with option groups (nested dataclasses); ``from_namespace`` reads a flat
    argparse Namespace (the command line after its preset) into it."""

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


# ----------------------------------------------------------------------------- presets

def set_default(args, name: str, value) -> None:
    """An arch preset's value for ``name``, unless the config (the command line) has one."""
    if safe_getattr(args, name, None) is None:
        setattr(args, name, value)


def preset(args, **values) -> None:
    """An arch preset: each of ``values`` unless the config (the command line) has it."""
    for name, value in values.items():
        set_default(args, name, value)


def arch_config(arch: str):
    """The config ``--arch arch`` gives with no other option: its preset over the dataclass defaults."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY

    args = Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    return MODEL_DATACLASS_REGISTRY[ARCH_MODEL_NAME_REGISTRY[arch]].from_namespace(args)


# ----------------------------------------------------------------------------- reading a config

def model_config(cfg, dc_cls):
    """``cfg`` as a model's ``build_model`` reads it (module doc): a Namespace becomes a ``dc_cls``
    instance, the config of an older checkpoint is upgraded in place, a complete one is kept."""
    if isinstance(cfg, Namespace):
        return dc_cls.from_namespace(cfg)
    if isinstance(cfg, DictConfig) and outdated(cfg, dc_cls):
        with open_dict(cfg):
            upgrade_saved_config(cfg, dc_cls)
    return cfg


def _plain_fields(dc_cls):
    groups = option_groups(dc_cls)
    return [f for f in dataclasses.fields(dc_cls) if not f.name.startswith("_") and f.name not in groups]


def outdated(cfg: DictConfig, dc_cls) -> bool:
    """Whether ``cfg`` lacks a field of ``dc_cls`` or of one of its groups, or holds a group's
    field at the top (a checkpoint saved before the field, or the group, existed)."""
    if any(f.name not in cfg for f in _plain_fields(dc_cls)):
        return True
    for name, group_cls in option_groups(dc_cls).items():
        fields = _plain_fields(group_cls)
        if cfg.get(name) is None or any(f.name not in cfg[name] or f.name in cfg for f in fields):
            return True
    return False


# ----------------------------------------------------------------------------- older checkpoints

def _default(f):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _fill(node: DictConfig, dc_cls) -> None:
    """Give ``node`` every plain field of ``dc_cls`` that it lacks, at its default."""
    for f in _plain_fields(dc_cls):
        if f.name not in node:
            value = _default(f)
            if value is not dataclasses.MISSING:
                node[f.name] = value


def upgrade_saved_config(cfg: DictConfig, dc_cls) -> None:
    """Bring the model config of a checkpoint written by an older nesyseq (in ``open_dict``) up to
    ``dc_cls``, in place: the fields of an option group found flat at the top (saved before the
    group existed) move into it, and every field added since takes its default.  fairseq's private
    fields (``_name``) are left alone."""
    _fill(cfg, dc_cls)
    for name, group_cls in option_groups(dc_cls).items():
        if cfg.get(name) is None:
            cfg[name] = {}
        for f in _plain_fields(group_cls):
            if f.name in cfg:
                cfg[name][f.name] = cfg[f.name]
                del cfg[f.name]
        _fill(cfg[name], group_cls)


def upgrade_named_config(cfg) -> None:
    """:func:`upgrade_saved_config` for a saved model config (a DictConfig) that names its model
    (``_name: tp_transformer``), before fairseq's ``build_model`` merges it with the model's
    dataclass and drops the keys the dataclass lacks.  Configs of other models are left alone."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY

    if not isinstance(cfg, DictConfig) or "_name" not in cfg:
        return
    dc_cls = MODEL_DATACLASS_REGISTRY.get(ARCH_MODEL_NAME_REGISTRY.get(cfg._name))
    if dc_cls is None or not option_groups(dc_cls):
        return
    with open_dict(cfg):
        upgrade_saved_config(cfg, dc_cls)
