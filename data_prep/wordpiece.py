"""``nesyseq tokenize wordpiece``: BERT WordPiece tokenization of raw text files.

    nesyseq tokenize wordpiece --vocab vocab.txt --input raw.txt --output raw.wp [--cased]

Writes one line of space-separated word pieces per input line; then
``fairseq-preprocess --only-source --srcdict DIR/dict.txt`` (the ``dict.txt`` of
``nesyseq convert folnet``) binarizes it.  The tokenizer is nesyseq.common/wordpiece.py, the
one fairseq's ``--bpe wordpiece --wordpiece-vocab vocab.txt`` applies too.
"""
from pathlib import Path

from nesyseq.common.wordpiece import WordPiece


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
