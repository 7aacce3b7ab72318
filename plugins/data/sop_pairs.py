"""Sentence-order prediction (SOP) pairs with dynamic MLM masking, as FOLNet was pretrained.

The official pretraining (``tencent-ailab/FOLNet``, ``pretrain_FOLNet.sh:7,18``: ``data_type=dyn``,
``pretrain_loss=MLM.SOP``) reads contiguous token chunks and, for every sample it yields
(``dataset.py:106-180``):

1. splits the chunk into A = tokens before a split point, B = the rest, the split point
   being ``int(n/2) - 1`` moved by ``±Geometric(0.2)`` (``dataset.py:313-322``);
2. truncates the pair to the length budget, dropping A's *first* token while A is longer,
   else B's last token (``dataset.py:18-26``, ``:323``);
3. swaps A and B with probability 1/2; label 1 = swapped (``dataset.py:324-327``);
4. lays out ``[CLS] A [SEP] B [SEP]``, segment 0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``
   (``dataset.py:328-329``);
5. masks ``min(max_pred, max(1, round(0.15 · n_candidates)))`` of the non-special tokens,
   80% -> [MASK], 10% kept, 10% -> a uniformly random token (``dataset.py:236-288``).

Here the chunks come from a plain-text corpus, one sentence per line and a blank line
between documents, binarized by ``fairseq-preprocess --only-source`` (every line ends in
``</s>``; a blank line is a lone ``</s>``). ``pack_chunks`` packs whole sentences of one
document, never crossing a document boundary.  The layout is the one our ``folnet`` encoder
and fairseq's ``sentence_prediction`` agree on (``<s> A </s> </s> B </s>``; the model
derives the segments from the ``</s> </s>`` pair, ``plugins/layers/folnet_rpe.py``), so the
same model reads pretraining and GLUE pairs alike: segment 0 = ``<s> A </s>``, 1 = ``</s> B </s>``.
``layout="bert"`` (``--sop-layout bert``) lays pairs out as the official code does,
``<s> A </s> B </s>``, for models with ``--folnet-segments bert`` such as converted official
checkpoints (fairseq's ``sentence_prediction`` without ``--separator-token`` gives the same layout).
Differences from the official code are listed in docs/folnet.md ("Pretraining and fine-tuning").
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

SWAP_PROB = 0.5  # dataset.py:325
GEOMETRIC_P = 0.2  # dataset.py:314
MASK_TOKEN_PROB = 0.8  # dataset.py:269
KEEP_PROB_OF_REST = 0.5  # dataset.py:273: half of the other 20% keep the token, half get a random one
PAIR_SPECIALS = {"roberta": 4, "bert": 3}  # <s>, </s> </s>, </s>  /  [CLS], [SEP], [SEP]
SPLIT_MODES = ("middle", "sentence")
LAYOUTS = ("roberta", "bert")


def pack_chunks(lengths: Sequence[int], budget: int) -> List[Tuple[int, int]]:
    """Line lengths (without ``</s>``; 0 = blank line = document boundary) -> chunks ``[start, end)``.

    Greedy, in corpus order: whole sentences of one document while their total stays within
    ``budget``; a sentence longer than ``budget`` forms a chunk alone (the pair is truncated
    later).  Chunks with fewer than 2 tokens cannot be split into A and B and are dropped.
    """
    if budget < 2:
        raise ValueError(f"--tokens-per-sample leaves a pair budget of {budget} tokens; need at least 2")
    chunks, start, total = [], None, 0

    def close(end):
        if start is not None and total >= 2:
            chunks.append((start, end))

    for i, n in enumerate(lengths):
        n = int(n)
        if n == 0:  # document boundary
            close(i)
            start, total = None, 0
        elif start is None:
            start, total = i, n
        elif total + n <= budget:
            total += n
        else:
            close(i)
            start, total = i, n
    close(len(lengths))
    return chunks


def middle_split(n: int, rng: np.random.Generator) -> int:
    """The official split point: int(n/2) - 1 ± Geometric(0.2), kept inside [1, n-1]."""
    shift = int(rng.geometric(GEOMETRIC_P))
    if rng.random() < 0.5:
        shift = -shift
    return min(max(n // 2 - 1 + shift, 1), n - 1)


def sentence_split(lengths: Sequence[int], rng: np.random.Generator) -> int:
    """ALBERT's split: after a uniformly chosen sentence k in 1..m-1 (needs m >= 2 sentences)."""
    k = int(rng.integers(1, len(lengths)))
    return int(sum(lengths[:k]))


def truncate_pair(a: np.ndarray, b: np.ndarray, budget: int) -> Tuple[np.ndarray, np.ndarray]:
    """Official ``truncate_seq_pair``: while too long, drop A's first token if A is longer, else B's last."""
    la, lb = len(a), len(b)
    while la + lb > budget:
        if la > lb:
            la -= 1
        else:
            lb -= 1
    return a[len(a) - la:], b[:lb]


def layout_pair(a: np.ndarray, b: np.ndarray, bos: int, eos: int, layout: str = "roberta") -> np.ndarray:
    """roberta: ``<s> A </s> </s> B </s>``; bert: ``<s> A </s> B </s>``, the official
    ``[CLS] A [SEP] B [SEP]`` (dataset.py:328) for checkpoints converted with --folnet-segments bert."""
    mid = [eos, eos] if layout == "roberta" else [eos]
    return np.concatenate([[bos], a, mid, b, [eos]]).astype(np.int64)


def mask_tokens(tokens: np.ndarray, rng: np.random.Generator, specials: Sequence[int], mask_idx: int,
                random_low: int, random_high: int, mask_prob: float, max_predictions: int,
                pad: int) -> Tuple[np.ndarray, np.ndarray]:
    """Official dynamic masking -> (input tokens, target: the original token where masked, else pad).

    Candidates are the non-special positions; ``min(max_predictions, max(1, round(mask_prob·n)))``
    of them, chosen uniformly, become [MASK] (80%), stay (10%), or a uniformly random token from
    ``[random_low, random_high)`` other than ``mask_idx`` (10%).
    """
    candidates = np.flatnonzero(~np.isin(tokens, np.asarray(specials)))
    out, target = tokens.copy(), np.full_like(tokens, pad)
    if len(candidates) == 0:
        return out, target
    count = min(max_predictions, max(1, int(round(len(candidates) * mask_prob))))
    for i in rng.permutation(candidates)[:count]:
        if rng.random() < MASK_TOKEN_PROB:
            out[i] = mask_idx
        elif rng.random() >= KEEP_PROB_OF_REST:
            r = mask_idx
            while r == mask_idx:
                r = int(rng.integers(random_low, random_high))
            out[i] = r
        target[i] = tokens[i]
    return out, target


class SentenceOrderDataset(FairseqDataset):
    """Binarized sentences -> SOP pairs, re-split, re-swapped and re-masked every epoch.

    Item ``i`` of epoch ``e`` draws from ``np.random.default_rng([seed, e, i])``, so a run is
    reproducible and independent of the data-loader workers.
    """

    def __init__(self, lines, dictionary, mask_idx: int, tokens_per_sample: int, split_mode: str = "middle",
                 seed: int = 1, mask_prob: float = 0.15, max_predictions: int = 20, name: str = "data",
                 layout: str = "roberta"):
        if split_mode not in SPLIT_MODES:
            raise ValueError(f"--sop-split={split_mode!r}: choose one of {', '.join(SPLIT_MODES)}")
        if layout not in LAYOUTS:
            raise ValueError(f"--sop-layout={layout!r}: choose one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self.lines, self.dictionary, self.mask_idx = lines, dictionary, mask_idx
        self.budget = tokens_per_sample - PAIR_SPECIALS[layout]
        self.split_mode, self.seed, self.name = split_mode, seed, name
        self.mask_prob, self.max_predictions = mask_prob, max_predictions
        self.pad, self.bos, self.eos = dictionary.pad(), dictionary.bos(), dictionary.eos()
        self.specials = [self.bos, self.eos, self.pad]  # [CLS], [SEP], [PAD] (dataset.py:250)
        self.epoch = 1
        lengths = np.asarray(lines.sizes, dtype=np.int64) - 1  # without the trailing </s>
        chunks = pack_chunks(lengths, self.budget)
        if not chunks:
            raise ValueError(f"{name}: no document has 2 or more tokens to build a sentence pair from")
        self.starts = np.array([s for s, _ in chunks], dtype=np.int64)
        self.ends = np.array([e for _, e in chunks], dtype=np.int64)
        csum = np.concatenate([[0], np.cumsum(lengths)])
        self.sizes = np.minimum(csum[self.ends] - csum[self.starts], self.budget) + PAIR_SPECIALS[layout]

    def __len__(self):
        return len(self.starts)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # order and content change every epoch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def sentences(self, i: int) -> List[np.ndarray]:
        out = []
        for j in range(int(self.starts[i]), int(self.ends[i])):
            t = self.lines[j]
            if len(t) == 0 or int(t[-1]) != self.eos:
                raise ValueError(f"{self.name}: line {j + 1} does not end in </s>; binarize the corpus with "
                                 "fairseq-preprocess --only-source (one sentence per line)")
            out.append(np.asarray(t[:-1], dtype=np.int64))
        return out

    def build(self, i: int, rng: np.random.Generator):
        """-> (A, B, swapped) before masking."""
        sents = self.sentences(i)
        tokens = np.concatenate(sents)
        if self.split_mode == "sentence" and len(sents) >= 2:
            cut = sentence_split([len(s) for s in sents], rng)
        else:
            cut = middle_split(len(tokens), rng)
        a, b = truncate_pair(tokens[:cut], tokens[cut:], self.budget)
        swapped = bool(rng.random() < SWAP_PROB)
        if swapped:
            a, b = b, a
        return a, b, swapped

    def __getitem__(self, i):
        rng = np.random.default_rng([self.seed, self.epoch, int(i)])
        a, b, swapped = self.build(int(i), rng)
        pair = layout_pair(a, b, self.bos, self.eos, self.layout)
        source, target = mask_tokens(pair, rng, self.specials, self.mask_idx, self.dictionary.nspecial,
                                     len(self.dictionary), self.mask_prob, self.max_predictions, self.pad)
        return {"id": int(i), "source": torch.from_numpy(source), "target": torch.from_numpy(target),
                "sop_target": int(swapped)}

    def num_tokens(self, i):
        return int(self.sizes[i])

    def size(self, i):
        return int(self.sizes[i])

    def ordered_indices(self):
        with data_utils.numpy_seed(self.seed, self.epoch):
            return np.random.permutation(len(self))

    def collater(self, samples):
        if not samples:
            return {}
        src = data_utils.collate_tokens([s["source"] for s in samples], self.pad, left_pad=False)
        tgt = data_utils.collate_tokens([s["target"] for s in samples], self.pad, left_pad=False)
        return {
            "id": torch.tensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(src.ne(self.pad).sum()),
            "net_input": {"src_tokens": src, "src_lengths": torch.tensor([len(s["source"]) for s in samples])},
            "target": tgt,
            "sop_target": torch.tensor([s["sop_target"] for s in samples], dtype=torch.long),
        }
