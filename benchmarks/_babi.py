"""bAbI-shaped inputs for the QA benchmarks: a dictionary of ``vocab`` words plus ``.`` and ``?``,
and random stories over it (sentences of words, each ending in ``.``, then a 3-word question)."""
from typing import Callable

import torch
from fairseq.data import Dictionary


def word_dictionary(vocab: int) -> Dictionary:
    d = Dictionary()
    for i in range(vocab):
        d.add_symbol(f"w{i}")
    d.add_symbol(".")
    d.add_symbol("?")
    return d


def story_batch(d: Dictionary, B: int, vocab: int, g: torch.Generator, sentences: Callable[[], int],
                words: Callable[[], int]) -> torch.Tensor:
    """(B, T) right-padded rows: ``sentences()`` sentences of ``words()`` random words each, then the
    question; ``sentences`` and ``words`` are called in that order per row and per sentence."""
    def random_words(n):
        return [d.index(f"w{int(i)}") for i in torch.randint(vocab, (n,), generator=g)]

    rows = []
    for _ in range(B):
        toks = []
        for _ in range(sentences()):
            toks += random_words(words()) + [d.index(".")]
        rows.append(toks + random_words(3) + [d.index("?"), d.eos()])
    src = torch.full((B, max(map(len, rows))), d.pad(), dtype=torch.long)
    for i, r in enumerate(rows):
        src[i, : len(r)] = torch.tensor(r)
    return src
