"""A task-1 checkpoint as the start of a task-2 run (a curriculum): the vocabulary-sized tensors
(encoder and decoder ``embedding.embed_tokens``, the output projection being tied to the latter,
and the symbolic embeddings' per-word ``alpha.alpha_logit``) are re-indexed from the task-1
dictionary to the task-2 one, row by word.  Words that task 1 never had (objects, take/drop
verbs) get fresh rows: embeddings drawn from N(0, σ²) with σ the std of the copied (trained)
rows, α logits at HybridEmbedding.ALPHA_LOGIT_INIT (the model's init); specials keep their rows,
<pad> stays zero.  Every other tensor is copied.  With ENCODER_LAYERS larger than the
checkpoint's, the missing top encoder layers start as copies of its top layer (depth grown by
stacking), for a run with ``--encoder-layers ENCODER_LAYERS``.

    python warm_start.py TASK1_CKPT TASK1_BIN TASK2_BIN OUT.pt [ENCODER_LAYERS]

then ``fairseq-train TASK2_BIN ... --finetune-from-model OUT.pt`` with the task-1 run's model
options (fresh optimizer, schedule and counters; the same call with a larger --max-update
continues from checkpoint_last.pt).
"""
import os
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
import nesyseq.plugins.checkpoint_safety  # noqa: E402,F401  (the classes a fairseq checkpoint needs)
from fairseq.data import Dictionary  # noqa: E402
from nesyseq.common.atomic import atomic_write  # noqa: E402
from nesyseq.plugins.layers.symbolic import HybridEmbedding  # noqa: E402

VOCAB_KEYS = ("encoder.embedding.embed_tokens.weight", "decoder.embedding.embed_tokens.weight",
              "encoder.alpha.alpha_logit", "decoder.alpha.alpha_logit")


def remap(weight, src: Dictionary, dst: Dictionary, gen: torch.Generator):
    if weight.shape[0] != len(src):
        raise SystemExit(f"a vocabulary tensor has {weight.shape[0]} rows, the task-1 dictionary {len(src)}")
    if weight.dim() == 1:   # alpha_logit
        out = torch.full((len(dst),), HybridEmbedding.ALPHA_LOGIT_INIT, dtype=weight.dtype)
    else:
        known = [i for i in range(src.nspecial, len(src)) if not src[i].startswith("madeupword")]
        std = float(weight[known].std())
        out = torch.randn(len(dst), weight.shape[1], generator=gen, dtype=weight.dtype) * std
    copied = 0
    for j in range(len(dst)):
        i = src.index(dst[j])
        if j < dst.nspecial or (i != src.unk_index and not dst[j].startswith("madeupword")):
            out[j] = weight[j if j < dst.nspecial else i]
            copied += j >= dst.nspecial
    if weight.dim() == 2:
        out[dst.pad()] = 0
    return out, copied


def grow(model, layers: int):
    have = 1 + max(int(k.split(".")[2]) for k in model if k.startswith("encoder.layers."))
    top = f"encoder.layers.{have - 1}."
    for n in range(have, layers):
        for k in [k for k in model if k.startswith(top)]:
            model[f"encoder.layers.{n}." + k[len(top):]] = model[k].clone()
    print(f"encoder layers: {have} -> {max(have, layers)}")


def main(ckpt, src_bin, dst_bin, out_path, encoder_layers=None):
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    src = Dictionary.load(os.path.join(src_bin, "dict.src.txt"))
    dst = Dictionary.load(os.path.join(dst_bin, "dict.src.txt"))
    gen = torch.Generator().manual_seed(0)
    for key in VOCAB_KEYS:
        if key not in state["model"]:
            continue
        state["model"][key], copied = remap(state["model"][key], src, dst, gen)
        print(f"{key}: {copied} word rows copied, {len(dst) - dst.nspecial - copied} new")
    if encoder_layers is not None:
        grow(state["model"], int(encoder_layers))
    state["optimizer_history"] = state.get("optimizer_history", [])[-1:]
    state["last_optimizer_state"] = None
    atomic_write(out_path, lambda tmp: torch.save(state, tmp))


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
