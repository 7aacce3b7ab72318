"""BERT WordPiece tokenization, for text fed to converted official FOLNet checkpoints.

    nesyseq tokenize wordpiece --vocab vocab.txt --input raw.txt --output raw.wp [--cased]

Writes one line of space-separated word pieces per input line; then
``fairseq-preprocess --only-source --srcdict DIR/dict.txt`` (the ``dict.txt`` of
``nesyseq convert folnet``) binarizes it.  fairseq itself can apply the same
tokenizer with ``--bpe wordpiece --wordpiece-vocab vocab.txt``
(``plugins/encoders/wordpiece_bpe.py``), e.g. in ``fairseq-interactive``.

The two steps of BERT's tokenizer, as the authors' tokenization.py runs them
(the FOLNet checkpoints were trained with it, utils_init.py:101):
1. basic: drop NUL, U+FFFD and control characters; every whitespace character
   becomes a space; spaces around CJK ideographs; split on whitespace; unless
   ``--cased``, lower-case and strip accents (NFD, drop combining marks) every
   word except [UNK] [SEP] [PAD] [CLS] [MASK]; split off every punctuation
   character (Unicode P*, and all non-alphanumeric printable ASCII).
2. WordPiece: each word, greedy longest match first from the left; pieces after
   the first carry ``##``; a word with no full cover, or longer than 100
   characters, is [UNK].
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Iterable, List

NEVER_SPLIT = frozenset(["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"])
MAX_WORD_CHARS = 100
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def read_vocab(path) -> dict:
    """vocab.txt (one token a line, id = line number) -> {token: id}; a bad file is one line (OSError/ValueError)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the WordPiece vocabulary ({exc.strerror})") from None
    vocab = {}
    for i, line in enumerate(text.splitlines()):
        vocab.setdefault(line.strip(), i)
    if "[UNK]" not in vocab:
        raise ValueError(f"{path}: no [UNK] token in the WordPiece vocabulary")
    return vocab


def _is_space(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 126 and not ch.isalnum():  # all printable non-alphanumeric ASCII
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def basic_words(text: str, lowercase: bool = True) -> List[str]:
    """Step 1: clean, split on whitespace, CJK and punctuation (lower-case + strip accents)."""
    chars = []
    for ch in text:
        if ch in ("\x00", "\ufffd") or _is_control(ch):
            continue
        if _is_space(ch):
            chars.append(" ")
        elif _is_cjk(ch):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    words = []
    for word in "".join(chars).split():
        if word in NEVER_SPLIT:
            words.append(word)
            continue
        if lowercase:
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                           if unicodedata.category(c) != "Mn")
        piece = ""
        for ch in word:
            if _is_punct(ch):
                if piece:
                    words.append(piece)
                    piece = ""
                words.append(ch)
            else:
                piece += ch
        if piece:
            words.append(piece)
    return [w for w in " ".join(words).split()]


def wordpieces(word: str, vocab) -> List[str]:
    """Step 2: greedy longest-match-first cover of one word, or [UNK]."""
    if len(word) > MAX_WORD_CHARS:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


class WordPiece:
    def __init__(self, vocab_path, cased: bool = False):
        self.vocab = read_vocab(vocab_path)
        self.lowercase = not cased

    def tokenize(self, text: str) -> List[str]:
        return [p for w in basic_words(text, self.lowercase) for p in wordpieces(w, self.vocab)]


def detokenize(pieces: Iterable[str]) -> str:
    """Word pieces -> text with ``##`` continuations glued on (BERT's own decode)."""
    return " ".join(pieces).replace(" ##", "").replace("##", "").strip()


# ----------------------------------------------------------------------------- CLI

def add_arguments(parser) -> None:
    parser.add_argument("--vocab", required=True, type=Path, help="BERT vocab.txt (one token a line)")
    parser.add_argument("--input", required=True, type=Path, help="raw text, one example a line")
    parser.add_argument("--output", required=True, type=Path, help="space-separated word pieces, a line per input line")
    parser.add_argument("--cased", action="store_true", help="keep case and accents (for cased vocabularies)")


def run(args) -> int:
    from nesyseq.common.atomic import atomic_write
    from nesyseq.common.errors import UserError
    try:
        tok = WordPiece(args.vocab, cased=args.cased)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    lineno = 0

    def write(tmp: str) -> None:
        nonlocal lineno
        with open(args.input, encoding="utf-8", newline="\n") as src, open(tmp, "w", encoding="utf-8") as dst:
            for line in src:
                lineno += 1
                dst.write(" ".join(tok.tokenize(line.rstrip("\n"))) + "\n")

    try:
        atomic_write(args.output, write)
    except UnicodeDecodeError as exc:
        raise UserError(f"{args.input}:{lineno + 1}: not UTF-8 ({exc.reason})") from None
    except OSError as exc:
        raise UserError(f"{exc.filename}: {exc.strerror}") from None
    return 0
