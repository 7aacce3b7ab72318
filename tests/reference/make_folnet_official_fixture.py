#!/usr/bin/env python
"""Build the committed FOLNet fixture from the authors' own code.

    python tests/reference/make_folnet_official_fixture.py --official-repo PATH [--out DIR]

PATH is a checkout of https://github.com/tencent-ailab/FOLNet (this script was
run against HEAD e4f9d2a).  The official ``folnet.py`` is *imported* from that
checkout, never copied here.  The script writes into DIR
(default ``tests/fixtures/folnet_official``):

    tiny.pt            state dict of a random official ``FOLNetForPreTraining``
                       (2 layers, ``mixer_ops`` join,mu,cjoin / assoc,trans,prod =
                       our ``jmc.atp``, D1 16, D2 8, 4 heads of 4, FFN 32 / 12,
                       max_position_offset 4, vocabulary 45 padded to 48), saved
                       as the official ``torch.save(net.state_dict())`` does
    tiny.cfg           its config, ``json.dump(config.__dict__)`` as the
                       official utils.save_pretrained_results writes it
    vocab.txt          the 45-token BERT-style vocabulary of the tiny model
    outputs.pt         a fixed two-segment batch (``tok_seq``, ``token_type_ids``,
                       BERT layout ``[CLS] A [SEP] B [SEP]``, no padding) and the
                       official outputs on it in eval mode: ``unary`` (B, T, D1),
                       ``binary`` (B, T, T, D2), ``pooled`` (B, D1), ``mlm``
                       (B, T, V) and ``sop`` (B, 2)
    official_counts.json  parameter counts of the official modules at the
                       released base and large sizes (built on the meta device)
    wordpiece_vocab.txt, tokenization.json
                       the official ``tokenization.BertTokenizer`` (lower-cased and
                       cased) on a few strings, with a small vocabulary of its own

Everything is deterministic (fixed seeds, CPU, fp32): re-running the script
reproduces the files bit for bit.  Every parameter, biases included, is
redrawn from N(0, 0.3) after the official init, so that each weight matters
for the outputs (at the official N(0, 0.02) with zero biases, a wrong mapping
of a bias would go unnoticed).

Runtime shims (the official code targets older PyTorch; none edits their file):
* apex is not needed: ``folnet.py`` falls back to its own LayerNorm.
* ``scipy.linalg.toeplitz`` is used if scipy is installed, otherwise a small
  numpy stand-in with scipy's semantics is registered before the import.
* ``tokenization.py`` imports ``file_utils.cached_path`` (a module that is not
  in the repository; only used to download vocabularies by name): a stand-in
  returning the local path; ``six`` gets a PY3 stand-in if it is missing.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "folnet_official"

# a tiny BERT-style vocabulary: the specials where BERT keeps them relative to
# each other ([PAD] first, [unused*], then [UNK] [CLS] [SEP] [MASK]), then words
VOCAB = (["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
         + list(".,!?'") + ["the", "a", "cat", "dog", "sat", "on", "mat", "it", "was", "happy",
                            "then", "ran", "away", "bird", "sang", "##s", "##ed", "##ing", "un",
                            "##like", "like", "look", "##ly", "slow", "fast", "red", "blue", "sky", "is",
                            "and", "we"])


def tokenizer_vocab():
    """Specials, ASCII punctuation and digits, letters and their ``##`` continuations, a few words."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    punct = [chr(c) for c in range(33, 127) if not chr(c).isalnum()]
    words = ["the", "cat", "sat", "##sat", "##s", "un", "##like", "##ly", "look", "##ed", "caf", "##e", "na",
             "##ive", "\u4e2d", "dash", "\u2014", "ete", "##aff", "##able", "SAT", "##s", "The", "ran", "away"]
    seen, vocab = set(), []
    for w in (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + punct + list("0123456789") + letters
              + ["##" + c for c in letters] + [c.upper() for c in letters] + words):
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    return vocab


def tiny_config_dict(vocab_size: int) -> dict:
    """The official config fields (config_folnet.FOLNetConfig.from_args) at tiny sizes."""
    return {
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "layer_norm_eps": 1e-12, "initializer_range": 0.02,
        "max_position_offset": 4, "absolute_position": False, "relative_position": True,
        "vocab_size": (vocab_size // 8 + 1) * 8, "type_vocab_size": 2, "diag_link": False,
        "num_layers": 2,
        "mixer_ops": {0: None, 1: ("join", "mu", "cjoin"), 2: ("assoc", "trans", "prod")},
        "boolean_type": "mlp", "predicate_dims": (0, 16, 8), "intermediate_dims": (0, 32, 12),
        "num_heads": 4, "head_size": 4, "max_span": 12, "span_dim": 0, "aux_length": 0, "glob_size": 64,
        "span_size": 0, "unit_size": 0, "hidden_size": 16, "pretrain_loss": "MLM.SOP",
    }


def released_config_dict(size: str) -> dict:
    """The released sizes (pretrain_FOLNet.sh; base: 12 layers of 768, 12 heads, FFN 3072)."""
    layers, d1, heads, ffn1 = {"base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096)}[size]
    cfg = tiny_config_dict(30522)  # BERT uncased vocabulary, padded to 30528 by from_args
    cfg.update(max_position_offset=64, num_layers=layers, predicate_dims=(0, d1, 64),
               intermediate_dims=(0, ffn1, 256), num_heads=heads, head_size=64, hidden_size=d1)
    return cfg


def import_official(repo: Path):
    try:
        import scipy.linalg  # noqa: F401
    except ImportError:  # shim: scipy.linalg.toeplitz(c, r), T[i, j] = r[j-i] if j >= i else c[i-j]
        def toeplitz(c, r):
            c, r = np.asarray(c), np.asarray(r)
            i, j = np.indices((len(c), len(r)))
            return np.where(j >= i, r[np.clip(j - i, 0, None)], c[np.clip(i - j, 0, None)])
        scipy = types.ModuleType("scipy")
        linalg = types.ModuleType("scipy.linalg")
        linalg.toeplitz = toeplitz
        scipy.linalg = linalg
        sys.modules["scipy"], sys.modules["scipy.linalg"] = scipy, linalg
    # tokenization.py imports ``file_utils.cached_path`` (not in the repository; used only
    # for downloading vocabularies by name) and ``six`` (for PY2/PY3 checks)
    if "file_utils" not in sys.modules:
        file_utils = types.ModuleType("file_utils")
        file_utils.cached_path = lambda path, cache_dir=None: path
        sys.modules["file_utils"] = file_utils
    try:
        import six  # noqa: F401
    except ImportError:
        six = types.ModuleType("six")
        six.PY2, six.PY3 = False, True
        sys.modules["six"] = six
    sys.path.insert(0, str(repo))
    with contextlib.redirect_stdout(io.StringIO()):  # "Better speed ... apex" notice
        import folnet  # noqa: E402
        import tokenization  # noqa: E402
    from config_folnet import FOLNetConfig
    return folnet, tokenization, FOLNetConfig


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() yields tied tensors once


def batch(vocab):
    """Two sequences of 12 tokens, [CLS] A [SEP] B [SEP], different split points, no padding."""
    ix = {w: i for i, w in enumerate(vocab)}
    a = ["[CLS]", "the", "cat", "sat", "[SEP]", "on", "the", "mat", "and", "it", "ran", "[SEP]"]
    b = ["[CLS]", "we", "look", "##ed", "at", "the", "blue", "sky", "[SEP]", "birds", "sang", "[SEP]"]
    b = [w if w in ix else "[UNK]" for w in b]  # "at", "birds" are not in the vocabulary
    tok = torch.tensor([[ix[w] for w in a], [ix[w] for w in b]])
    types_ = torch.tensor([[0] * 5 + [1] * 7, [0] * 9 + [1] * 3])
    return tok, types_


def atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official-repo", required=True, type=Path, help="checkout of tencent-ailab/FOLNet")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture directory")
    args = ap.parse_args(argv)
    if not (args.official_repo / "folnet.py").is_file():
        ap.error(f"--official-repo {args.official_repo}: no folnet.py there")
    folnet, tokenization, FOLNetConfig = import_official(args.official_repo)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)

    # the tiny model, its random weights, saved as the official code saves them
    config = FOLNetConfig(**tiny_config_dict(len(VOCAB)))
    torch.manual_seed(0)
    net = folnet.FOLNetForPreTraining(config)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.3)
    net.eval()
    state = {k: v.clone() for k, v in net.state_dict().items()}
    atomic_write(args.out / "tiny.pt", lambda p: torch.save(state, p))
    atomic_write(args.out / "tiny.cfg", lambda p: Path(p).write_text(json.dumps(config.__dict__, indent=1)))
    atomic_write(args.out / "vocab.txt", lambda p: Path(p).write_text("".join(w + "\n" for w in VOCAB)))

    # its outputs on the fixed batch (eval mode)
    tok, types_ = batch(VOCAB)
    with torch.no_grad():
        unary, pooled, binary = net.folnet(tok, types_)
        mlm, sop = net.cls(unary, pooled, binary)
    outputs = {"tok_seq": tok, "token_type_ids": types_, "unary": unary, "binary": binary,
               "pooled": pooled, "mlm": mlm, "sop": sop}
    atomic_write(args.out / "outputs.pt", lambda p: torch.save(outputs, p))

    # parameter counts at the released sizes, from the official classes themselves
    counts = {}
    for size in ("base", "large"):
        cfg = FOLNetConfig(**released_config_dict(size))
        with torch.device("meta"):
            whole = folnet.FOLNet(cfg)
            heads = folnet.PreTrainHeads(cfg)
        counts[size] = {
            "vocab_size": cfg.vocab_size,
            "reasoner": count(whole.reasoner),
            "folnet": count(whole),  # encoder + reasoner + pooler
            # MLM head without the decoder weight, which is tied to the word embedding
            "mlm_head": count(heads.heads.predictions) - heads.heads.predictions.decoder.weight.numel(),
            "sop_head": count(heads.heads.seq_relationship),
        }
    atomic_write(args.out / "official_counts.json", lambda p: Path(p).write_text(json.dumps(counts, indent=1)))

    # the official WordPiece tokenizer (lower-cased and cased) on a few strings, with a
    # vocabulary of single characters, continuation pieces and a few words, so that the
    # greedy longest-match-first search and every clean-up step have work to do
    wp_vocab = tokenizer_vocab()
    atomic_write(args.out / "wordpiece_vocab.txt", lambda p: Path(p).write_text("".join(w + "\n" for w in wp_vocab)))
    texts = ["The cat sat on the mat.", "We LOOKED at the blue sky!", "Unlikely, slowly: Cats ran away?",
             "  tabs\tand   spaces  ", "Caf\u00e9 na\u00efve \u4e2d\u6587 sang", "it's a dog's mat",
             "[MASK] the [CLS] cat [SEP] [mask]", "a\x00b c\u200bd e\ufffdf \u00a0 g\u3000h", "x" * 101 + " sat",
             "sat" * 33 + "s", "$5 ^caret `tick\u00bfque? \u2014dash\u2014", "\u00c9T\u00c9 \u1e9ble \u0131i",
             "Unaffable SATs", "\u00f1and\u00fa 3.14 x+y=z"]
    tok_ref = {"texts": texts}
    for name, lower in (("uncased", True), ("cased", False)):
        tokenizer = tokenization.BertTokenizer(str(args.out / "wordpiece_vocab.txt"), do_lower_case=lower)
        tok_ref[name] = [tokenizer.tokenize(t) for t in texts]
    atomic_write(args.out / "tokenization.json", lambda p: Path(p).write_text(json.dumps(tok_ref, indent=1)))
    print(f"wrote {args.out}: " + ", ".join(sorted(os.listdir(args.out))))
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
