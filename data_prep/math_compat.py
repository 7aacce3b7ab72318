"""Import DeepMind's ``mathematics_dataset`` generator under sympy 1.14 / numpy 1.26.

The generator (mathematics-dataset 1.0.1, last released 2019) was written for
sympy ~1.2 and numpy < 1.20.  Two names it imports at module level are gone:

* ``from sympy.solvers.diophantine import base_solution_linear`` -- since sympy
  1.6 ``sympy.solvers.diophantine`` is a package and the function lives in its
  submodule ``sympy.solvers.diophantine.diophantine``.  Note that the *attribute*
  ``sympy.solvers.diophantine`` is shadowed by the function ``diophantine`` (the
  ``sympy.solvers`` package re-exports it), so the alias has to be set on the
  package object found in ``sys.modules``, not via attribute access.
* ``numpy.object`` (used as ``dtype=np.object``) was removed in numpy 1.24; it
  was always just the builtin ``object``.

:func:`load_generator` applies both aliases (idempotently, only when missing)
and returns ``mathematics_dataset.modules.modules``.  Nothing else is patched:
the problems are DeepMind's, unchanged.
"""
from __future__ import annotations

import importlib
import sys
import warnings


def apply_aliases() -> None:
    """Install the two compatibility aliases; a no-op where they already exist."""
    import numpy

    # ``hasattr(numpy, "object")`` itself emits a FutureWarning on numpy 1.2x.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        has_object = "object" in numpy.__dict__
    if not has_object:
        numpy.object = object  # type: ignore[attr-defined]

    importlib.import_module("sympy.solvers.diophantine")
    package = sys.modules["sympy.solvers.diophantine"]
    if not hasattr(package, "base_solution_linear"):
        impl = importlib.import_module("sympy.solvers.diophantine.diophantine")
        setattr(package, "base_solution_linear", impl.base_solution_linear)  # the name sympy < 1.7 exported


def load_generator():
    """Return ``mathematics_dataset.modules.modules`` (train/test/test_extra)."""
    apply_aliases()
    from mathematics_dataset.modules import modules  # noqa: E402  (after aliases)

    return modules


def generate_settings():
    """Return ``mathematics_dataset.generate_settings`` (max lengths)."""
    apply_aliases()
    from mathematics_dataset import generate_settings as settings

    return settings
