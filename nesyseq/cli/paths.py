"""``nesyseq user-dir``: the folder to give fairseq's ``--user-dir``, wherever nesyseq is installed.

    fairseq-train DATA --user-dir "$(nesyseq user-dir)" --arch tp_transformer_tiny ...
"""
import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args) -> int:
    from nesyseq.common.fairseq_cli import USER_DIR

    print(USER_DIR)
    return 0
