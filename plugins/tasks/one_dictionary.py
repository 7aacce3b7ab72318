"""A task whose source and target share one dictionary (``entailment_pairs``, ``mlm_sop``)."""
from fairseq.tasks import FairseqTask


class OneDictionaryTask(FairseqTask):
    """``FairseqTask`` with ``self.dictionary`` as both the source and the target dictionary."""

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary
