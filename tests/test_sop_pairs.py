"""Sentence-order pairs (plugins/data/sop_pairs.py) on hand-built documents.

References are independent of the code: hand-computed chunk tables and truncations, the
official rules restated (tencent-ailab/FOLNet dataset.py:18-26, :236-338), and the token ids
themselves (each document's tokens count up, so the order of A and B is visible).
"""
import numpy as np
import pytest
import torch
from fairseq.data import Dictionary

from folnet_helpers import build, single_thread  # noqa: F401
from nesyseq.plugins.data.sop_pairs import (
    GEOMETRIC_P, SentenceOrderDataset, mask_tokens, middle_split, pack_chunks, truncate_pair)


class Lines:
    """A binarized corpus in memory: one tensor per line, each ending in </s>."""

    def __init__(self, lines, eos):
        self.items = [torch.tensor(list(t) + [eos], dtype=torch.long) for t in lines]
        self.sizes = np.array([len(t) for t in self.items])

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def dictionary(n=400):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"w{i}")
    return d


def corpus(d, doc_sentence_lengths):
    """Documents of sentences; every document's tokens are consecutive ids (order is visible)."""
    lines, tok = [], d.nspecial
    for doc in doc_sentence_lengths:
        for n in doc:
            lines.append(list(range(tok, tok + n)))
            tok += n
        lines.append([])  # blank line = document boundary
        tok += 7  # a gap between documents
    assert tok < len(d)
    return Lines(lines, d.eos())


def dataset(d, docs, tokens_per_sample=64, **kw):
    mask_idx = d.add_symbol("<mask>")
    return SentenceOrderDataset(corpus(d, docs), d, mask_idx, tokens_per_sample, **kw), mask_idx


def unmask(item, pad):
    src, tgt = item["source"].clone(), item["target"]
    src[tgt.ne(pad)] = tgt[tgt.ne(pad)]
    return src


def split_layout(row, bos, eos, layout="roberta"):
    """<s> A </s> </s> B </s> (bert: <s> A </s> B </s>) -> (A, B); fails unless the layout is exactly that."""
    row = row.tolist()
    assert row[0] == bos and row[-1] == eos
    eos_at = [i for i, t in enumerate(row) if t == eos]
    if layout == "bert":
        assert len(eos_at) == 2, row
        return row[1:eos_at[0]], row[eos_at[0] + 1:-1]
    assert len(eos_at) == 3 and eos_at[1] == eos_at[0] + 1, row
    return row[1:eos_at[0]], row[eos_at[1] + 1:-1]


def test_pack_chunks_hand_table():
    # docs: [3, 4] | [5, 6, 7] | (empty) | [1, 1, 20, 1]; budget 10
    lengths = [3, 4, 0, 5, 6, 7, 0, 0, 1, 1, 20, 1]
    assert pack_chunks(lengths, 10) == [(0, 2), (3, 4), (4, 5), (5, 6), (8, 10), (10, 11)]
    # the 20-token sentence stands alone (truncated later); the trailing 1-token chunk is dropped
    assert pack_chunks([4, 4, 4], 8) == [(0, 2), (2, 3)]
    with pytest.raises(ValueError, match="budget"):
        pack_chunks([3], 1)


def test_pack_chunks_properties_random():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 9, size=400)  # zeros are document boundaries
    budget = 12
    chunks = pack_chunks(lengths, budget)
    for s, e in chunks:
        part = lengths[s:e]
        assert (part > 0).all()  # never crosses a document boundary
        assert part.sum() <= budget or e - s == 1
        assert part.sum() >= 2
        # greedy: the next sentence of the same document would not have fitted
        if e < len(lengths) and lengths[e] > 0 and (s, e) != chunks[-1]:
            assert part.sum() + lengths[e] > budget
    covered = {i for s, e in chunks for i in range(s, e)}
    # every sentence is in a chunk, except lone 1-token leftovers
    for i, n in enumerate(lengths):
        if n > 0 and i not in covered:
            assert n == 1


def test_truncate_pair_hand():
    a, b = np.arange(7), np.arange(7, 10)
    ta, tb = truncate_pair(a, b, 6)  # A longer: A loses its first tokens
    assert ta.tolist() == [4, 5, 6] and tb.tolist() == [7, 8, 9]
    ta, tb = truncate_pair(np.arange(2), np.arange(2, 11), 6)  # B longer: B loses its last tokens
    assert ta.tolist() == [0, 1] and tb.tolist() == [2, 3, 4, 5]
    ta, tb = truncate_pair(np.arange(5), np.arange(5, 10), 8)  # tie: B first, then A
    assert ta.tolist() == [1, 2, 3, 4] and tb.tolist() == [5, 6, 7, 8]
    ta, tb = truncate_pair(np.arange(3), np.arange(3, 5), 9)  # fits: unchanged
    assert ta.tolist() == [0, 1, 2] and tb.tolist() == [3, 4]


def test_middle_split_is_official_geometric_shift():
    rng = np.random.default_rng(1)
    n = 100
    shifts = np.array([middle_split(n, rng) - (n // 2 - 1) for _ in range(6000)])
    assert (shifts != 0).all()  # Geometric(p) >= 1
    assert abs((shifts > 0).mean() - 0.5) < 0.03
    assert abs(np.abs(shifts).mean() - 1 / GEOMETRIC_P) < 0.3  # mean of Geometric(0.2) is 5
    assert abs((np.abs(shifts) == 1).mean() - GEOMETRIC_P) < 0.02
    # short chunks: A and B are never empty
    for m in (2, 3, 5):
        cuts = {middle_split(m, rng) for _ in range(300)}
        assert min(cuts) >= 1 and max(cuts) <= m - 1


def test_pairs_swap_rate_order_labels_and_layout():
    d = dictionary()
    docs = [[5, 9, 4], [12, 3], [2, 2, 2, 2], [30], [6, 6, 6, 6, 6]]
    ds, mask_idx = dataset(d, docs, tokens_per_sample=24)
    labels = []
    for epoch in range(1, 501):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            item = ds[i]
            assert len(item["source"]) <= 24
            a, b = split_layout(unmask(item, d.pad()), d.bos(), d.eos())
            assert a and b
            first, second = (b, a) if item["sop_target"] == 1 else (a, b)
            run = first + second
            # in document order exactly when unswapped: one contiguous increasing run
            assert run == list(range(run[0], run[0] + len(run))), (item["sop_target"], a, b)
            labels.append(item["sop_target"])
    labels = np.array(labels)
    assert len(labels) > 2000
    assert abs(labels.mean() - 0.5) < 0.04
    # the same (seed, epoch, index) gives the same pair; another epoch re-draws it
    ds.set_epoch(3)
    x, y = ds[0], ds[0]
    assert torch.equal(x["source"], y["source"]) and x["sop_target"] == y["sop_target"]
    draws = set()
    for epoch in range(1, 30):
        ds.set_epoch(epoch)
        draws.add(tuple(ds[0]["source"].tolist()))
    assert len(draws) > 5


def test_long_sentence_is_truncated_by_the_official_rule():
    d = dictionary()
    ds, _ = dataset(d, [[40]], tokens_per_sample=4 + 10)  # one 40-token sentence, pair budget 10
    first, cuts = d.nspecial, set()
    for epoch in range(1, 200):
        ds.set_epoch(epoch)
        rng = np.random.default_rng([ds.seed, epoch, 0])
        a, b, swapped = ds.build(0, rng)
        if swapped:
            a, b = b, a
        a, b = a.tolist(), b.tolist()
        assert len(a) + len(b) == 10
        # A keeps its *last* tokens, B its first ones: both meet at the split point
        cut = b[0] - first
        assert a == list(range(first + cut - len(a), first + cut))
        assert b == list(range(first + cut, first + cut + len(b)))
        # closed form of "trim the longer side, B on ties" from the untruncated lengths
        la, lb = cut, 40 - cut
        want_a = min(la, max(10 - lb, (10 + 1) // 2))
        assert (len(a), len(b)) == (want_a, min(lb, 10 - want_a)), (la, lb)
        cuts.add(cut)
    assert min(cuts) < 15 and max(cuts) > 19  # both sides' trimming ran


def test_sentence_split_mode_cuts_at_sentence_boundaries():
    d = dictionary()
    ds, _ = dataset(d, [[3, 4, 5, 2]], tokens_per_sample=40, split_mode="sentence")
    first = d.nspecial
    counts = {3: 0, 7: 0, 12: 0}
    for epoch in range(1, 601):
        ds.set_epoch(epoch)
        a, b, swapped = ds.build(0, np.random.default_rng([ds.seed, epoch, 0]))
        a = b if swapped else a
        counts[len(a)] += 1
        assert a[0] == first
    for k in counts:  # boundaries after sentence 1, 2, 3: uniform
        assert abs(counts[k] / 600 - 1 / 3) < 0.07


def test_bad_split_mode_and_empty_corpus():
    d = dictionary()
    with pytest.raises(ValueError, match="--sop-split='words'"):
        dataset(d, [[5]], split_mode="words")
    with pytest.raises(ValueError, match="no document has 2 or more tokens"):
        dataset(dictionary(), [[1], [1]])


def test_masking_follows_the_official_rule():
    d = dictionary()
    mask_idx = d.add_symbol("<mask>")
    specials = [d.bos(), d.eos(), d.pad()]
    # count = min(max_pred, max(1, round(0.15 * n))): hand table
    for n, want in [(1, 1), (3, 1), (10, 2), (20, 3), (40, 6), (100, 15), (200, 20)]:
        toks = np.array([d.bos()] + list(range(10, 10 + n)) + [d.eos(), d.eos(), d.eos()])
        out, tgt = mask_tokens(toks, np.random.default_rng(n), specials, mask_idx, d.nspecial, len(d),
                               0.15, 20, d.pad())
        assert (tgt != d.pad()).sum() == want, n
    rng = np.random.default_rng(5)
    toks = np.array([d.bos()] + list(range(10, 110)) + [d.eos(), d.eos()] + list(range(200, 300)) + [d.eos()])
    kinds = {"mask": 0, "keep": 0, "random": 0}
    for _ in range(400):
        out, tgt = mask_tokens(toks, rng, specials, mask_idx, d.nspecial, len(d), 0.15, 1000, d.pad())
        sel = tgt != d.pad()
        assert sel.sum() == 30
        assert not np.isin(toks[sel], specials).any()  # never a special token
        assert (tgt[sel] == toks[sel]).all()  # the target is the original token
        assert (out[~sel] == toks[~sel]).all()  # nothing else changes
        kinds["mask"] += (out[sel] == mask_idx).sum()
        kinds["keep"] += (out[sel] == toks[sel]).sum()
        rnd = out[sel][(out[sel] != mask_idx) & (out[sel] != toks[sel])]
        assert ((rnd >= d.nspecial) & (rnd < len(d)) & (rnd != mask_idx)).all()
        kinds["random"] += len(rnd)
    total = 400 * 30
    assert abs(kinds["mask"] / total - 0.8) < 0.02
    # a random draw can hit the original token (1 in ~400), which then counts as "keep"
    assert abs(kinds["keep"] / total - 0.1) < 0.015
    assert abs(kinds["random"] / total - 0.1) < 0.015


@pytest.mark.parametrize("layout", ["roberta", "bert"])
def test_segment_ids_the_model_sees(layout):
    """A collated SOP batch through folnet_tiny: type ids 0 on <s> A </s>, 1 on </s> B </s>;
    bert layout (the official [CLS] A [SEP] B [SEP], dataset.py:328-329) with --folnet-segments
    bert: 0 on <s> A </s>, 1 on B </s>."""
    d = dictionary(60)
    ds, _ = dataset(d, [[5, 4, 6], [3, 3], [9]], tokens_per_sample=20, layout=layout)
    ds.set_epoch(2)
    batch = ds.collater([ds[i] for i in range(len(ds))])
    assert max(len(ds[i]["source"]) for i in range(len(ds))) <= 20
    model, _ = build("folnet_tiny", d, folnet_segments=layout)
    seen = []
    hook = model.encoder.core.embed_types.register_forward_hook(lambda m, inp, out: seen.append(inp[0].clone()))
    model(**batch["net_input"], features_only=True)
    hook.remove()
    types = seen[0]
    src = batch["net_input"]["src_tokens"]
    assert len(batch["sop_target"]) == len(ds) and set(batch["sop_target"].tolist()) <= {0, 1}
    for r in range(len(src)):
        real = src[r].ne(d.pad())
        n = int(real.sum())
        a, b = split_layout(src[r][:n], d.bos(), d.eos(), layout)
        want = [0] * (1 + len(a) + 1) + [1] * ((1 if layout == "roberta" else 0) + len(b) + 1)
        assert types[r][:n].tolist() == want
        assert len(a) > 0 and len(b) > 0


def test_bad_inputs_are_one_line_errors(tmp_path):
    from nesyseq.plugins.tasks.mlm_sop import MlmSopConfig, MlmSopTask
    with pytest.raises(FileNotFoundError, match=f"--task mlm_sop: {tmp_path}/dict.txt not found"):
        MlmSopTask.setup_task(MlmSopConfig(data=str(tmp_path), seed=1))
    d = dictionary()
    d.save(str(tmp_path / "dict.txt"))
    task = MlmSopTask.setup_task(MlmSopConfig(data=str(tmp_path), seed=1))
    with pytest.raises(FileNotFoundError, match=f"no binarized split 'train' at {tmp_path}/train.bin/.idx"):
        task.load_dataset("train")
    # a line without its trailing </s> (not binarized by fairseq-preprocess)
    lines = corpus(d, [[4, 5]])
    lines.items[1] = lines.items[1][:-1]
    ds = SentenceOrderDataset(lines, d, d.add_symbol("<mask>"), 32, name="corpus/train")
    with pytest.raises(ValueError, match="corpus/train: line 2 does not end in </s>"):
        ds[0]
