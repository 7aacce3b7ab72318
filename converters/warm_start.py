"""A trained checkpoint as the start of a run on another dictionary (a curriculum).

    nesyseq convert warm-start --checkpoint T1/checkpoint_best.pt --from-data BIN1 --to-data BIN2 \\
        --out start.pt [--encoder-layers 3] [--relative-table keep|zero|zero-near] [--seed 0]

then ``fairseq-train BIN2 ... --finetune-from-model start.pt`` with the first run's model options
(and ``--encoder-layers 3`` if grown): fresh optimiser, schedule and counters.  This is the
curriculum of docs/qa.md "Task 2: a task-1 start and a third encoder layer" (ours; the symbolic
paper trains each task from scratch), driven end to end by ``configs/experiments/qa_tp_curriculum.yaml``.

What changes in the state dict (everything else is copied as is):

* **Vocabulary rows.**  Every tensor indexed by word (``*embed_tokens.weight``,
  ``*alpha_logit``, ``*output_projection.weight``; first dimension = |V_from|) is re-indexed from
  the ``--from-data`` dictionary to the ``--to-data`` one, row by word:

      W_to[j] = W_from[i(j)]    for j a word of V_to that V_from has (i(j) its row there;
                                <s> <pad> </s> <unk> included)
      W_to[j] ~ N(0, σ²)        for a new word, σ = std of the trained word rows of W_from
      a_to[j] = 0               for a new word's α logit (SymbolAlpha's init: α = 1/2)

  (fairseq's ``madeupword`` padding entries are words like any other here.)  So the carried
  model computes the same function on every word both dictionaries have: <pad>'s row is copied,
  not zeroed, because the tied output layer gives <pad> a logit that enters the softmax.
  (docs/qa_results/tp_babi_task2/warm_start.py, which made the documented task-2 runs, zeroed
  it and drew the decoder's copy of a tied embedding's new rows apart from the encoder's.)
* **Depth.**  With ``--encoder-layers N`` above the checkpoint's, encoder layers
  L..N-1 start as copies of its top layer L-1 (depth grown by stacking).
* **Relative-position table.**  ``--relative-table zero`` sets the table of the encoder's
  relative-position bias (``*relative_bias.table.weight``, buckets × heads; tp_transformer with
  ``--encoder-relative-buckets``) back to its init, 0; ``keep`` (default) copies it;
  ``zero-near`` zeroes only the rows of the exact buckets (one per offset |i − t| < buckets/4 on
  either side) and keeps the log-spaced ones.  Why: the stuck task-1 starts left task 2's second
  plateau only with the table zeroed, and their tables differ from a good start's mostly in
  strong biases 4-5 tokens away (docs/qa.md, "Which part of the start"; ours).  Measured (generator
  seed 0, 64 buckets, 3 starts): ``keep`` 1 of 3 ≤ 5%, ``zero`` 3 of 3 but slower, ``zero-near``
  2 of 3 (the start that passes with its table kept stays on the first plateau).
* A weight tied across keys (the encoder's and decoder's embedding) is re-indexed once and
  stays one tensor.
* The optimiser state, update count and data position are reset, and the model options recorded
  in the checkpoint (``cfg.model`` / ``args``) get the new ``encoder_layers``.

Models: ``tp_transformer`` and ``folnet_transformer`` (any of their architectures, tied or
untied output); others are refused by name, since their vocabulary tensors are named otherwise.

Both data folders must hold one joined dictionary (``dict.src.txt`` = ``dict.tgt.txt``, as
``prepare qa`` writes them).
"""
from __future__ import annotations

import argparse
import os
import re
from argparse import Namespace
from typing import Any, Dict, List, Tuple

import torch

from nesyseq.common.atomic import atomic_write
from nesyseq.common.dictionaries import RECORD_KEY, fingerprint
from nesyseq.common.errors import UserError

# the models whose every vocabulary tensor ends with one of VOCAB_SUFFIXES (checked for each,
# tests/test_qa_warm_start.py); other models name theirs otherwise (memnet/stpr: ``*.semantic.weight``,
# ``encoder.Z.weight``) and would come out half re-indexed, so they are refused
SUPPORTED_MODELS = ("tp_transformer", "folnet_transformer")
VOCAB_SUFFIXES = ("embed_tokens.weight", "alpha_logit", "output_projection.weight")
NEW_ALPHA_LOGIT = 0.0   # SymbolAlpha.alpha_logit's init (plugins/layers/symbolic_transformer.py)
RELATIVE_TABLE_SUFFIX = "relative_bias.table.weight"   # RelativePositionBias.table (zeros at init)
RELATIVE_TABLE_CHOICES = ("keep", "zero", "zero-near")
_LAYER = re.compile(r"^(encoder\.(?:[\w]+\.)*?layers)\.(\d+)\.(.+)$")


def load_dictionary(data: str, option: str):
    """The joined dictionary of a ``prepare qa`` data folder (dict.src.txt = dict.tgt.txt)."""
    from fairseq.data import Dictionary

    src, tgt = os.path.join(data, "dict.src.txt"), os.path.join(data, "dict.tgt.txt")
    if not os.path.isfile(src):
        raise UserError(f"{option} {data}: no dict.src.txt there (a `nesyseq prepare qa` bin folder?)")
    if os.path.isfile(tgt):
        with open(src, "rb") as a, open(tgt, "rb") as b:
            if a.read() != b.read():
                raise UserError(f"{option} {data}: dict.src.txt and dict.tgt.txt differ; warm-start "
                                "needs one joined dictionary")
    return Dictionary.load(src)


def row_map(src, dst) -> List[int]:
    """For each row j of ``dst``: its row in ``src`` (<s> <pad> </s> <unk> included), or -1 for a
    word ``src`` does not have."""
    return [src.indices.get(dst[j], -1) for j in range(len(dst))]   # specials match by symbol


def reindex(weight: torch.Tensor, src, rows: List[int], gen: torch.Generator) -> torch.Tensor:
    """``weight`` (|V_from|, ...) -> (|V_to|, ...): the formula of the module docstring."""
    if weight.dim() == 1:                                                     # α logits (V,)
        out = torch.full((len(rows),), NEW_ALPHA_LOGIT, dtype=weight.dtype)
    else:                                                                     # embeddings (V, d)
        std = float(weight[src.nspecial:].float().std()) if len(src) > src.nspecial + 1 else 1.0
        out = (torch.randn(len(rows), *weight.shape[1:], generator=gen) * std).to(weight.dtype)
    index = torch.tensor(rows)
    have = index >= 0
    out[have] = weight[index[have]]
    return out


def grow_encoder(model: Dict[str, torch.Tensor], layers: int) -> Tuple[int, int]:
    """Encoder layers ``have..layers-1`` as copies of the top one; returns (have, now)."""
    found: Dict[str, set] = {}
    for k in model:
        m = _LAYER.match(k)
        if m:
            found.setdefault(m.group(1), set()).add(int(m.group(2)))
    if len(found) != 1:
        raise UserError(f"--encoder-layers: cannot tell the encoder's layer stack in this checkpoint "
                        f"(prefixes found: {sorted(found) or 'none'})")
    prefix, ids = next(iter(found.items()))
    have = max(ids) + 1
    if layers < have:
        raise UserError(f"--encoder-layers {layers}: the checkpoint has {have} encoder layers; warm-start "
                        "only adds layers")
    top = f"{prefix}.{have - 1}."
    for n in range(have, layers):
        for k in [k for k in model if k.startswith(top)]:
            model[f"{prefix}.{n}." + k[len(top):]] = model[k].clone()
    return have, layers


def model_name(state: dict, checkpoint: str) -> str:
    """The registered model (``tp_transformer``, ...) of a fairseq checkpoint's architecture."""
    import nesyseq.plugins.models  # noqa: F401  (registers our architectures)
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    model_cfg = (state.get("cfg") or {}).get("model")
    arch = (model_cfg.get("_name") if isinstance(model_cfg, dict) else getattr(model_cfg, "arch", None)) \
        or getattr(state.get("args"), "arch", None)
    if arch not in ARCH_MODEL_NAME_REGISTRY:
        raise UserError(f"--checkpoint {checkpoint}: cannot tell its architecture (cfg.model names {arch!r})")
    name = ARCH_MODEL_NAME_REGISTRY[arch]
    if name not in SUPPORTED_MODELS:
        raise UserError(f"--checkpoint {checkpoint}: architecture {arch} (model {name}) is not one warm-start "
                        f"knows the vocabulary tensors of ({', '.join(SUPPORTED_MODELS)})")
    return name


def _fresh_training_state(state: dict) -> None:
    """No optimiser, counters or data position of the first run (fairseq's --finetune-from-model
    ignores them; --restore-file would not)."""
    state["last_optimizer_state"] = None
    history = (state.get("optimizer_history") or [])[-1:]
    state["optimizer_history"] = [dict(h, num_updates=0) for h in history]
    state["extra_state"] = {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "version": 2}}


def _set_encoder_layers(state: dict, layers: int) -> None:
    for holder in (state.get("args"), (state.get("cfg") or {}).get("model")):
        if isinstance(holder, Namespace) and hasattr(holder, "encoder_layers"):
            holder.encoder_layers = layers
        elif isinstance(holder, dict) and "encoder_layers" in holder:
            holder["encoder_layers"] = layers


def near_buckets(num_buckets: int) -> List[int]:
    """The table rows of the exact buckets, one per offset |i − t| < num_buckets / 4 on either side
    (plugins/layers/relative_position.py, ``relative_bucket``): rows [0, n/4) and [n/2, 3n/4)."""
    half = num_buckets // 2
    return [b for b in range(num_buckets) if b % half < half // 2]


def reset_relative_table(model: Dict[str, torch.Tensor], checkpoint: str, which: str = "zero") -> List[str]:
    """The relative-position tables of ``model`` set to zeros (their init), every row (``zero``) or
    only the exact buckets' rows (``zero-near``: the log-spaced buckets are kept); returns their keys."""
    keys = [k for k in model if k.endswith(RELATIVE_TABLE_SUFFIX)]
    if not keys:
        raise UserError(f"--relative-table {which}: --checkpoint {checkpoint} has no relative-position table "
                        f"(*{RELATIVE_TABLE_SUFFIX}; a tp_transformer trained with --encoder-relative-buckets has one)")
    for k in keys:
        table = model[k].clone()                  # (buckets, heads)
        rows = near_buckets(table.shape[0]) if which == "zero-near" else list(range(table.shape[0]))
        table[rows] = 0
        model[k] = table
    return keys


def warm_start(checkpoint: str, from_data: str, to_data: str, out: str, encoder_layers: int = None,
               seed: int = 0, relative_table: str = "keep") -> Dict[str, object]:
    import nesyseq.plugins.checkpoint_safety  # noqa: F401  (the classes a fairseq checkpoint holds)

    if relative_table not in RELATIVE_TABLE_CHOICES:
        raise UserError(f"--relative-table {relative_table}: one of {', '.join(RELATIVE_TABLE_CHOICES)}")

    if not os.path.isfile(checkpoint):
        raise UserError(f"--checkpoint {checkpoint}: no such file")
    if os.path.abspath(out) == os.path.abspath(checkpoint):
        raise UserError(f"--out {out}: the same file as --checkpoint; write the start elsewhere")
    src = load_dictionary(from_data, "--from-data")
    dst = load_dictionary(to_data, "--to-data")
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as exc:   # truncated file, not a torch file, a pickle outside the allow-list
        raise UserError(f"--checkpoint {checkpoint}: cannot be read as a fairseq checkpoint ({exc})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise UserError(f"--checkpoint {checkpoint}: not a fairseq checkpoint (no 'model' entry)")
    model_name(state, checkpoint)
    model = state["model"]
    rows = row_map(src, dst)
    gen = torch.Generator().manual_seed(seed)
    report: Dict[str, Any] = {"words_kept": sum(r >= 0 for r in rows[dst.nspecial:]),
                              "words_new": [dst[j] for j, r in enumerate(rows) if r < 0],
                              "tensors": []}
    done = {}   # a tied weight (encoder and decoder keys, one storage) is re-indexed once, stays tied
    for key in list(model):   # state-dict order: each vocabulary tensor draws its new rows in turn
        w = model[key]
        if not key.endswith(VOCAB_SUFFIXES):
            continue
        if w.shape[0] != len(src):
            raise UserError(f"--checkpoint {checkpoint}: {key} has {w.shape[0]} rows but "
                            f"{os.path.join(from_data, 'dict.src.txt')} has {len(src)} entries: was the "
                            "checkpoint trained on --from-data?")
        tied = (w.data_ptr(), tuple(w.shape), w.stride())
        if tied not in done:
            done[tied] = reindex(w, src, rows, gen)
        model[key] = done[tied]
        report["tensors"].append(key)
    if not report["tensors"]:
        raise UserError(f"--checkpoint {checkpoint}: no vocabulary tensor (*{', *'.join(VOCAB_SUFFIXES)})")
    if relative_table != "keep":
        report["relative_table_zeroed"] = reset_relative_table(model, checkpoint, relative_table)
        report["relative_table_rows"] = relative_table
    if encoder_layers is not None:
        report["encoder_layers"] = grow_encoder(model, encoder_layers)
        _set_encoder_layers(state, encoder_layers)
    _fresh_training_state(state)
    # its ids now index --to-data's dictionary: the record the evaluators check says so
    state["extra_state"][RECORD_KEY] = {side: fingerprint(dst.symbols) for side in ("source", "target")}
    atomic_write(out, lambda tmp: torch.save(state, tmp))
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="the trained fairseq checkpoint (e.g. task 1's)")
    parser.add_argument("--from-data", required=True, metavar="BIN", help="the data folder it was trained on")
    parser.add_argument("--to-data", required=True, metavar="BIN", help="the data folder of the next run")
    parser.add_argument("--out", required=True, help="the start checkpoint to write (for --finetune-from-model)")
    parser.add_argument("--encoder-layers", type=int, metavar="N",
                        help="grow the encoder to N layers, the new ones copies of the top one")
    parser.add_argument("--relative-table", choices=RELATIVE_TABLE_CHOICES, default="keep",
                        help="the encoder's relative-position table: keep it (default), zero it (its init), or "
                             "zero-near: zero only the exact buckets (offsets below buckets/4), keep the log-spaced ones")
    parser.add_argument("--seed", type=int, default=0, help="seed of the new words' embedding rows")


def run(args) -> int:
    r = warm_start(args.checkpoint, args.from_data, args.to_data, args.out, args.encoder_layers, args.seed,
                   args.relative_table)
    print(f"{args.out}: {r['words_kept']} words kept, {len(r['words_new'])} new "
          f"({' '.join(r['words_new'][:20])}{' ...' if len(r['words_new']) > 20 else ''}); "
          f"re-indexed: {', '.join(r['tensors'])}")
    if "encoder_layers" in r:
        print(f"encoder layers: {r['encoder_layers'][0]} -> {r['encoder_layers'][1]}")
    if "relative_table_zeroed" in r:
        rows = " (exact buckets only)" if r["relative_table_rows"] == "zero-near" else ""
        print(f"relative-position table zeroed{rows}: {', '.join(r['relative_table_zeroed'])}")
    return 0
