"""Word classes of a QA training set, from slot-filler statistics alone (ours; docs/qa.md).

Words that fill the same slots are one class: in bAbI's task 2 the rooms (``to the _ .``), the
objects (``the _ there``), the people (``<s> _ went``), the moving verbs and the taking and leaving
verbs.  ``prepare qa`` writes them to ``bin/task{N}/word_classes.txt``, one class per line, and
entity dropout reads that file where a recipe would otherwise name bAbI's entities
(``--entity-dropout-words @FILE --entity-dropout-groups @FILE``): no list of entity words is
needed, and a new set of stories gets its own classes.

A word's signature is the distribution of its contexts over the train questions and stories:
the word before it (``L1``), the two words before it (``L2``), the word after it (``R1``), and
whether it is an answer (``ANS``); ``<s>`` and ``</s>`` mark a sentence's ends.  Each feature
family is normalised to sum to 1.  Classes are the average-linkage agglomerative clustering of
the signatures' cosine similarity (each feature family weighs the same), merged while the best
pair of clusters is at least ``threshold`` similar; classes of one word are dropped.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, Iterable, List

import numpy as np

THRESHOLD = 0.8    # average cosine similarity; bAbI tasks 1, 2 and 5 give their kinds of word at 0.8
MAX_WORDS = 1000   # the most frequent words clustered (the clustering is cubic in their number)


def signatures(examples: Iterable) -> Dict[str, Dict[str, float]]:
    """{word: {feature: weight}} over the story sentences and questions of ``examples``
    (``QAExample``s; a story sentence counts once per question that reads it, as the training
    data has it); each family of a word's features sums to 1."""
    counts: Dict[str, Counter] = defaultdict(Counter)
    for e in examples:
        for s in [*e.story, e.question]:
            padded = ["<s>", "<s>", *s, "</s>"]
            for i in range(2, len(padded) - 1):
                w = padded[i]
                counts[w]["L1=" + padded[i - 1]] += 1
                counts[w]["L2=" + padded[i - 2] + " " + padded[i - 1]] += 1
                counts[w]["R1=" + padded[i + 1]] += 1
        counts[e.answer]["ANS"] += 1
    out: Dict[str, Dict[str, float]] = {}
    for w, c in counts.items():
        totals: Counter = Counter()
        for k, v in c.items():
            totals[k.split("=")[0]] += v
        out[w] = {k: v / totals[k.split("=")[0]] for k, v in c.items()}
    return out


def word_classes(examples: Iterable, threshold: float = THRESHOLD, max_words: int = MAX_WORDS) -> List[List[str]]:
    """The classes (two words or more) of ``examples``' ``max_words`` most frequent words, each
    sorted, largest first."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"word classes: the similarity threshold must be in (0, 1], got {threshold}")
    examples = list(examples)
    sig = signatures(examples)
    freq = Counter(w for e in examples for s in [*e.story, e.question] for w in s)
    words = sorted(sig, key=lambda w: (-freq[w], w))[:max_words]
    feats = sorted({k for w in words for k in sig[w]})
    col = {k: i for i, k in enumerate(feats)}
    X = np.zeros((len(words), len(feats)))
    for r, w in enumerate(words):
        for k, v in sig[w].items():
            X[r, col[k]] = v
    X /= np.linalg.norm(X, axis=1, keepdims=True).clip(min=1e-12)
    S = X @ X.T                                   # (n, n) cosine similarity of the signatures
    np.fill_diagonal(S, -np.inf)
    members = [[w] for w in words]
    while len(words) > 1:                         # merged-away rows and columns read -inf
        i, j = np.unravel_index(np.argmax(S), S.shape)
        if S[i, j] < threshold:
            break
        ni, nj = len(members[i]), len(members[j])
        row = (ni * S[i] + nj * S[j]) / (ni + nj)  # average linkage of the merged cluster
        S[i], S[:, i] = row, row
        S[i, i] = -np.inf
        S[j], S[:, j] = -np.inf, -np.inf
        members[i] += members[j]
        members[j] = []
    classes = [sorted(m) for m in members if len(m) > 1]
    return sorted(classes, key=lambda c: (-len(c), c))


def format_classes(classes: List[List[str]]) -> str:
    """``word_classes.txt``: one class per line, its words separated by spaces."""
    return "".join(" ".join(c) + "\n" for c in classes)
