"""A checkpoint does not say which dictionaries its token ids index.

``Trainer.state_dict`` (fairseq/trainer.py:401-429) saves the weights, the config (whose
``task.data`` is only the training folder's path) and the training state, but not the
dictionaries: a checkpoint then loads on any data folder whose dictionaries have the same
sizes, and decodes garbage with exit status 0.  We add ``extra_state["dictionaries"]``, the size
and sha256 of the symbols of each of the task's dictionaries (nesyseq/common/dictionaries.py), which
the evaluators compare with the data they are given (evaluations/checkpoints.py).
"""
from nesyseq.common.dictionaries import RECORD_KEY, task_fingerprints
from nesyseq.plugins.patches._version import check

FAIRSEQ_VERSIONS = ("0.12.3",)
_MARK = "_nesyseq_dictionary_record"


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install()


def _install() -> None:
    from fairseq.trainer import Trainer

    if getattr(Trainer.state_dict, _MARK, False):
        return
    original = Trainer.state_dict

    def state_dict(self):
        state = original(self)
        record = task_fingerprints(self.task) if self.task is not None else {}
        if record and isinstance(state.get("extra_state"), dict):
            state["extra_state"][RECORD_KEY] = record
        return state

    setattr(state_dict, _MARK, True)
    Trainer.state_dict = state_dict
