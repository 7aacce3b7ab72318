"""nesyseq criterions; every module here is imported (and registered) on package import."""
from nesyseq.plugins._autoimport import import_all

import_all(__name__, __path__)
