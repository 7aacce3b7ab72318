"""Import every module of a plugin sub-package, so that each registers itself.

This is fairseq's own pattern (``fairseq/models/__init__.py``): a new model,
task or criterion file needs no edit anywhere else.
"""
import importlib
import pkgutil


def import_all(package_name: str, package_path) -> None:
    for info in sorted(pkgutil.iter_modules(package_path), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package_name}.{info.name}")
