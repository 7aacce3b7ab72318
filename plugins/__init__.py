"""nesyseq plugins for fairseq, one sub-package per registry kind: models (with their layers),
tasks, criterions, optimizers (optim), lr schedulers (lr_scheduler) and text encoders.

Importing this package registers everything with fairseq's registries and allow-lists the exact
classes that fairseq checkpoints pickle, so checkpoints load with torch's default
``weights_only=True``.  It patches nothing: the fixes of fairseq bugs (``plugins.patches``) are
applied by ``user_dir`` when fairseq loads it, or by calling ``plugins.patches.apply_all()``.
"""
from nesyseq.plugins import checkpoint_safety  # noqa: F401  (registers safe globals first)
from nesyseq.plugins import layers, models, tasks, criterions, optim, lr_scheduler, encoders  # noqa: F401,E402
# the converters (nesyseq convert ...) live in converters/, a floor above: fairseq-train never imports them
