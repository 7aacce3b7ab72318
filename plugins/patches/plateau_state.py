"""A resumed reduce_lr_on_plateau forgets how long it has waited.

``ReduceLROnPlateauLRSchedule.state_dict`` (fairseq/optim/lr_scheduler/reduce_lr_on_plateau.py:107)
saves only ``best`` and ``last_epoch``.  torch's scheduler also counts the epochs without
improvement (``num_bad_epochs``) and its cooldown; a run resumed from a checkpoint restarts that
count at 0, so it halves the lr up to ``--lr-patience`` epochs later than the uninterrupted run.
And fairseq_cli/train.py saves the end-of-epoch checkpoint inside train() (:345, validate_and_save
-> checkpoint_utils.save_checkpoint, :442) and only then steps the scheduler with that epoch's
valid loss (:210); a run resumed from that checkpoint never takes the step.  So an end-of-epoch
save also records the step still owed (the epoch and its valid loss, the value train.py hands
lr_step), and a scheduler loaded from it takes that step at its first step() call, which
Trainer.load_checkpoint makes (trainer.py:642) after it has loaded the optimizer (:630) whose lr
the step may halve.  A checkpoint written without them owes no step.
"""
from nesyseq.plugins.patches._version import check, mark_fixed

FAIRSEQ_VERSIONS = ("0.12.3",)
_PLATEAU_KEYS = ("num_bad_epochs", "cooldown_counter")


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install()


def _install() -> None:
    from fairseq import checkpoint_utils
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule

    cls = ReduceLROnPlateauLRSchedule
    if getattr(cls.state_dict, "_nesyseq_fixed", False):
        return
    original_state_dict, original_load, original_step = cls.state_dict, cls.load_state_dict, cls.step
    original_save = checkpoint_utils.save_checkpoint

    def state_dict(self):
        state = original_state_dict(self)
        for key in _PLATEAU_KEYS:
            state[key] = int(getattr(self.lr_scheduler, key))
        owed = getattr(self, "_nesyseq_step_owed", None)
        if owed is not None:
            state["step_owed"] = owed
        return state

    def load_state_dict(self, state_dict):
        original_load(self, state_dict)
        for key in _PLATEAU_KEYS:
            if key in state_dict:
                setattr(self.lr_scheduler, key, int(state_dict[key]))
        self._nesyseq_step_on_resume = state_dict.get("step_owed")

    def step(self, epoch, val_loss=None):
        owed = getattr(self, "_nesyseq_step_on_resume", None)
        if owed is not None:
            self._nesyseq_step_on_resume = None
            original_step(self, owed["epoch"], owed["val_loss"])
        return original_step(self, epoch, val_loss)

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        sched = trainer.lr_scheduler
        plateau = isinstance(sched, cls)
        if plateau and val_loss is not None and epoch_itr.end_of_epoch():
            sched._nesyseq_step_owed = {"epoch": int(epoch_itr.epoch), "val_loss": float(val_loss)}
        try:
            return original_save(cfg, trainer, epoch_itr, val_loss)
        finally:
            if plateau:
                sched._nesyseq_step_owed = None

    mark_fixed(state_dict)
    cls.state_dict, cls.load_state_dict, cls.step = state_dict, load_state_dict, step
    checkpoint_utils.save_checkpoint = save_checkpoint


