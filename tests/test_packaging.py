"""The wheel installs one import name, ``nesyseq`` (plus the ``hydra_plugins`` namespace Hydra's
plugin discovery needs), with the configs and the --user-dir folder inside it."""
import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _source_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore) copied to ``dest``:
    setuptools builds in the source folder (build/, *.egg-info), and the checkout must stay as it is."""
    import shutil

    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.slow  # builds the wheel (setuptools, no dependencies, no network)
def test_the_wheel_has_one_import_name_and_its_data(tmp_path):
    src = _source_copy(tmp_path / "src")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheel = next(tmp_path.glob("nesyseq-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"nesyseq", "hydra_plugins"}, sorted(tops)
    for must in ("nesyseq/__init__.py", "nesyseq/cli/main.py", "nesyseq/common/atomic.py",
                 "nesyseq/plugins/patches/batch_remainder.py", "nesyseq/user_dir/__init__.py",
                 "nesyseq/configs/experiments/math.yaml", "nesyseq/configs/model/tp_transformer_tiny.yaml",
                 "nesyseq/slurm/local_cluster.sh", "hydra_plugins/nesyseq_searchpath/__init__.py"):
        assert must in names, must
    # every Python package of the repository's mapped folders made it in
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    mapping = dict(ln.strip().split(" = ") for ln in cfg["options"]["package_dir"].splitlines() if ln.strip())
    for pkg, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.relative_to(REPO / folder)
            assert "/".join(pkg.split(".") + list(rel.parts)) in names, init
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "nesyseq = nesyseq.cli.main:main" in entry
