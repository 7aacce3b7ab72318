"""Checkpoint converters, every ``nesyseq convert`` command (``nesyseq.converters``): the authors'
FOLNet checkpoints (``folnet_official``), a trained checkpoint carried to another dictionary and
depth (``warm_start``), and a trained checkpoint's slim weights for re-evaluation (``export``).
They are commands, not fairseq plugins, a floor above ``plugins`` and ``evaluations`` (they read
checkpoints through evaluations/checkpoints.py): ``fairseq-train --user-dir`` never imports them;
each command imports its module.
"""
