"""Hydra search-path plugin: lets ``fairseq-hydra-train`` find nesyseq's configs.

Hydra imports every module under the ``hydra_plugins`` namespace package.  This
one appends the repository's ``configs/`` folder, so
``fairseq-hydra-train --config-name math_tp_transformer`` and
``+model=tp_transformer_math`` resolve without ``--config-dir``.
"""
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


class NesyseqSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="nesyseq", path=f"file://{CONFIG_DIR}")
