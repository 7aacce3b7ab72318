"""nesyseq text encoders for fairseq's ``--bpe`` / ``--tokenizer``; every module here registers itself."""
from nesyseq.plugins._autoimport import import_all

import_all(__name__, __path__)
