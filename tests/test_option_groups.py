"""Option groups: entity dropout and the symbolic options are nested configs
(``cfg.entity_drop``, ``cfg.symbolic``), with the command-line spellings of the flat fields they
replaced, and checkpoints saved with the flat fields load and give the same outputs.

References: the flags parsed by fairseq's own parser and converted by its own
``convert_namespace_to_omegaconf`` against the config written out by hand as nested dataclasses;
a checkpoint in the flat format (``cfg.model`` or ``args`` with the group fields at the top, as
fairseq-train wrote them before the groups) loaded by fairseq's ``checkpoint_utils`` against the
model that was saved.
"""
import argparse
import copy

import pytest
import torch
from omegaconf import OmegaConf

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq import checkpoint_utils, options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY
from nesyseq.plugins.layers.entity_dropout import EntityDropoutConfig
from nesyseq.plugins.models.config_defaults import SymbolicConfig, option_groups
from nesyseq.plugins.models.folnet_transformer import FolnetTransformerConfig
from nesyseq.plugins.models.qa_tpr import TPRConfig, TPREntityDropoutConfig
from nesyseq.plugins.models.tp_transformer import TPSymbolicConfig, TPTransformerConfig
from tests.qa_helpers import encode, make_dict

STORIES = ["mary moved to the kitchen . john moved to the garden . where is mary ?",
           "sandra moved to the office . mary moved to the kitchen . where is sandra ?"]

STPR_FLAGS = ["--entity-dropout", "0.2", "--entity-dropout-story", "0.3", "--entity-dropout-random-rate", "0.4",
              "--entity-dropout-words", "mary,john", "--entity-dropout-type", "0.5",
              "--entity-dropout-groups", "mary,john;kitchen", "--entity-dropout-init-alpha"]
TP_FLAGS = ["--symbolic-embeddings", "--symbolic-output", "--max-symbols", "9", "--symbolic-score-init", "0.5",
            "--entity-dropout", "0.1", "--entity-dropout-words", "mary,sandra"]


def parse(arch, flags, task="babi_qa", data="/nonexistent"):
    """fairseq-train's own parsing: the argparse Namespace and the config fairseq makes of it."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [data, "--task", task, "--arch", arch, *flags])
    return args, convert_namespace_to_omegaconf(args)


def model_node(cfg):
    return {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "_name"}


def expected(dc_cls, arch, **values):
    """The config written by hand: the arch preset over the dataclass defaults, then ``values``
    (a group given as a dataclass instance)."""
    dc = OmegaConf.structured(dc_cls(**values))
    args = argparse.Namespace()
    from fairseq.models import ARCH_CONFIG_REGISTRY
    ARCH_CONFIG_REGISTRY[arch](args)
    groups = option_groups(dc_cls)
    for k, v in vars(args).items():             # the preset's plain values, unless given
        if k in dc and k not in groups and k not in values:
            dc[k] = v
    out = OmegaConf.to_container(dc)
    out.pop("_name", None)
    for g in groups:
        out[g].pop("_name", None)
    return out


def test_stpr_entity_dropout_flags_parse_into_the_nested_config():
    _, cfg = parse("stpr_babi", STPR_FLAGS + ["--symbolic-positions"])
    node = model_node(cfg)
    node["entity_drop"].pop("_name", None)
    want = expected(TPRConfig, "stpr_babi", symbolic_positions=True, entity_drop=TPREntityDropoutConfig(
        entity_dropout=0.2, entity_dropout_story=0.3, entity_dropout_random_rate=0.4,
        entity_dropout_words="mary,john", entity_dropout_type=0.5, entity_dropout_groups="mary,john;kitchen",
        entity_dropout_init_alpha=True))
    assert node == want
    assert not any(k.startswith("entity_dropout") for k in node), "a flat entity-dropout field is left at the top"


@pytest.mark.parametrize("arch,dc_cls,flags,values", [
    ("tp_transformer_tiny", TPTransformerConfig, TP_FLAGS, dict(
        symbolic=TPSymbolicConfig(symbolic_embeddings=True, symbolic_output=True, max_symbols=9,
                                  symbolic_score_init=0.5),
        entity_drop=EntityDropoutConfig(entity_dropout=0.1, entity_dropout_words="mary,sandra"))),
    ("folnet_transformer_tiny", FolnetTransformerConfig, ["--symbolic-output", "--max-symbols", "5"], dict(
        symbolic=SymbolicConfig(symbolic_output=True, max_symbols=5))),
])
def test_symbolic_flags_parse_into_the_nested_config(arch, dc_cls, flags, values):
    _, cfg = parse(arch, flags)
    node = model_node(cfg)
    for g in option_groups(dc_cls):
        node[g].pop("_name", None)
    assert node == expected(dc_cls, arch, **values)


def test_the_flags_keep_their_spellings_once_each():
    """The group fields are flags under their old names (no prefix, no second spelling)."""
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, ["/nonexistent", "--task", "babi_qa", "--arch", "tp_transformer_tiny"])
    flags = [s for a in parser._actions for s in a.option_strings]
    for name in ["--symbolic-embeddings", "--symbolic-output", "--max-symbols", "--symbolic-score-init",
                 "--entity-dropout", "--entity-dropout-words", "--entity-dropout-story", "--zero-unseen-alpha"]:
        assert flags.count(name) == 1, name
    assert not [f for f in flags if f.startswith(("--symbolic-symbolic", "--entity-drop-", "--symbolic-max"))]


# ----------------------------------------------------------------------------- flat checkpoints

def flatten(node: dict) -> dict:
    """A nested model config in the flat format of checkpoints from before the groups."""
    flat = {}
    for k, v in node.items():
        if isinstance(v, dict):
            flat.update({kk: vv for kk, vv in v.items() if kk != "_name"})
        else:
            flat[k] = v
    return flat


def data_dir(tmp_path, d):
    (tmp_path / "bin").mkdir()
    for lang in ("src", "tgt"):
        d.save(str(tmp_path / "bin" / f"dict.{lang}.txt"))
    return str(tmp_path / "bin")


def trained(arch, flags, data, seed=0):
    """The model fairseq-train would build from these flags, every parameter moved off its init."""
    args, cfg = parse(arch, flags, data=data)
    from fairseq import tasks
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval(), args, cfg


def probs(model, d):
    src = encode(d, STORIES)
    prev = torch.full((src.size(0), 1), d.eos(), dtype=torch.long)
    with torch.no_grad():
        out = model(src, src.ne(d.pad()).sum(1), prev)
        return model.get_normalized_probs(out, log_probs=False)


def save_flat(path, model, args, cfg, form, name=None):
    """``form``: "cfg", the config fairseq-train writes, with ``cfg.model`` flat (``name``: its
    ``_name``, the arch by default); "args", the argparse Namespace of argparse-era checkpoints."""
    state = {"model": model.state_dict(), "optimizer_history": [{"criterion_name": "CrossEntropyCriterion",
                                                                 "optimizer_name": "Adam", "num_updates": 7,
                                                                 "lr_scheduler_state": {"best": 1.5}}],
             "extra_state": {"train_iterator": {"epoch": 2}}, "last_optimizer_state": None}
    if form == "cfg":
        container = OmegaConf.to_container(cfg)
        container["model"] = flatten(container["model"])
        if name is not None:
            container["model"]["_name"] = name
        state.update(cfg=container, args=None)
    else:
        state.update(args=copy.copy(args), cfg=None)
    torch.save(state, path)
    return str(path)


CASES = {
    "stpr": ("stpr_babi", STPR_FLAGS + ["--symbolic-positions"]),
    "tp": ("tp_transformer_tiny", TP_FLAGS + ["--encoder-relative-buckets", "8"]),
    "folnet": ("folnet_transformer_tiny", ["--symbolic-embeddings", "--symbolic-output", "--share-all-embeddings"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("form", ["cfg", "args", "cfg-model-name"])
def test_a_flat_checkpoint_loads_with_its_options_and_gives_the_same_outputs(tmp_path, case, form):
    arch, flags = CASES[case]
    d = make_dict()
    data = data_dir(tmp_path, d)
    model, args, cfg = trained(arch, flags, data)
    name = ARCH_MODEL_NAME_REGISTRY[arch] if form == "cfg-model-name" else None
    path = save_flat(tmp_path / "flat.pt", model, args, cfg, form.split("-")[0], name)
    if form.startswith("cfg"):
        saved = torch.load(path)["cfg"]["model"]
        assert "entity_drop" not in saved and "symbolic" not in saved     # the flat format indeed

    loaded, saved_cfg, _ = checkpoint_utils.load_model_ensemble_and_task([path])
    loaded = loaded[0].eval()
    torch.testing.assert_close(probs(loaded, d), probs(model, d), rtol=0, atol=0)
    # the options arrive in their groups (entity dropout acts in training only: read it back)
    dc_cls = MODEL_DATACLASS_REGISTRY[ARCH_MODEL_NAME_REGISTRY[arch]]
    got, want = (m.cfg if case == "folnet" else m.encoder.cfg for m in (loaded, model))
    for g, g_cls in option_groups(dc_cls).items():
        for f in OmegaConf.structured(g_cls()).keys():
            if f != "_name":
                assert getattr(getattr(got, g), f) == getattr(getattr(want, g), f), (g, f)
    if case == "stpr":      # what was given, not only what both sides defaulted to
        assert got.entity_drop.entity_dropout_groups == "mary,john;kitchen" and got.symbolic_positions
    elif case == "tp":
        assert got.symbolic.max_symbols == 9 and got.entity_drop.entity_dropout_words == "mary,sandra"


def test_a_flat_config_without_the_migration_loses_the_symbolic_options(tmp_path):
    """Control: fairseq alone drops the flat keys of a config naming the model itself (its merge
    keeps the dataclass's keys only), so the symbolic model would not build from it; the
    babi_qa task's upgrade_named_config is what carries them."""
    from fairseq import tasks
    from fairseq.models import build_model
    arch, flags = CASES["tp"]
    d = make_dict()
    data = data_dir(tmp_path, d)
    model, args, cfg = trained(arch, flags, data)
    path = save_flat(tmp_path / "flat.pt", model, args, cfg, "cfg", "tp_transformer")
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    task = tasks.setup_task(state["cfg"].task)
    bare = build_model(state["cfg"].model, task, from_checkpoint=True)       # fairseq's, no task hook
    assert not bare.encoder.symbolic
    with pytest.raises(RuntimeError, match="alpha"):
        bare.load_state_dict(state["model"])
