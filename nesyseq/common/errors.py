"""Errors that the ``nesyseq`` command reports as one line, without a traceback."""


class UserError(Exception):
    """Bad input from the user; the message names the file, line or option."""
