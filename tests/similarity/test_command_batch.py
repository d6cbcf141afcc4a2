"""``autograder similarity`` end to end on generated batches: a folder, the service export's layout and a zip; its
CSV and HTML; hostile names and bad notebooks named without stopping the others; bad input refused clearly."""
from __future__ import annotations

import csv
import datetime as dt
import random
import shutil

import pytest

from similar_class import EVE, QKV, REFERENCE, disguise, honest, notebook, write_class
from autograder.cli import main
from autograder.similarity.report import HEADER

HOSTILE = "<script>alert(1)</script>"
#: A student's folder named as markup (a folder name holds no "/").
MARKUP = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """A class of honest students, two who wrote the reference, a copy of eve's answers, a copy by a student whose
    name is markup, and a notebook that is not JSON."""
    root = tmp_path_factory.mktemp("similarity") / "subs"
    students = {f"h{i:02d}": notebook(honest(random.Random(i))) for i in range(12)}
    students["alice"] = notebook(REFERENCE)
    students["bob"] = notebook(REFERENCE)
    students["eve"] = notebook(EVE)
    students["frank"] = notebook(disguise(EVE, random.Random(1)))
    own = ("def softmax(x, dim=-1):\n    top_value_of_row = x.detach().amax(dim, True)\n"
           "    w = (x - top_value_of_row).exp().clamp_min(1e-300)\n"
           "    return w / w.sum(dim, True).clamp_min(1e-300)\n")
    mine = {**REFERENCE, "softmax": own}
    students["quinn"] = notebook({**mine, "softmax": own.replace(":\n", f":\n    # {HOSTILE}\n", 1)})
    students[MARKUP] = notebook(mine)
    write_class(root, students)
    (root / "zed").mkdir()
    (root / "zed" / QKV.notebook).write_text("{this is not json", encoding="utf-8")
    return root


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["similarity", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out) -> list[dict[str, str]]:
    with open(out / "similarity.csv", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == HEADER
        return list(reader)


def test_a_batch_folder_gives_the_csv_and_the_page(batch, tmp_path, capsys):
    code, out, _ = run(capsys, batch, "-o", tmp_path / "out")
    assert code == 0
    assert "02_qkv_attention: 18 notebooks" in " ".join(out.split())
    assert "zed/02_qkv_attention.ipynb" in out and "invalid JSON" in out        # named, and the others compared
    found = rows(tmp_path / "out")
    pairs = [(r["student_a"], r["student_b"]) for r in found]
    assert ("eve", "frank") in pairs and (MARKUP, "quinn") in pairs
    assert ("alice", "bob") not in pairs
    scores = [float(r["score"]) for r in found]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    assert all(r["student_a"] < r["student_b"] and r["evidence"] for r in found)
    page = (tmp_path / "out" / "similarity.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page     # quinn's comment
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "zed/02_qkv_attention.ipynb" in page and "evidence for a conversation, not a finding" in page


def test_top_and_assignment_scope_the_report(batch, tmp_path, capsys):
    code, out, _ = run(capsys, batch, "-o", tmp_path / "out", "--top", "1", "--assignment", "02_qkv_attention")
    assert code == 0 and len(rows(tmp_path / "out")) == 1 and "the top 1 listed" in " ".join(out.split())
    code, _, err = run(capsys, batch, "-o", tmp_path / "other", "--assignment", "02_nope")
    assert code == 2 and "--assignment 02_nope" in err


def test_the_service_exports_layout_and_its_times(tmp_path, capsys):
    """``serve export`` writes submitted/STUDENT/ASSIGNMENT/NOTEBOOK with the receipt time beside it."""
    export = tmp_path / "export" / "submitted"
    students = {f"h{i:02d}": notebook(honest(random.Random(i))) for i in range(12)}
    partial = {**REFERENCE, "softmax": EVE["softmax"]}
    students |= {"oscar": notebook(partial), "pia": notebook(partial)}
    start = dt.datetime(2026, 3, 1, 10, tzinfo=dt.timezone.utc)
    write_class(tmp_path / "flat", students, {"oscar": start, "pia": start + dt.timedelta(minutes=4)})
    for folder in (tmp_path / "flat").iterdir():
        shutil.copytree(folder, export / folder.name / QKV.id)
    code, out, _ = run(capsys, export, "-o", tmp_path / "out")
    assert code == 0, out
    found = {(r["student_a"], r["student_b"]): r for r in rows(tmp_path / "out")}
    assert "submitted 4 min apart" in found[("oscar", "pia")]["evidence"]


def test_a_zip_is_read_and_its_times_are_not_trusted(batch, tmp_path, capsys):
    (batch / "eve" / "timestamp.txt").write_text("2026-03-01 10:00:00 UTC\n", encoding="utf-8")
    (batch / "frank" / "timestamp.txt").write_text("2026-03-01 10:01:00 UTC\n", encoding="utf-8")
    try:
        archive = shutil.make_archive(str(tmp_path / "subs"), "zip", batch)
        code, _, _ = run(capsys, archive, "-o", tmp_path / "out")
        assert code == 0
        eve = next(r for r in rows(tmp_path / "out") if (r["student_a"], r["student_b"]) == ("eve", "frank"))
        assert "apart" not in eve["evidence"]            # a zip's timestamp.txt is the student's: no timing
    finally:
        for student in ("eve", "frank"):
            (batch / student / "timestamp.txt").unlink()


@pytest.mark.parametrize("make, says", [
    (lambda tmp: tmp / "missing", "no such file or folder"),
    (lambda tmp: tmp, "the output folder is inside SUBMISSIONS"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "no notebook (.ipynb) found"),
])
def test_bad_input_is_one_clear_error(tmp_path, capsys, make, says):
    code, _, err = run(capsys, make(tmp_path), "-o", tmp_path / "out")
    assert code == 2 and err.startswith("ERROR ") and says in err
