"""Hydra search-path plugin: lets ``fairseq-hydra-train`` find nesyseq's configs.

Hydra imports every module under the ``hydra_plugins`` namespace package.  This
one appends the repository's ``configs/`` folder, so
``fairseq-hydra-train --config-name math_tp_transformer`` and
``+model=tp_transformer_math`` resolve without ``--config-dir``.
"""
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


def _config_dir() -> Path:
    """nesyseq's configs/: inside the installed package, or at the root of a source checkout.
    Found without importing nesyseq (Hydra imports every plugin, for any program)."""
    from importlib.util import find_spec

    spec = find_spec("nesyseq")
    roots = [Path(spec.origin).resolve().parent] if spec and spec.origin else []
    roots.append(Path(__file__).resolve().parents[2])
    for root in roots:
        for candidate in (root / "configs", root.parent / "configs"):
            if (candidate / "experiments").is_dir():
                return candidate
    return roots[-1] / "configs"


CONFIG_DIR = _config_dir()


class NesyseqSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="nesyseq", path=f"file://{CONFIG_DIR}")
