"""Entity dropout (ours, issue 23; docs/qa.md): in training, per example, some context words are
treated as words unseen in training, the way the paper's zero-shot test treats them (their
semantic embedding and output rows read as zero).  The word lists of the options and the
per-word draw shared by the QA models and the symbolic transformer live here.

    word_mask("mary,john", d)        (V,) bool over the dictionary, the listed words
    word_mask("@names.txt", d)       the same, words read from a file (whitespace-separated)
    drop_context_words(slots, p, m)  (B, V) bool: each real slot's word with probability p,
                                     kept on the (V,) mask m (None: every slot)
"""
from __future__ import annotations

import logging
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from nesyseq.plugins.layers.symbolic import ContextSymbols

logger = logging.getLogger(__name__)


def listed_words(words: str, what: str) -> List[str]:
    """The words of an option value: comma-separated, or ``@PATH``, a file of whitespace-separated
    words (10,000 names do not fit a command line).  ``what`` names the option in errors."""
    words = (words or "").strip()
    if words.startswith("@"):
        path = words[1:]
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().split()
        except OSError as e:
            raise ValueError(f"{what}: cannot read the word list {path!r}: {e.strerror}") from e
    return [w.strip() for w in words.split(",") if w.strip()]


def word_mask(words: str, dictionary, what: str) -> Tuple[Optional[Tensor], List[str]]:
    """``words`` (see ``listed_words``) as a (V,) bool mask over ``dictionary`` and the listed words;
    words absent from the dictionary are skipped and logged under ``what`` (the option); the mask
    is None when none is present."""
    listed = listed_words(words, what)
    ids = [dictionary.index(w) for w in listed]
    missing = [w for w, i in zip(listed, ids) if i == dictionary.unk()]
    if missing:
        shown = ", ".join(missing[:20]) + (f", ... ({len(missing) - 20} more)" if len(missing) > 20 else "")
        logger.info("%s: %d of %d listed words are not in the dictionary, skipped: %s",
                    what, len(missing), len(listed), shown)
    found = [i for i in ids if i != dictionary.unk()]
    if not found:
        return None, listed
    mask = torch.zeros(len(dictionary), dtype=torch.bool)
    mask[found] = True
    return mask, listed


def droppable_words(words: str, dictionary, what: str = "--entity-dropout-words") -> Optional[Tensor]:
    """The option's word list as a (V,) bool mask; None when the option is empty, an error when
    it lists no word of the dictionary."""
    if not listed_words(words, what):
        return None
    mask, listed = word_mask(words, dictionary, what)
    if mask is None:
        shown = listed[:10] + (["..."] if len(listed) > 10 else [])
        raise ValueError(f"{what}: none of {shown} is in the dictionary ({len(dictionary)} words); "
                         "give words of the training data")
    return mask


def drop_context_words(slots: ContextSymbols, rate: float, droppable: Optional[Tensor], vocab_size: int,
                       generator: Optional[torch.Generator] = None) -> Tensor:
    """(B, V) bool: the words treated as unseen in each example.  Every distinct context word
    (a real slot of ``slots``, (B, m)) is picked independently with probability ``rate``, then
    kept only where ``droppable`` (V,) is set (None: every word)."""
    u = torch.rand(slots.slot_vocab.shape, generator=generator, device=slots.slot_vocab.device)   # (B, m)
    picked = (u < rate) & slots.slot_mask
    if droppable is not None:
        picked = picked & droppable[slots.slot_vocab]
    b, j = picked.nonzero(as_tuple=True)
    drop = torch.zeros(slots.slot_vocab.size(0), vocab_size, dtype=torch.bool, device=slots.slot_vocab.device)
    drop[b, slots.slot_vocab[b, j]] = True
    return drop
