"""The class ``nesyseq.load`` returns for each family (``loading.FAMILIES``)."""
from typing import Any, Dict

from nesyseq.hub.folnet import FolnetLM, FolnetModel
from nesyseq.hub.math import MathModel
from nesyseq.hub.qa import QAModel
from nesyseq.hub.tpru import EntailmentModel
from nesyseq.hub.wmt import WMTModel

CLASSES: Dict[str, Any] = {"math": MathModel, "qa": QAModel, "wmt": WMTModel, "folnet": FolnetModel,
           "folnet_lm": FolnetLM, "tpru": EntailmentModel}
