"""Our BERT WordPiece tokenizer against the authors' tokenization.py.

tests/fixtures/folnet_official/tokenization.json holds the official
``BertTokenizer`` output (lower-cased and cased) on strings that exercise every
step: control characters, odd whitespace, CJK, accents, never-split specials,
punctuation, words over 100 characters, greedy longest-match pieces.  It was
made by tests/reference/make_folnet_official_fixture.py from the official code.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.data_prep.wordpiece import WordPiece, detokenize

FIX = Path(__file__).resolve().parent / "fixtures" / "folnet_official"
REF = json.loads((FIX / "tokenization.json").read_text())


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_equals_official_tokenizer(case):
    tok = WordPiece(FIX / "wordpiece_vocab.txt", cased=case == "cased")
    for text, want in zip(REF["texts"], REF[case]):
        assert tok.tokenize(text) == want, text


def test_fairseq_bpe_wordpiece():
    from nesyseq import plugins  # noqa: F401  (registers --bpe wordpiece)
    from fairseq.data import encoders
    bpe = encoders.build_bpe(argparse.Namespace(bpe="wordpiece", wordpiece_vocab=str(FIX / "wordpiece_vocab.txt"),
                                                wordpiece_cased=False))
    for text, want in zip(REF["texts"], REF["uncased"]):
        assert bpe.encode(text) == " ".join(want)
    assert bpe.decode(bpe.encode("Unaffable cats ran away.")) == "unaffable cats ran away ."
    assert not bpe.is_beginning_of_word("##s") and bpe.is_beginning_of_word("cat")


def test_cli(tmp_path):
    src = tmp_path / "raw.txt"
    src.write_text("\n".join(REF["texts"][:3] + [""]) + "\n", encoding="utf-8")
    out = tmp_path / "raw.wp"
    proc = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "tokenize", "wordpiece", "--vocab",
                           str(FIX / "wordpiece_vocab.txt"), "--input", str(src), "--output", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().split("\n") == [" ".join(t) for t in REF["uncased"][:3]] + ["", ""]
    missing = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "tokenize", "wordpiece", "--vocab",
                              str(tmp_path / "none.txt"), "--input", str(src), "--output", str(out)],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "none.txt" in missing.stderr and "Traceback" not in missing.stderr


def test_detokenize():
    assert detokenize(["un", "##aff", "##able", "cat", "##s"]) == "unaffable cats"
