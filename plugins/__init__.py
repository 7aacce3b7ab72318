"""nesyseq plugins for fairseq, one sub-package per registry kind: models (with their layers),
tasks, criterions, optimizers (optim), lr schedulers (lr_scheduler) and text encoders.

Importing this package registers everything with fairseq's registries and
allow-lists the exact classes that fairseq checkpoints pickle, so checkpoints
load with torch's default ``weights_only=True``.
"""
from plugins import checkpoint_safety  # noqa: F401  (registers safe globals first)
from plugins import fairseq_fixes  # noqa: F401  (keep fairseq's remainder batches)
from plugins import cpu_distributed  # noqa: F401,E402  (SLURM multi-task fairseq on CPU)
from plugins import layers, models, tasks, criterions, optim, lr_scheduler, encoders  # noqa: F401,E402
# plugins.converters (nesyseq convert ...) is imported by its commands only, never by fairseq-train
