"""The package list for setup.cfg's ``package_dir`` mapping: every Python package (and the config
folders) under each mapped folder, as ``nesyseq.<folder>.<sub>``.  Everything else is in setup.cfg."""
import configparser
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent


def package_dirs():
    cfg = configparser.ConfigParser()
    cfg.read(HERE / "setup.cfg")
    lines = [ln.strip() for ln in cfg["options"]["package_dir"].splitlines() if ln.strip()]
    return dict((k.strip(), v.strip()) for k, v in (ln.split("=", 1) for ln in lines))


def packages(mapping):
    found = []
    for name, folder in mapping.items():
        found.append(name)
        for sub in find_namespace_packages(str(HERE / folder), exclude=["*__pycache__*"]):
            full = f"{name}.{sub}"
            if full not in mapping:   # mapped separately (its own folder)
                found.append(full)
    return sorted(set(found))


if __name__ == "__main__":
    setup(packages=packages(package_dirs()), package_dir=package_dirs())
