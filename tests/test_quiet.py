"""Quiet by default (nesyseq/common/quiet.py): the third-party messages a fairseq-train of the
pinned versions printed, copied here verbatim from such a run, are filtered; the same text in
another category, any other warning and any other log line still show; NESYSEQ_WARNINGS=all
turns the filters off.  (tests/test_docs_commands.py::test_qa_try_it_runs checks a real run.)"""
import logging
import warnings

import pytest

from nesyseq.common import quiet

SEEN = [  # (category, message) as fairseq-train printed them
    (UserWarning, "hydra.experimental.initialize() is no longer experimental. Use hydra.initialize()"),
    (UserWarning, "\nThe version_base parameter is not specified.\nHydra will assume defaults for version 1.1."),
    (UserWarning, "hydra.experimental.compose() is no longer experimental. Use hydra.compose()"),
    (UserWarning, "In 'config': Usage of deprecated keyword in package header '# @package _group_'.\nSee https://"),
    (UserWarning, "\n'config' is validated against ConfigStore schema with the same name.\nThis behavior is deprecated"),
    (UserWarning, "\nThe strict flag in the compose API is deprecated.\nSee https://hydra.cc/docs/1.2/upgrades"),
    (UserWarning, "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used."),
    (FutureWarning, "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead."),
]


@pytest.fixture
def clean_logger():
    logger = logging.getLogger("fairseq.tasks.text_to_speech")
    before = list(logger.filters)
    yield logger
    logger.filters[:] = before


def _emit(extra=()):
    with warnings.catch_warnings(record=True) as got:   # restores the filters on exit
        warnings.resetwarnings()   # without the ones nesyseq-quiet.pth added at this interpreter's start
        warnings.simplefilter("always")
        on = quiet.install()
        for category, text in SEEN + list(extra):
            warnings.warn(text, category)
    return on, [(w.category, str(w.message)) for w in got]


def test_known_messages_are_filtered_and_nothing_else(monkeypatch, clean_logger):
    monkeypatch.delenv(quiet.OFF, raising=False)
    others = [(UserWarning, "an unrelated UserWarning"),
              (RuntimeWarning, "'pin_memory' argument is set as true but no accelerator is found"),
              (UserWarning, "hydra.experimental.initialize() failed")]
    on, shown = _emit(others)
    assert on and shown == others
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    clean_logger.addHandler(handler)
    try:
        clean_logger.warning("Please install tensorboardX: pip install tensorboardX")
        clean_logger.warning("something else")
    finally:
        clean_logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["something else"]


def test_all_of_them_show_when_asked(monkeypatch, clean_logger):
    monkeypatch.setenv(quiet.OFF, "all")
    on, shown = _emit()
    assert not on and shown == SEEN
