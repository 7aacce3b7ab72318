"""Checkpoint converters behind ``nesyseq convert``: the authors' FOLNet checkpoints
(``folnet_official``) and a trained checkpoint carried to another dictionary and depth
(``warm_start``).  They are commands, not fairseq plugins: ``import plugins`` (and so
``fairseq-train --user-dir``) never imports this package; each command imports its module.
"""
