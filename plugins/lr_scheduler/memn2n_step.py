"""``--lr-scheduler memn2n_step``: the learning-rate schedule of end-to-end memory networks.

Sukhbaatar et al. (2015) Sec. 4.2 and their code (facebookarchive/MemNN,
MemN2N-babi-matlab/config_babi.m:10-11,24,29-34 and train.m:9-14): lr η (0.01, or 0.005 with
linear start), halved every 25 epochs, 100 epochs.  With linear start the code first trains
``ls_nepochs`` = 20 epochs at 0.005 without decay (its decay step 21 never fires in 20 epochs),
then restarts the 100-epoch schedule at 0.005 (train_linear_start.m:13-28): 120 epochs in all.

    lr(epoch) = lr                                   epoch <= constant_epochs
              = lr * shrink ** floor(e / decay)      e = epoch - constant_epochs  (fairseq epochs from 1)

so ``--lr 0.005 --constant-epochs 20 --lr-decay-epochs 25 --lr-shrink 0.5 --max-epoch 120`` is the
reference's LS run and ``--lr 0.01 --constant-epochs 0 ... --max-epoch 100`` its run without LS.
"""
from dataclasses import dataclass, field
from typing import List

from fairseq.dataclass import FairseqDataclass
from fairseq.optim.lr_scheduler import FairseqLRScheduler, register_lr_scheduler
from omegaconf import II


@dataclass
class MemN2NStepConfig(FairseqDataclass):
    lr_decay_epochs: int = field(default=25, metadata={"help": "halve (x --lr-shrink) every this many epochs"})
    lr_shrink: float = field(default=0.5, metadata={"help": "decay factor"})
    constant_epochs: int = field(default=0, metadata={
        "help": "epochs at the initial lr before the decay count starts (set it to --linear-start-epochs "
                "to restart the schedule after linear start, as the reference code)"})
    lr: List[float] = II("optimization.lr")


def memn2n_lr(base: float, epoch: int, decay_epochs: int, shrink: float, constant_epochs: int) -> float:
    e = epoch - constant_epochs
    if e <= 0:
        return base
    return base * shrink ** (e // decay_epochs)


@register_lr_scheduler("memn2n_step", dataclass=MemN2NStepConfig)
class MemN2NStepSchedule(FairseqLRScheduler):
    def __init__(self, cfg, optimizer):
        super().__init__(cfg, optimizer)
        if len(cfg.lr) != 1:
            raise ValueError("--lr-scheduler memn2n_step takes a single --lr")
        if cfg.lr_decay_epochs < 1:
            raise ValueError("--lr-decay-epochs must be >= 1")
        self.lr = cfg.lr[0]
        self.optimizer.set_lr(self.lr)

    def state_dict(self):
        return {"lr": self.lr, "best": self.best}

    def load_state_dict(self, state_dict):
        self.lr = state_dict.get("lr", self.lr)
        if "best" in state_dict:  # FairseqLRScheduler's own best (None until a validation)
            self.best = state_dict["best"]

    def step_begin_epoch(self, epoch):
        self.lr = memn2n_lr(self.cfg.lr[0], epoch, self.cfg.lr_decay_epochs, self.cfg.lr_shrink,
                            self.cfg.constant_epochs)
        self.optimizer.set_lr(self.lr)
        return self.optimizer.get_lr()

    def step_update(self, num_updates):
        self.optimizer.set_lr(self.lr)
        return self.optimizer.get_lr()
