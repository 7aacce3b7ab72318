"""Quiet by default: third-party messages known to be harmless, filtered by their exact text.

Every ``fairseq-train`` of the pinned versions printed, before its first update:

* Hydra's deprecation notices, raised while fairseq composes its config from the command line
  (``fairseq/dataclass/initialize.py`` and ``utils.py`` call ``hydra.experimental``, strict
  compose, ``# @package _group_`` headers, the schema of the same name, no ``version_base``);
* ``Please install tensorboardX`` (an INFO log line of ``fairseq/tasks/text_to_speech.py`` when
  it is imported; no nesyseq command logs to TensorBoard);
* torch's ``'pin_memory' argument is set as true but no accelerator is found`` (fairseq's data
  loader pins memory on every device; on a CPU it does nothing);
* torch's FutureWarning on ``torch.cuda.amp.autocast(args...)`` (``fairseq_task.py`` enters the
  context on every step, also on a CPU, where it is off).

:func:`install` adds a ``warnings`` filter for each of those texts and a logging filter for the
tensorboardX line; nothing else is hidden: other warnings, every error and every other log line
stay.  ``NESYSEQ_WARNINGS=all`` in the environment turns the filters off.  Called by the
``nesyseq`` command and by ``user_dir`` (so ``fairseq-* --user-dir`` has them from its plugins
on).  fairseq logs the tensorboardX line while it is imported, before any plugin: ``make venv``
therefore adds ``nesyseq-quiet.pth`` to the venv, which runs this file at interpreter start (by
its path: no package of ours is imported then).  Standard library only.
"""
import logging
import os
import warnings

# (category, regex matching the start of the message); the categories are the ones raised, so
# that another message of the same module still shows
KNOWN_WARNINGS = (
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),
    (UserWarning, r"In '[^']*': Usage of deprecated keyword in package header '# @package _group_'"),
    (UserWarning, r"\s*'[^']*' is validated against ConfigStore schema with the same name"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated"),
)
KNOWN_LOG_LINES = {"fairseq.tasks.text_to_speech": "Please install tensorboardX"}
OFF = "NESYSEQ_WARNINGS"


class _DropLine(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


def install() -> bool:
    """Add the filters (once); False when ``NESYSEQ_WARNINGS=all`` keeps every message."""
    if os.environ.get(OFF, "").strip().lower() == "all":
        return False
    for category, message in KNOWN_WARNINGS:
        # Hydra14MigrationWarning subclasses UserWarning; filterwarnings matches subclasses
        warnings.filterwarnings("ignore", message=message, category=category)
    for name, prefix in KNOWN_LOG_LINES.items():
        logger = logging.getLogger(name)
        if not any(type(f).__name__ == "_DropLine" and getattr(f, "prefix", None) == prefix for f in logger.filters):
            logger.addFilter(_DropLine(prefix))
    return True


if __name__ == "nesyseq_quiet_startup":   # run by nesyseq-quiet.pth at interpreter start
    install()
