"""nesyseq: neuro-symbolic reasoning plugins for fairseq.

One import name: ``nesyseq.plugins`` (what fairseq sees), ``nesyseq.user_dir`` (the ``--user-dir``
entry), ``nesyseq.data_prep``, ``nesyseq.triton_kernels``, ``nesyseq.evaluations``,
``nesyseq.converters``, ``nesyseq.slurm``, ``nesyseq.hub`` (``nesyseq.load``), ``nesyseq.cli`` and
``nesyseq.common``.  An installed nesyseq holds them all in this folder; in a source checkout most
sit beside it, at the repository root, and are found through this package's ``__path__``.
"""
from pathlib import Path as _Path

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "setup.cfg").is_file() and (_checkout / "plugins" / "__init__.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821  (a package's __path__)
del _Path, _checkout


def load(path, family=None, data=None, device=None):
    """A trained checkpoint or export as a Python object of its family (``nesyseq.hub``):
    ``.solve`` (math), ``.answer`` (qa), ``.translate`` (wmt), ``.features`` / ``.score``
    (folnet, folnet_lm), ``.entails`` (tpru).  ``family`` checks which one it is; ``data`` names
    the folder of its dictionary when that is neither beside the file nor in its parent."""
    from nesyseq.hub import load as _load

    return _load(path, family=family, data=data, device=device)
