"""Throughput and peak memory of ``nesyseq prepare wmt`` against the plain pipeline.

    python benchmarks/bench_prepare_wmt.py                  # 1M and 250k generated lines
    python benchmarks/bench_prepare_wmt.py --lines 200000 50000 --bpe-size 8000

Per corpus size, each pipeline runs in its own child process (peak RSS = the max
of the child and of its own children, e.g. fairseq-preprocess workers):

    plain     SentencePieceTrainer (same options) + SentencePieceProcessor.encode in one
              process (what ``spm_encode`` does) + fairseq-preprocess --joined-dictionary
    nesyseq   ``nesyseq prepare wmt --workers 1`` and ``--workers 2``

Prints sentence pairs per second and the ratio nesyseq / plain (goal >= 1.0), and
peak memory for each size (goal: flat in corpus size).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORDS_EN = ("the a house cat dog city river green small old new man woman child book table "
            "water bread reads sees writes eats runs quickly slowly today yesterday and but "
            "not very often council member parliament commission report vote agree").split()


def generate(d: Path, n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    de_map = {w: (w[::-1] + "en").capitalize() if i % 3 == 0 else w[::-1] + "e"
              for i, w in enumerate(WORDS_EN)}
    with open(d / "train.en", "w") as fe, open(d / "train.de", "w") as fd:
        for _ in range(n):
            s = [rng.choice(WORDS_EN) for _ in range(rng.randint(5, 30))]
            fe.write(" ".join(s).capitalize() + ".\n")
            fd.write(" ".join(de_map[w] for w in s).capitalize() + ".\n")
    for split in ("valid", "test"):
        for lang in ("en", "de"):
            with open(d / f"train.{lang}") as f, open(d / f"{split}.{lang}", "w") as g:
                for i, line in zip(range(1000), f):
                    g.write(line)
    return str(d / "train")


PLAIN = r"""
import resource, subprocess, sys, json
import sentencepiece as spm
d, bpe, sample = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spm.set_random_generator_seed(1)
spm.SentencePieceTrainer.train(input=[d + "/train.en", d + "/train.de"], model_prefix=d + "/plain_spm",
    vocab_size=bpe, model_type="bpe", character_coverage=1.0, input_sentence_size=sample,
    shuffle_input_sentence=True, num_threads=1, bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0,
    hard_vocab_limit=False, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=d + "/plain_spm.model")
for split in ("train", "valid", "test"):
    for lang in ("en", "de"):
        with open(f"{d}/{split}.{lang}") as f, open(f"{d}/plain_{split}.{lang}", "w") as g:
            for line in f:
                g.write(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n")
subprocess.run([sys.argv[4], "--source-lang", "en", "--target-lang", "de", "--joined-dictionary",
    "--trainpref", d + "/plain_train", "--validpref", d + "/plain_valid", "--testpref", d + "/plain_test",
    "--destdir", d + "/plain_bin", "--workers", "1"], check=True, stdout=subprocess.DEVNULL)
print(json.dumps({"rss_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

OURS = r"""
import resource, sys, json
from nesyseq.cli.main import main
d, bpe, sample, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rc = main(["prepare", "wmt", "--train", d + "/train", "--valid", d + "/valid", "--test", d + "/test",
           "--out", d + "/ours_" + workers, "--bpe-size", bpe, "--spm-sample", sample,
           "--workers", workers, "--no-progress", "--max-len", "0", "--max-ratio", "0"])
assert rc == 0
print(json.dumps({"rss_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def run_child(code: str, args) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    wall = time.perf_counter() - t0
    r = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "peak_rss_mib": max(r["rss_self"], r["rss_children"]) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 250_000])
    ap.add_argument("--bpe-size", type=int, default=8000)
    ap.add_argument("--spm-sample", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=1, help="best-of-N wall time")
    a = ap.parse_args()
    preprocess = str(Path(sys.executable).parent / "fairseq-preprocess")
    rows = []
    for n in a.lines:
        with tempfile.TemporaryDirectory(prefix="bench_wmt_") as tmp:
            d = Path(tmp)
            generate(d, n)
            res = {}
            for name, code, extra in (("plain", PLAIN, [preprocess]), ("nesyseq w1", OURS, [1]),
                                      ("nesyseq w2", OURS, [2])):
                best = None
                for _ in range(a.repeat):
                    r = run_child(code, [d, a.bpe_size, a.spm_sample, *extra])
                    best = r if best is None or r["wall_s"] < best["wall_s"] else best
                res[name] = best
            for name, r in res.items():
                sps = n / r["wall_s"]
                ratio = res["plain"]["wall_s"] / r["wall_s"]
                rows.append((n, name, sps, ratio, r["peak_rss_mib"]))
                print(f"{n:>9d} lines  {name:11s} {sps:10.0f} pairs/s  x{ratio:5.2f} vs plain  "
                      f"peak RSS {r['peak_rss_mib']:7.1f} MiB", flush=True)
    print("\n| lines | pipeline | pairs/s | vs plain | peak RSS MiB |\n|---|---|---|---|---|")
    for n, name, sps, ratio, rss in rows:
        print(f"| {n} | {name} | {sps:.0f} | {ratio:.2f}x | {rss:.0f} |")


if __name__ == "__main__":
    main()
