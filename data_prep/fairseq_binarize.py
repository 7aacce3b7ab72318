"""fairseq-preprocess for every pipeline of data_prep (math, QA, WMT): one wrapper.

Runs fairseq's preprocess in this process (no second Python start) with a joined dictionary and
the mmap dataset format, and leaves the ``fairseq_cli.preprocess`` logger as it found it (each
call adds a log-file handler, which is closed again here).
"""
import logging
from pathlib import Path
from typing import Optional, Sequence

from nesyseq.common.errors import UserError


def fairseq_preprocess(dest: Path, trainpref: Path, validpref: Optional[Path] = None, testprefs: Sequence[Path] = (),
                       source_lang: str = "src", target_lang: str = "tgt", srcdict: Optional[Path] = None,
                       workers: int = 1, verbose: bool = False) -> None:
    """Binarize ``trainpref``/``validpref``/``testprefs`` (``PREFIX.{source_lang,target_lang}`` text
    files) into ``dest`` with one joined dictionary, built from train or read from ``srcdict``.
    fairseq names the test prefixes test, test1, test2, ...  ``verbose``: fairseq's INFO lines too.
    A failure is a ``UserError`` naming ``dest``."""
    from fairseq import options
    from fairseq_cli import preprocess

    argv = ["--source-lang", source_lang, "--target-lang", target_lang, "--trainpref", str(trainpref),
            "--destdir", str(dest), "--joined-dictionary", "--workers", str(max(1, int(workers))),
            "--dataset-impl", "mmap"]
    if validpref is not None:
        argv += ["--validpref", str(validpref)]
    if testprefs:
        argv += ["--testpref", ",".join(str(p) for p in testprefs)]
    if srcdict is not None:
        argv += ["--srcdict", str(srcdict)]
    args = options.get_preprocessing_parser().parse_args(argv)
    logger = logging.getLogger("fairseq_cli.preprocess")
    before, level = list(logger.handlers), logger.level
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        preprocess.main(args)
    except (OSError, ValueError, RuntimeError, AssertionError) as exc:
        raise UserError(f"fairseq-preprocess failed for {dest}: {exc}") from None
    finally:
        for h in logger.handlers[:]:      # preprocess.main adds a FileHandler per call
            if h not in before:
                logger.removeHandler(h)
                h.close()
        logger.setLevel(level)
