"""Checkpoint converters, every ``nesyseq convert`` command: the authors' FOLNet checkpoints
(``folnet_official``), a trained checkpoint carried to another dictionary and depth
(``warm_start``), and a trained checkpoint's slim weights for re-evaluation (``export``).  They
are commands, not fairseq plugins: ``import plugins`` (and so ``fairseq-train --user-dir``) never
imports this package; each command imports its module.
"""
