"""fairseq datasets that our tasks read (as fairseq's own live in ``fairseq/data/``): the
sentence-order pairs of ``mlm_sop`` (``sop_pairs``) and the formula pairs of ``entailment_pairs``
(``entailment_pairs``).  No registry kind: a task imports the dataset it builds."""
