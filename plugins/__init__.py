"""nesyseq plugins for fairseq: layers, models, tasks, criterions and text encoders.

Importing this package registers everything with fairseq's registries and
allow-lists the exact classes that fairseq checkpoints pickle, so checkpoints
load with torch's default ``weights_only=True``.
"""
from nesyseq.plugins import checkpoint_safety  # noqa: F401  (registers safe globals first)
from nesyseq.plugins import fairseq_fixes  # noqa: F401  (keep fairseq's remainder batches)
from nesyseq.plugins import cpu_distributed  # noqa: F401,E402  (SLURM multi-task fairseq on CPU)
from nesyseq.plugins import layers, models, tasks, criterions, encoders  # noqa: F401,E402
