"""FOLNet models: the encoder (``folnet``, ``.features``) and the decoder-only LM (``folnet_lm`` on
``--task language_modeling``, ``.score`` and ``.features``), as fairseq's hub interfaces.

    enc = nesyseq.load("ck/checkpoint_best.pt")           # a folnet encoder
    f = enc.features("the cat sat", layer=None)           # Features: unary (T, D1), binary (T, T, D2)
    lm = nesyseq.load("lm/checkpoint_best.pt")
    lm.score("the cat sat")                               # fairseq's hypothesis dict: score, positional_scores

``layer`` None gives the atoms the model outputs (after the final LayerNorms); ``layer`` k (0-based,
negative from the end) gives what layer k passes to the next one.  Text is split on whitespace
(after the checkpoint's ``--bpe``, when it has one) and looked up in the dictionary; a token outside
it is a one-line error, since FOLNet has no representation for words unseen in training.  The
encoder reads ``<s>`` + tokens + ``</s>``, as ``masked_lm`` batches start with ``<s>``; the LM reads
tokens + ``</s>``, as fairseq's LM hub interface encodes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch

from nesyseq.common.errors import UserError
from nesyseq.hub.base import GeneratorFamily, ModelFamily


@dataclass
class Features:
    """Atoms of one input: ``unary`` (T, D1) per token, ``binary`` (T, T, D2) per token pair
    (row x, column y: u(x, y)); ``tokens`` the T tokens read; ``layer`` which layer (None: output)."""
    tokens: List[str]
    unary: torch.Tensor
    binary: torch.Tensor
    layer: Optional[int]


def encode_tokens(dictionary, bpe, text, prepend_bos: bool) -> torch.Tensor:
    if isinstance(text, str):
        words = (bpe.encode(text) if bpe is not None else text).split()
    elif isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
        words = list(text)
    else:
        raise UserError(f"tokens {text!r:.60}: expected a string or a list of token strings")
    if not words:
        raise UserError("tokens: empty input")
    for i, w in enumerate(words, 1):
        if dictionary.index(w) == dictionary.unk():
            raise UserError(f"token {w!r} (position {i}) is not in the model's dictionary; "
                            "FOLNet has no representation for words unseen in training")
    ids = [dictionary.index(w) for w in words] + [dictionary.eos()]
    if prepend_bos:
        ids = [dictionary.bos()] + ids
    return torch.tensor(ids, dtype=torch.long)


def layer_features(stack, run, tokens, layer: Optional[int], dictionary) -> Features:
    """Run ``run()`` (the model on one input) and keep the atoms of ``layer`` of ``stack``."""
    n = len(stack.layers)
    if layer is not None and not -n <= layer < n:
        raise UserError(f"layer {layer}: the model has layers 0..{n - 1} (or None for its output)")
    seen: dict = {}
    hook = None
    if layer is not None:
        hook = stack.layers[layer].register_forward_hook(lambda m, a, out: seen.update(u1=out[0], u2=out[1]))
    try:
        with torch.no_grad():
            u1, u2 = run()
    finally:
        if hook is not None:
            hook.remove()
    if layer is not None:
        u1, u2 = seen["u1"], seen["u2"]
    names = [dictionary[i] for i in tokens.tolist()]
    return Features(tokens=names, unary=u1[0].float().cpu(), binary=u2[0].float().cpu(),
                    layer=None if layer is None else layer % n)


class FolnetModel(ModelFamily):
    family = "folnet"

    def __init__(self, cfg, task, model, path=None):
        super().__init__(cfg, task, model, path)
        from fairseq.data import encoders

        self.bpe = encoders.build_bpe(cfg.bpe) if cfg.get("bpe") else None

    def features(self, tokens, layer: Optional[int] = None) -> Features:
        d = self.task.source_dictionary
        ids = encode_tokens(d, self.bpe, tokens, prepend_bos=True)
        enc = self.model.encoder

        def run():
            u1, extra = enc.extract_features(ids.unsqueeze(0).to(self.device))
            return u1, extra["binary_atoms"]

        return layer_features(enc.core.stack, run, ids, layer, d)


class FolnetLM(GeneratorFamily):
    family = "folnet_lm"

    def binarize(self, sentence: str) -> torch.Tensor:
        return encode_tokens(self.src_dict, None, sentence, prepend_bos=False)

    def features(self, tokens, layer: Optional[int] = None) -> Features:
        ids = encode_tokens(self.src_dict, self.bpe, tokens, prepend_bos=False)
        dec = self.models[0].decoder

        def run():
            u1, extra = dec.extract_features(ids.unsqueeze(0).to(self.device))
            return u1, extra["binary_atoms"]

        return layer_features(dec.stack, run, ids, layer, self.src_dict)
