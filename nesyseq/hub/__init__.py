"""A Python API for trained nesyseq models: ``nesyseq.load(path)`` returns an object of the model's
family, following fairseq's hub interfaces (``GeneratorHubInterface`` where generation applies).

    import nesyseq
    qa = nesyseq.load("examples/symbolic_qa/exports/stpr_task1")
    qa.answer(["Zelda went to the kitchen.", "Oscar moved to the garden."], "Where is Zelda?")

Families (``loading.FAMILIES``): math (``.solve``, ``.roles``; hub/math.py), qa (``.answer``;
hub/qa.py), wmt (``.translate``; hub/wmt.py), folnet and folnet_lm (``.features``, ``.score``;
hub/folnet.py), tpru (``.entails``; hub/tpru.py).  ``hubconf.py`` at the repository root names the
shipped exports for ``torch.hub.load``.  Importing this package loads neither torch nor fairseq.
"""
from nesyseq.hub.loading import FAMILIES, load

__all__ = ["FAMILIES", "load"]
