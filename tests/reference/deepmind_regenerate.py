"""Regenerate raw Mathematics Dataset files with DeepMind's own ``generate.py`` pieces.

Independent reference for tests/test_math_data.py: the difficulty of each train split comes
from DeepMind's ``generate._make_entropy_fn(level, 3)`` (generate.py:46-66, levels as in
``init_modules`` at generate.py:98-101), the test splits from ``modules.test()`` /
``modules.test_extra()`` (generate.py:105-106), samples from ``generate.sample_from_module``.
Only the per-job seeding is taken from nesyseq (``job_seed``), since that is what fixes the
random stream.  Run with the PYTHONHASHSEED the generator workers use:

    PYTHONHASHSEED=<hash_seed_for(seed)> python tests/reference/deepmind_regenerate.py SEED JOBS.json

JOBS.json: [[split, module, count], ...]; prints {"split/module": "file text"} as JSON.
"""
import json
import random
import sys

import numpy as np

from nesyseq.data_prep.math_compat import apply_aliases
from nesyseq.data_prep.math_generate import job_seed

LEVEL = {"train-easy": 0, "train-medium": 1, "train-hard": 2}


def main(seed: int, jobs):
    apply_aliases()
    from mathematics_dataset import generate as dm
    from mathematics_dataset.modules import modules
    from sympy.core.cache import clear_cache

    dm.FLAGS(["deepmind_regenerate"])  # parse absl flags with their defaults (filter '')
    out = {}
    for split, module, count in jobs:
        clear_cache()
        s = job_seed(seed, split, module)
        random.seed(s)
        np.random.seed(s % (2 ** 32))
        if split in LEVEL:
            tree = modules.train(dm._make_entropy_fn(LEVEL[split], 3))
        elif split == "interpolate":
            tree = modules.test()
        else:
            tree = modules.test_extra()
        fn = dm._filter_and_flatten(tree)[module]
        lines = []
        for _ in range(count):
            problem, _ = dm.sample_from_module(fn)
            lines += [str(problem.question), str(problem.answer)]
        out[f"{split}/{module}"] = "\n".join(lines) + "\n"
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]), json.load(open(sys.argv[2])))
