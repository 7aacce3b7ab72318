"""Convert the authors' FOLNet checkpoints (tencent-ailab/FOLNet ``*.pt`` + ``*.cfg``) to fairseq.

    nesyseq convert folnet --checkpoint PATH.pt --config PATH.cfg --vocab vocab.txt --out DIR

writes ``DIR/model.pt`` (a fairseq checkpoint of ``--arch folnet_*``, task
``masked_lm``) and ``DIR/dict.txt``, and prints the fairseq flags that rebuild
the same model (also saved as ``DIR/fairseq_args.txt``).

The official files: ``*.cfg`` is ``json.dump(FOLNetConfig.__dict__)``
(utils.py:94-95, config_folnet.py), ``*.pt`` a state dict of
``FOLNetForPreTraining`` (``folnet.*`` + ``cls.heads.*``) or of
``FOLNetForSeqClassification`` (``folnet.*`` + ``classifier.*``), loaded here
with ``weights_only=True``.  What goes where (official folnet.py line numbers):

    folnet.encoder.word_embd            -> encoder.core.embed_tokens (rows re-indexed, below); tied MLM decoder
    folnet.encoder.type_embd            -> encoder.core.embed_types            (:187)
    folnet.encoder.rel_pos_embd         -> encoder.core.rpe.embed (2δ+2 ids)   (:192-193)
    layer l, deducers.0 ("object"), operators.1 = unary ops, operators.2 = binary ops, in mixer_ops order:
      join  reader.1 / reader.2 / writer      -> ops.j.premise / ops.j.kernel / writers.j   (:365-370)
      mu    reader.2 / writer                 -> ops.m.reader / writers.m                  (:397-406)
      cjoin kernel / premise / output         -> ops.c.kernel / ops.c.premise / writers.c  (:323-325)
      assoc reader.1 rows [:D1] / [D1:]       -> ops.a.kernel / ops.a.premise, writer -> writers.a (:431-434)
      prod  reader.1 / reader.2 / writer      -> ops.p.kernel / ops.p.premise / writers.p  (:462-467)
      trans reader.2 rows [:D2] / [D2:]       -> ops.t.kernel / ops.t.premise, writer -> writers.t (:488-493)
    layer l, deducers.1 ("predic"): operators.1.0 clause_in/out -> ffn1.fc1/fc2;
      operators.2.0 clause_in/out/skip -> ffn2.fc1/fc2/skip                           (:540-551)
    folnet.dense                        -> encoder.pooler (+ tanh)             (:706-707)
    cls.heads.predictions.transform.dense / .bias -> encoder.lm_head.dense / .bias   (:119-149)
    cls.heads.seq_relationship          -> classification head "sentence_order_head" (2 classes, on the
                                           pooler; the name --task mlm_sop gives its head)
    classifier                          -> classification head "sentence_classification_head"

Vocabulary: BERT's ``vocab.txt`` id i is row i of the official embedding,
which has ``vocab_size`` rows (the official code pads len(vocab) up to
(len//8 + 1)·8, config_folnet.py:14).  fairseq's dictionary keeps
``<s> <pad> </s> <unk>`` at 0..3 and the tasks add ``<mask>`` last, so
[CLS] [PAD] [SEP] [UNK] become rows 0..3, the other vocabulary entries (and
``madeupwordNNNN`` for the padding rows) follow in BERT order in ``dict.txt``,
and [MASK] is the last row: the converted model has exactly the official rows,
re-indexed.  Segments: ``--folnet-segments bert`` (a new token type after each
``</s>``, the official ``[CLS] A [SEP] B [SEP]`` layout).

Every problem (a missing or unreadable file, a missing key, a wrong vocabulary
size, a config this model cannot express) is a ``ConversionError`` whose
one-line message names the file and the key.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import torch

from nesyseq.common.atomic import atomic_write

SPECIALS = {"bos": "[CLS]", "pad": "[PAD]", "eos": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"}
UNARY_LETTERS = {"join": "j", "mu": "m", "cjoin": "c"}
BINARY_LETTERS = {"assoc": "a", "prod": "p", "trans": "t"}
SOP_HEAD = "sentence_order_head"  # the name --task mlm_sop gives its sentence-order head
REQUIRED_CFG = ("vocab_size", "type_vocab_size", "max_position_offset", "num_layers", "mixer_ops",
                "predicate_dims", "intermediate_dims", "num_heads", "head_size", "hidden_dropout_prob")


class ConversionError(ValueError):
    """A one-line message naming the file and key at fault."""


# ----------------------------------------------------------------------------- config

def read_official_config(path: Path) -> dict:
    try:
        cfg = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConversionError(f"{path}: cannot read the config ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ConversionError(f"{path}: not a JSON FOLNet .cfg (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(cfg, dict):
        raise ConversionError(f"{path}: not a JSON FOLNet .cfg (top level is not an object)")
    for key in REQUIRED_CFG:
        if key not in cfg:
            raise ConversionError(f"{path}: missing key '{key}'")
    return cfg


def model_flags(cfg: dict, path: Path) -> Dict[str, object]:
    """The official config -> our ``--folnet-*`` values; refuses what ``folnet`` cannot express."""

    def refuse(key, why):
        raise ConversionError(f"{path}: key '{key}' = {json.dumps(cfg.get(key))}: {why}")

    expected = {"absolute_position": False, "relative_position": True, "diag_link": False,
                "boolean_type": "mlp", "hidden_act": "gelu", "type_vocab_size": 2}
    for key, want in expected.items():
        if key in cfg and cfg[key] != want:
            refuse(key, f"only {json.dumps(want)} can be expressed by --arch folnet")
    if "layer_norm_eps" in cfg and abs(float(cfg["layer_norm_eps"]) - 1e-12) > 1e-18:
        refuse("layer_norm_eps", "only 1e-12 can be expressed by --arch folnet")
    ops = {str(k): v for k, v in cfg["mixer_ops"].items()} if isinstance(cfg["mixer_ops"], dict) else None
    if ops is None or not {"1", "2"} <= set(ops):
        refuse("mixer_ops", "needs the unary (1) and binary (2) operator lists")
    if ops.get("0"):
        refuse("mixer_ops", "nullary (global) operators (mixer_ops 0) cannot be expressed by --arch folnet")
    letters = []
    for arity, table in (("1", UNARY_LETTERS), ("2", BINARY_LETTERS)):
        names = list(ops[arity] or [])
        for name in names:
            if name not in table:
                refuse("mixer_ops", f"operator '{name}' in mixer_ops {arity} cannot be expressed by --arch folnet "
                                    f"(supported: {', '.join(table)})")
        if len(set(names)) != len(names):
            refuse("mixer_ops", f"an operator repeats in mixer_ops {arity}")
        letters.append("".join(table[n] for n in names))
    dims, hids = cfg["predicate_dims"], cfg["intermediate_dims"]
    if not (isinstance(dims, list) and len(dims) == 3 and isinstance(hids, list) and len(hids) == 3):
        refuse("predicate_dims", "needs three sizes (nullary, unary, binary), as does intermediate_dims")
    heads, head_size = int(cfg["num_heads"]), int(cfg["head_size"])
    if heads * head_size != int(dims[1]):
        refuse("predicate_dims", f"the unary size must be num_heads * head_size = {heads * head_size}")
    if "hidden_size" in cfg and int(cfg["hidden_size"]) != int(dims[1]):
        refuse("hidden_size", f"must equal the unary size predicate_dims[1] = {dims[1]}")
    return {
        "folnet_layers": int(cfg["num_layers"]), "folnet_unary_dim": int(dims[1]),
        "folnet_binary_dim": int(dims[2]), "folnet_heads": heads, "folnet_ffn_unary": int(hids[1]),
        "folnet_ffn_binary": int(hids[2]), "folnet_rpe_clip": int(cfg["max_position_offset"]),
        "folnet_ops": f"{letters[0]}.{letters[1]}", "dropout": float(cfg["hidden_dropout_prob"]),
        "folnet_segments": "bert",
    }


def arch_and_args(flags: Dict[str, object]) -> List[str]:
    """``--arch`` and the flags that differ from it, as fairseq command-line words."""
    import nesyseq.plugins.models  # noqa: F401  (registers the FOLNet presets)
    from nesyseq.plugins.models.config_defaults import arch_config

    arch = "folnet_base"
    for name in ("folnet_base", "folnet_large"):
        preset = arch_config(name)
        if all(getattr(preset, k) == v for k, v in flags.items() if k not in ("folnet_segments", "dropout")):
            arch = name
            break
    words = ["--arch", arch]
    for k, v in flags.items():
        words += ["--" + k.replace("_", "-"), str(v)]
    return words


# ----------------------------------------------------------------------------- vocabulary

def read_vocab(path: Path, vocab_size: int, cfg_path: Path) -> List[str]:
    try:
        tokens = [line.rstrip("\n").rstrip("\r") for line in Path(path).read_text(encoding="utf-8").split("\n")]
    except OSError as exc:
        raise ConversionError(f"{path}: cannot read the vocabulary ({exc.strerror})") from None
    if tokens and tokens[-1] == "":
        tokens.pop()
    n = len(tokens)
    for i, t in enumerate(tokens):
        if not t or any(c.isspace() for c in t):
            raise ConversionError(f"{path}:{i + 1}: empty or blank-containing token {t!r}")
    if len(set(tokens)) != n:
        dup = next(t for i, t in enumerate(tokens) if t in tokens[:i])
        raise ConversionError(f"{path}: token {dup!r} occurs twice")
    if n != vocab_size and (n // 8 + 1) * 8 != vocab_size:
        raise ConversionError(
            f"{path}: {n} tokens do not fit key 'vocab_size' = {vocab_size} of {cfg_path} "
            f"(the official code pads a vocabulary of N tokens to (N//8 + 1)*8 = {(n // 8 + 1) * 8} rows)")
    for tok in SPECIALS.values():
        if tok not in tokens:
            raise ConversionError(f"{path}: no {tok} token (BERT's special tokens are needed)")
    return tokens


def fairseq_order(tokens: List[str], vocab_size: int):
    """dict.txt lines and, for every fairseq index, the official row it takes."""
    ix = {t: i for i, t in enumerate(tokens)}
    head = [ix[SPECIALS[k]] for k in ("bos", "pad", "eos", "unk")]
    special_rows = set(head) | {ix[SPECIALS["mask"]]}
    body = [i for i in range(len(tokens)) if i not in special_rows]
    pads = list(range(len(tokens), vocab_size))
    lines = [tokens[i] for i in body] + [f"madeupword{k:04d}" for k in range(len(pads))]
    rows = head + body + pads + [ix[SPECIALS["mask"]]]
    return lines, rows


# ----------------------------------------------------------------------------- weights

def load_official_state(path: Path) -> Dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConversionError(f"{path}: no such checkpoint") from None
    except Exception as exc:  # unpickling refused or not a torch file
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(f"{path}: not loadable with weights_only=True ({msg})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConversionError(f"{path}: not a state dict (a mapping of names to tensors)")
    if state and all(k.startswith("module.") for k in state):  # saved from DistributedDataParallel
        state = {k[len("module."):]: v for k, v in state.items()}
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


class _Reader:
    """Reads official keys, remembering which were used; a missing key or a wrong shape is one line."""

    def __init__(self, state, path, cfg_path):
        self.state, self.path, self.cfg_path, self.used = state, path, cfg_path, set()

    def __call__(self, key: str, shape=None) -> torch.Tensor:
        if key not in self.state:
            raise ConversionError(f"{self.path}: missing key '{key}'")
        t = self.state[key]
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ConversionError(f"{self.path}: key '{key}' has shape {tuple(t.shape)}, "
                                  f"{self.cfg_path} implies {tuple(shape)}")
        self.used.add(key)
        return t

    def has(self, key: str) -> bool:
        return key in self.state


def map_weights(read: _Reader, cfg: dict, flags: dict, rows: List[int]) -> Dict[str, torch.Tensor]:
    """Our ``FolnetModel`` state dict (without classification heads) from the official one."""
    D1, D2, H = flags["folnet_unary_dim"], flags["folnet_binary_dim"], flags["folnet_heads"]
    S, F1, F2, V = D1 // H, flags["folnet_ffn_unary"], flags["folnet_ffn_binary"], int(cfg["vocab_size"])
    ops = {str(k): list(v or []) for k, v in cfg["mixer_ops"].items()}
    out: Dict[str, torch.Tensor] = {}
    idx = torch.tensor(rows)

    def lin(dst, src, o, i, bias=True):
        out[dst + ".weight"] = read(src + ".weight", (o, i))
        if bias:
            out[dst + ".bias"] = read(src + ".bias", (o,))

    word = read("folnet.encoder.word_embd.weight", (V, D1))
    out["encoder.core.embed_tokens.weight"] = word[idx]
    out["encoder.lm_head.weight"] = out["encoder.core.embed_tokens.weight"]
    out["encoder.core.embed_types.weight"] = read("folnet.encoder.type_embd.weight", (2, D1))
    out["encoder.core.rpe.embed.weight"] = read("folnet.encoder.rel_pos_embd.weight",
                                                (2 * flags["folnet_rpe_clip"] + 2, D2))
    for layer in range(flags["folnet_layers"]):
        o = f"folnet.reasoner.layers.{layer}.deducers"
        p = f"encoder.core.stack.layers.{layer}"
        for i, name in enumerate(ops["1"]):
            src = f"{o}.0.operators.1.{i}"
            if name == "join":
                lin(f"{p}.ops.j.premise", f"{src}.reader.1", D1, D1)
                lin(f"{p}.ops.j.kernel", f"{src}.reader.2", H, D2, bias=False)
                lin(f"{p}.writers.j", f"{src}.writer", D1, D1)
            elif name == "mu":
                lin(f"{p}.ops.m.reader", f"{src}.reader.2", H + S, D2, bias=False)
                lin(f"{p}.writers.m", f"{src}.writer", D1, D1)
            elif name == "cjoin":
                lin(f"{p}.ops.c.kernel", f"{src}.kernel", D1, D1, bias=False)
                lin(f"{p}.ops.c.premise", f"{src}.premise", S, D2)
                lin(f"{p}.writers.c", f"{src}.output", D1, D1)
        for i, name in enumerate(ops["2"]):
            src = f"{o}.0.operators.2.{i}"
            if name == "assoc":  # one reader D1 -> 2·D1: query (our kernel) rows first, key (premise) after
                w, b = read(f"{src}.reader.1.weight", (2 * D1, D1)), read(f"{src}.reader.1.bias", (2 * D1,))
                out[f"{p}.ops.a.kernel.weight"], out[f"{p}.ops.a.premise.weight"] = w[:D1], w[D1:]
                out[f"{p}.ops.a.kernel.bias"], out[f"{p}.ops.a.premise.bias"] = b[:D1], b[D1:]
                lin(f"{p}.writers.a", f"{src}.writer", D2, H)
            elif name == "prod":
                lin(f"{p}.ops.p.kernel", f"{src}.reader.1", D1, D1)
                lin(f"{p}.ops.p.premise", f"{src}.reader.2", S, D2)
                lin(f"{p}.writers.p", f"{src}.writer", D2, H)
            elif name == "trans":  # one reader D2 -> 2·D2 without bias: kernel rows first
                w = read(f"{src}.reader.2.weight", (2 * D2, D2))
                out[f"{p}.ops.t.kernel.weight"], out[f"{p}.ops.t.premise.weight"] = w[:D2], w[D2:]
                lin(f"{p}.writers.t", f"{src}.writer", D2, D2)
        lin(f"{p}.ffn1.fc1", f"{o}.1.operators.1.0.clause_in", F1, D1)
        lin(f"{p}.ffn1.fc2", f"{o}.1.operators.1.0.clause_out", D1, F1)
        lin(f"{p}.ffn2.fc1", f"{o}.1.operators.2.0.clause_in", F2, 2 * D2)
        lin(f"{p}.ffn2.fc2", f"{o}.1.operators.2.0.clause_out", D2, F2)
        lin(f"{p}.ffn2.skip", f"{o}.1.operators.2.0.clause_skip", D2, D2)
    lin("encoder.pooler", "folnet.dense", D1, D1)
    if read.has("cls.heads.predictions.bias"):
        lin("encoder.lm_head.dense", "cls.heads.predictions.transform.dense", D1, D1)
        out["encoder.lm_head.bias"] = read("cls.heads.predictions.bias", (V,))[idx]
        if read.has("cls.heads.predictions.decoder.weight"):  # tied to the word embedding (folnet.py:802-805)
            if not torch.equal(read("cls.heads.predictions.decoder.weight", (V, D1)), word):
                raise ConversionError(f"{read.path}: key 'cls.heads.predictions.decoder.weight' is not tied to "
                                      f"'folnet.encoder.word_embd.weight'")
    return out


def _heads(read: _Reader, D1: int) -> Dict[str, int]:
    heads = {}
    if read.has("cls.heads.seq_relationship.weight"):
        heads[SOP_HEAD] = read("cls.heads.seq_relationship.weight").shape[0]
    if read.has("classifier.weight"):
        heads["sentence_classification_head"] = read("classifier.weight").shape[0]
    return heads


# ----------------------------------------------------------------------------- fairseq side

def build_fairseq_model(out_dir: Path, words: List[str]):
    """fairseq's own parser, task and model builder, as ``fairseq-train`` would run them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from nesyseq.common.fairseq_cli import USER_DIR

    parser = options.get_training_parser()
    argv = [str(out_dir), "--user-dir", str(USER_DIR), "--task", "masked_lm", "--criterion", "masked_lm",
            "--cpu"] + words
    args = options.parse_args_and_arch(parser, input_args=argv)
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    return cfg, task, task.build_model(cfg.model)


def convert(checkpoint: Path, config: Path, vocab: Path, out: Path) -> Path:
    checkpoint, config, vocab, out = Path(checkpoint), Path(config), Path(vocab), Path(out)
    cfg = read_official_config(config)
    flags = model_flags(cfg, config)
    V = int(cfg["vocab_size"])
    tokens = read_vocab(vocab, V, config)
    state = load_official_state(checkpoint)
    read = _Reader(state, checkpoint, config)
    lines, rows = fairseq_order(tokens, V)
    weights = map_weights(read, cfg, flags, rows)
    heads = _heads(read, flags["folnet_unary_dim"])
    if SOP_HEAD in heads:
        n = heads[SOP_HEAD]
        weights[f"classification_heads.{SOP_HEAD}.out_proj.weight"] = read(
            "cls.heads.seq_relationship.weight", (n, flags["folnet_unary_dim"]))
        weights[f"classification_heads.{SOP_HEAD}.out_proj.bias"] = read("cls.heads.seq_relationship.bias", (n,))
    if "sentence_classification_head" in heads:
        n = heads["sentence_classification_head"]
        weights["classification_heads.sentence_classification_head.out_proj.weight"] = read(
            "classifier.weight", (n, flags["folnet_unary_dim"]))
        weights["classification_heads.sentence_classification_head.out_proj.bias"] = read("classifier.bias", (n,))
    unused = sorted(k for k in state if k not in read.used and k != "cls.heads.predictions.decoder.weight")
    if unused:
        raise ConversionError(f"{checkpoint}: key '{unused[0]}' has no place in --arch folnet"
                              + (f" (and {len(unused) - 1} more)" if len(unused) > 1 else ""))

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "dict.txt", lambda p: Path(p).write_text("".join(f"{t} 1\n" for t in lines), encoding="utf-8"))
    words = arch_and_args(flags)
    cfg_fs, task, model = build_fairseq_model(out, words)
    for name, n in heads.items():
        model.register_classification_head(name, num_classes=n)
    own = model.state_dict()
    if len(own) != len(weights) or set(own) != set(weights):  # our side: every parameter must be written
        missing = sorted(set(own) - set(weights)) or sorted(set(weights) - set(own))
        raise ConversionError(f"{checkpoint}: the converted state has no '{missing[0]}' for the fairseq model")
    for k, v in own.items():
        if tuple(v.shape) != tuple(weights[k].shape):
            raise ConversionError(f"{checkpoint}: converted '{k}' has shape {tuple(weights[k].shape)}, "
                                  f"the fairseq model wants {tuple(v.shape)}")
    model.load_state_dict(weights, strict=True)
    from omegaconf import OmegaConf
    saved_cfg = OmegaConf.to_container(cfg_fs, resolve=True, enum_to_str=True)
    # not this machine's path: whoever loads the file names the plugins (--user-dir) themselves
    saved_cfg["common"]["user_dir"] = None
    saved_cfg["task"]["data"] = "."
    state_out = {
        "args": None,
        "cfg": saved_cfg,
        "model": model.state_dict(),
        "criterion": None,
        # what fairseq's loaders expect of a checkpoint (checkpoint_utils._upgrade_state_dict,
        # Trainer.load_checkpoint); no optimizer state, so fine-tuning needs --reset-optimizer
        "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "none",
                               "lr_scheduler_state": {}, "num_updates": 0}],
        "task_state": {},
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0}, "previous_training_time": 0,
                        "converted_from": str(checkpoint), "classification_heads": heads},
    }
    atomic_write(out / "model.pt", lambda p: torch.save(state_out, p))
    atomic_write(out / "fairseq_args.txt", lambda p: Path(p).write_text(" ".join(words) + "\n"))
    return out / "model.pt"


# ----------------------------------------------------------------------------- CLI

def add_arguments(parser) -> None:
    parser.add_argument("--checkpoint", required=True, type=Path, help="the official *.pt (a state dict)")
    parser.add_argument("--config", required=True, type=Path, help="the official *.cfg (JSON) beside it")
    parser.add_argument("--vocab", required=True, type=Path, help="BERT WordPiece vocab.txt the model was trained with")
    parser.add_argument("--out", required=True, type=Path, help="output folder: model.pt, dict.txt, fairseq_args.txt")


def run(args) -> int:
    from nesyseq.common.errors import UserError
    try:
        path = convert(args.checkpoint, args.config, args.vocab, args.out)
    except ConversionError as exc:
        raise UserError(str(exc)) from None
    words = (args.out / "fairseq_args.txt").read_text().strip()
    print(f"wrote {path} and {args.out / 'dict.txt'}")
    print(f"model flags for fairseq-train / fine-tuning: {words}")
    return 0
