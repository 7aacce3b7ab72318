"""A Mathematics Dataset model (``tp_transformer_math`` and its baselines, any seq2seq model on the
character data of ``nesyseq prepare math``) as fairseq's ``GeneratorHubInterface``.

    m = nesyseq.load("examples/tp_transformer/results/math_study/weights/seed2/tp_transformer_tiny.pt")
    m.solve("What is 7 + 5?")              # one question -> its answer string
    m.solve([q1, q2], beam=4)              # a list, batched; greedy (beam 1) by default, as evaluate math
    r = m.roles("What is 7 + 5?", layer=-1, head=0)   # the encoder's role vectors and attention

A question is encoded exactly as ``nesyseq prepare math`` encodes its source lines: one token per
character, a space as ``▁`` (``data_prep.math_preprocess.encode_chars``); a character the training
data never had is a one-line error (the model has no row for it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import torch

from nesyseq.common.errors import UserError
from nesyseq.hub.base import GeneratorFamily
from nesyseq.data_prep.math_preprocess import SPACE, decode_chars, encode_chars


@dataclass
class Roles:
    """One question's encoder roles at one layer and head (``nesyseq analyze roles`` reads the same
    vectors).  ``tokens``: the characters, ' ' for a space, then ``</s>``; ``roles`` (T, d_k): the
    role vector r^h_t of each position; ``attention`` (T, T): row t is the head's softmax over the
    positions that query t reads."""
    tokens: List[str]
    roles: torch.Tensor
    attention: torch.Tensor
    layer: int
    head: int


def _attention_weights(attn, query, key_padding_mask, attn_bias) -> torch.Tensor:
    """(B, H, T, T) softmax weights of a TP self-attention module on ``query``: the scores its
    forward gives ``scaled_dot_product_attention`` (same projection, mask and bias)."""
    B, T, d = query.shape
    proj = attn.in_proj(query)
    if attn.role_binding:
        q, _r, k, _v = proj.split(d, dim=-1)
    else:
        q, k, _v = proj.split(d, dim=-1)
    q, k = attn._heads(q), attn._heads(k)
    scores = q @ k.transpose(-1, -2) / attn.head_dim ** 0.5
    if attn_bias is not None:
        scores = scores + attn_bias.to(scores.dtype)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :T], float("-inf"))
    return torch.softmax(scores.float(), -1)


class MathModel(GeneratorFamily):
    family = "math"

    # --- the character encoding of `nesyseq prepare math`
    def encode(self, sentence: str) -> torch.LongTensor:
        if not isinstance(sentence, str):
            raise UserError(f"question {sentence!r}: expected a string")
        if not sentence:
            raise UserError("question '': empty")
        chars = encode_chars(sentence, where="question", strict=False).split(" ")
        for col, c in enumerate(chars, 1):
            if self.src_dict.index(c) == self.src_dict.unk():
                shown = " " if c == SPACE else c
                raise UserError(f"question {sentence!r}: character {shown!r} (column {col}) is not in the "
                                "model's dictionary (its training data never had it)")
        return self.src_dict.encode_line(" ".join(chars), add_if_not_exist=False, append_eos=True).long()

    def decode(self, tokens: torch.LongTensor) -> str:
        return decode_chars(self.tgt_dict.string(tokens))

    def solve(self, questions, beam: int = 1, **kwargs):
        """The model's answer to a question (a string), or to each of a list of them (batched).
        ``beam`` 1 is greedy decoding, what ``nesyseq evaluate math`` does by default;
        other fairseq generation options (``max_len_b``, ``lenpen``, ...) pass through."""
        if isinstance(questions, (list, tuple)) and not questions:
            return []
        return self.sample(questions, beam=beam, **kwargs)

    def roles(self, question: str, layer: int = -1, head: int = 0) -> Roles:
        """The role vectors and the self-attention of encoder ``layer`` (-1: the last), ``head``."""
        model = self.models[0]
        layers = getattr(model.encoder, "layers", None)
        if layers is None or not hasattr(layers[0], "self_attn") or not hasattr(layers[0].self_attn, "role_binding"):
            raise UserError(f"{self.path}: roles need a tp_transformer model, not {type(model).__name__}")
        if not -len(layers) <= layer < len(layers):
            raise UserError(f"layer {layer}: the encoder has layers 0..{len(layers) - 1} (or -1 for the last)")
        attn = layers[layer].self_attn
        if not attn.role_binding:
            raise UserError(f"{self.path}: this model has no roles (role binding is off)")
        if not 0 <= head < attn.num_heads:
            raise UserError(f"head {head}: the model has heads 0..{attn.num_heads - 1}")
        ids = self.encode(question).unsqueeze(0).to(self.device)
        seen: dict = {}

        def keep_inputs(module, args, kwargs):
            seen["query"] = args[0]
            seen["mask"] = kwargs.get("key_padding_mask")
            seen["bias"] = kwargs.get("attn_bias")

        hook = attn.register_forward_pre_hook(keep_inputs, with_kwargs=True)
        try:
            with torch.no_grad():
                out = model.encoder(ids, src_lengths=torch.tensor([ids.size(1)], device=self.device),
                                    return_all_roles=True)
                weights = _attention_weights(attn, seen["query"], seen["mask"], seen["bias"])
        finally:
            hook.remove()
        dk = attn.head_dim
        roles = out["roles"][layer][0, :, head * dk:(head + 1) * dk].float().cpu()
        tokens = [" " if self.src_dict[i] == SPACE else self.src_dict[i] for i in ids[0].tolist()]
        index = layer if layer >= 0 else len(layers) + layer
        return Roles(tokens=tokens, roles=roles, attention=weights[0, head].cpu(), layer=index, head=head)
