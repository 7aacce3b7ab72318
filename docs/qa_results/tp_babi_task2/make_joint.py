"""Join the text of several prepared bAbI-style tasks into one fairseq data folder.

    python make_joint.py DATA OUT TASK [TASK ...]

DATA is a `prepare qa` output (DATA/text/task{N}/{train,valid,test}.{src,tgt}).  OUT gets
train = all tasks' train, valid = all tasks' valid (one file each, task after task; fairseq
shuffles the train batches), `test` = the LAST task's test and `test_t{N}` = each task's own
test, binarized with one dictionary (the union of the tasks' dict.txt counts).  bAbI's "joint"
setting (Weston et al. 2015), used here as a curriculum: task 1 ("where is P") is the second
hop of task 2 ("where is the O" = the room of its last holder at the time).
"""
import collections
import json
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.data_prep.qa_pipeline import _binarize  # noqa: E402
from nesyseq.common.atomic import atomic_write_bytes  # noqa: E402


def main(data, out, tasks):
    data, out = pathlib.Path(data), pathlib.Path(out)
    text = out / "text"
    text.mkdir(parents=True, exist_ok=True)
    dirs = [data / "text" / f"task{t}" for t in tasks]
    for d in dirs:
        if not (d / "dict.txt").is_file():
            raise SystemExit(f"{d}/dict.txt: not a prepared task folder")
    counts = collections.Counter()
    for d in dirs:
        for line in (d / "dict.txt").read_text().splitlines():
            w, c = line.rsplit(" ", 1)
            counts[w] += int(c)
    words = sorted(counts, key=lambda w: (-counts[w], w))
    atomic_write_bytes(str(text / "dict.txt"), "".join(f"{w} {counts[w]}\n" for w in words).encode())
    for split in ("train", "valid"):
        for ext in ("src", "tgt"):
            blob = b"".join((d / f"{split}.{ext}").read_bytes() for d in dirs)
            atomic_write_bytes(str(text / f"{split}.{ext}"), blob)
    extra = []
    for t, d in zip(tasks, dirs):
        for ext in ("src", "tgt"):
            shutil.copyfile(d / f"test.{ext}", text / f"test_t{t}.{ext}")
            if t == tasks[-1]:
                shutil.copyfile(d / f"test.{ext}", text / f"test.{ext}")
        extra.append(f"test_t{t}")
    dest = out / "bin"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    _binarize(text, dest, text / "dict.txt", extra)
    meta = json.loads((data / "bin" / f"task{tasks[-1]}" / "qa_meta.json").read_text())
    meta.update(task="+".join(tasks), joint_of=[str(data / "bin" / f"task{t}") for t in tasks])
    atomic_write_bytes(str(dest / "qa_meta.json"), (json.dumps(meta, indent=1) + "\n").encode())
    atomic_write_bytes(str(dest / "unseen.txt"), b"")
    print(dest)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
