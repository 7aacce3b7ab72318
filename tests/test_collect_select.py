"""``nesyseq collect`` over hand-written evaluate tables: the member of lowest ``valid_loss`` per
row (ties listed), and members whose ``valid_loss`` is empty (a checkpoint saved without one).

Reference: the picks and means written out by hand for the tables below."""
import csv
import json

from nesyseq.slurm.collect import collect

HEADER = "model,task,seed,names,split,subset,beta,error,questions,ckpt,data,valid_loss"


def _run_dir(tmp_path, tables):
    jobs = []
    for s, rows in enumerate(tables):
        folder = tmp_path / f"job{s}"
        folder.mkdir()
        out = folder / "qa_results.csv"
        out.write_text("\n".join([HEADER] + rows) + "\n")
        (folder / "config.yaml").write_text(f"stage:\n  outputs: [{out}]\n")
        jobs.append({"stage": "evaluate", "folder": str(folder), "array": {"seed": s}, "job_id": f"7_{s}"})
    run = tmp_path / "run"
    run.mkdir()
    (run / "jobs.json").write_text(json.dumps({"jobs": jobs}))
    return run


def _pick_rows(md):
    part = md.split("Member with the lowest valid_loss")[1].splitlines()
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in part if ln.startswith("| m ")]


def test_lowest_valid_loss_member_with_ties(tmp_path):
    run = _run_dir(tmp_path, [
        ["m,1,0,,,test,,10.00,50,a.pt,d,0.300", "m,2,0,,,test,,40.00,50,a.pt,d,0.004"],
        ["m,1,1,,,test,,2.00,50,b.pt,d,0.008", "m,2,1,,,test,,30.00,50,b.pt,d,0.300"],
        ["m,1,2,,,test,,4.00,50,c.pt,d,0.008", "m,2,2,,,test,,20.00,50,c.pt,d,0.200"]])
    csv_path, md_path, _ = collect(run)
    picks = {r[1]: r for r in _pick_rows(md_path.read_text())}
    assert picks["1"][-3:] == ["seed=1 (tied with seed=2)", "0.008", "2"]
    assert picks["2"][-3:] == ["seed=0", "0.004", "40"]
    got = {r["task"]: r for r in csv.DictReader(csv_path.read_text().splitlines())}
    assert float(got["1"]["error_mean"]) == float(f"{16 / 3:.6g}")
    assert float(got["2"]["valid_loss_mean"]) == float(f"{0.504 / 3:.6g}")


def test_a_member_without_valid_loss_is_averaged_without_it_and_not_picked(tmp_path):
    run = _run_dir(tmp_path, [
        ["m,1,0,,,test,,10.00,50,a.pt,d,0.300"],
        ["m,1,1,,,test,,2.00,50,b.pt,d,"]])
    csv_path, md_path, _ = collect(run)
    rows = list(csv.reader(csv_path.read_text().splitlines()))
    assert all(len(r) == len(rows[0]) for r in rows) and len(rows) == 2   # one row, columns aligned
    got = dict(zip(rows[0], rows[1]))
    assert got["error_mean"] == "6" and got["valid_loss_mean"] == "0.3" and got["members"] == "2"
    assert _pick_rows(md_path.read_text())[0][-3] == "(a member has no valid_loss)"


def test_counts_every_member_shares_show_without_a_spread_and_units_are_named(tmp_path):
    """collect.md: questions (50 in every member) as 50, not "50 ± 0"; the error as mean ± sample
    std (10 and 2: 6 ± 5.7, by hand); the headers name the error's and the loss's units."""
    run = _run_dir(tmp_path, [["m,1,0,,,test,,10.00,50,a.pt,d,0.300"], ["m,1,1,,,test,,2.00,50,b.pt,d,0.100"]])
    _, md_path, _ = collect(run)
    lines = md_path.read_text().splitlines()
    head = next(ln for ln in lines if ln.startswith("| model"))
    cells = dict(zip([c.strip() for c in head.strip("|").split("|")],
                     [c.strip() for c in lines[lines.index(head) + 2].strip("|").split("|")]))
    assert cells["questions"] == "50" and cells["error (%)"] == "6 ± 5.7"
    assert cells["valid_loss (bits)"] == "0.2 ± 0.14"
