"""tpr_rnn / stpr forward+backward with the factored TPR memory against the dense one, same process.

The model keeps F = Σ_n P_n ⊗ Q_n ⊗ U_n as rank-one terms (``_FactoredTPR``); the baseline is the
dense (B, E, R, E) tensor updated with eqs. 35/37/39 each sentence (``DenseTPR`` of
tests/test_qa_tpr.py, where it is the test's reference).  Both run the same random bAbI-shaped batch (S sentences of W words, a question),
alternating, best of ``--repeats``; the script prints seconds and the dense/factored ratio, and
checks the two give the same probabilities.

    OMP_NUM_THREADS=1 python benchmarks/bench_qa_tpr.py               # batch 32, 50 sentences
    python benchmarks/bench_qa_tpr.py --sentences 20 --repeats 5
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._babi import story_batch, word_dictionary  # noqa: E402
from benchmarks._timing import Stopwatch  # noqa: E402
import nesyseq.plugins.models.qa_tpr as qt  # noqa: E402
from tests.test_qa_tpr import DenseTPR  # noqa: E402


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def make_batch(d, B, S, W, words, g):
    """Rows of S sentences of W words each, over ``words`` distinct words."""
    return story_batch(d, B, words, g, sentences=lambda: S, words=lambda: W)


def step(model, src, prev):
    model.zero_grad()
    with Stopwatch() as sw:
        out = model(src, torch.full((src.size(0),), src.size(1)), prev)
        p = model.get_normalized_probs(out, log_probs=True)
        p[:, 0, 5].sum().neg().backward()
    return sw.wall, p.detach().exp()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--sentences", type=int, default=50, help="story sentences kept (memory size)")
    ap.add_argument("--words", type=int, default=6, help="words per sentence")
    ap.add_argument("--vocab", type=int, default=40, help="distinct words (symbols m for stpr)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    d = word_dictionary(a.vocab)
    src = make_batch(d, a.batch, a.sentences, a.words, a.vocab, torch.Generator().manual_seed(0))
    prev = torch.full((a.batch, 1), d.eos(), dtype=torch.long)
    print(f"batch {a.batch}, {a.sentences} sentences x {a.words} words, {a.vocab} distinct words, "
          f"{torch.get_num_threads()} thread(s); best of {a.repeats}, forward+backward")
    print("| model | dense F (s) | factored F (s) | dense / factored | max |Δp| |")
    print("|---|---|---|---|---|")
    for name, cls in (("tpr_rnn", qt.TPRRNNModel), ("stpr", qt.SymbolicTPRModel)):
        torch.manual_seed(0)
        model = cls.build_model(qt.TPRConfig(), _Task(d))
        best = {"dense": float("inf"), "factored": float("inf")}
        probs = {}
        for _ in range(a.repeats):
            for kind, mem in (("dense", DenseTPR), ("factored", qt._FactoredTPR)):
                saved, qt._FactoredTPR = qt._FactoredTPR, mem
                try:
                    t, probs[kind] = step(model, src, prev)
                finally:
                    qt._FactoredTPR = saved
                best[kind] = min(best[kind], t)
        diff = (probs["dense"] - probs["factored"]).abs().max().item()
        print(f"| {name} | {best['dense']:.3f} | {best['factored']:.3f} | "
              f"{best['dense'] / best['factored']:.1f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
