"""Thin entry for ``fairseq-train --user-dir user_dir`` (and generate, hydra-train).

All code lives in the installed ``plugins`` package; importing it registers
every nesyseq model, architecture, task and criterion with fairseq.
"""
from nesyseq import plugins  # noqa: F401
