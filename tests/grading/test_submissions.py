"""Finding submissions: layouts, zips (safely), and identity never guessed silently."""
from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.course.config import load_course
from autograder.core.errors import AutograderError
from autograder.grading.archives import UnsafeArchive, extract_zip, opened
from autograder.grading.submissions import discover, safe_name

COURSE = load_course()


def notebook(*codes: str, grade_ids: tuple[str | None, ...] = (), assignment: str | None = None) -> str:
    nb = nbformat.v4.new_notebook()
    for i, code in enumerate(codes):
        cell = nbformat.v4.new_code_cell(code)
        gid = grade_ids[i] if i < len(grade_ids) else None
        if gid:
            cell.metadata["nbgrader"] = {"grade_id": gid, "solution": True, "grade": False, "locked": False,
                                         "schema_version": 3}
        nb.cells.append(cell)
    if assignment:
        nb.metadata["autograder"] = {"assignment": assignment}
    return nbformat.writes(nb)


PLAIN = notebook("x = 1")
QKV = notebook("def softmax(x, dim=-1):\n    pass\n", "def scaled_dot_product_attention(Q, K, V):\n    pass\n")


def put(root: Path, rel: str, text: str = PLAIN) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def found(root: Path, **kwargs) -> dict[str, tuple[str | None, str | None, str | None]]:
    d = discover(root, COURSE, **kwargs)
    return {s.source: (s.student, s.assignment, s.problem) for s in d.submissions}


def test_safe_names_are_safe_and_distinct():
    assert safe_name("alice") == "alice"
    assert safe_name("张三") == "张三"
    assert safe_name("../../etc/passwd").startswith("etc_passwd-")
    assert safe_name("a b") != safe_name("a_b")
    assert "/" not in safe_name("a/b") and "\\" not in safe_name("a\\b")
    assert safe_name("") and not safe_name("...").startswith(".")


def test_three_layouts_side_by_side(tmp_path):
    put(tmp_path, "alice.ipynb", QKV)                                     # flat: the notebook says 02
    put(tmp_path, "bob/01_rnn_decay.ipynb")                               # student folder
    put(tmp_path, "submitted/carol/03_padding_masks/03_padding_masks.ipynb")   # nbgrader
    put(tmp_path, "submitted/carol/.ipynb_checkpoints/x-checkpoint.ipynb")     # never a submission
    put(tmp_path, "submitted/carol/03_padding_masks/timestamp.txt", "2026-11-30 05:00:00")  # nbgrader's, unlisted
    put(tmp_path, "README.txt", "hello")
    d = discover(tmp_path, COURSE)
    rows = {s.source: (s.student, s.assignment, s.problem) for s in d.submissions}
    assert rows == {
        "alice.ipynb": ("alice", "02_qkv_attention", None),
        "bob/01_rnn_decay.ipynb": ("bob", "01_rnn_decay", None),
        "submitted/carol/03_padding_masks/03_padding_masks.ipynb": ("carol", "03_padding_masks", None),
    }
    assert d.ignored == ["README.txt"]
    assert {s.key for s in d.submissions} == {"alice__02_qkv_attention", "bob__01_rnn_decay",
                                              "carol__03_padding_masks"}


def test_nbgrader_tree_of_many_students_and_lms_names(tmp_path):
    for who in ("ann", "ben"):
        for a in ("01_rnn_decay", "02_qkv_attention"):
            put(tmp_path / "course", f"submitted/{who}/{a}/{a}.ipynb")
    put(tmp_path / "canvas", "chen_12345_67890_02_qkv_attention.ipynb")
    put(tmp_path / "canvas", "dora_late_111_222_02_qkv_attention-1.ipynb")
    put(tmp_path / "moodle", "Eva Li_4242_assignsubmission_file_/02_qkv_attention.ipynb")
    put(tmp_path / "moodle", "Finn Ma_4343_assignsubmission_file_/my work.ipynb", QKV)
    assert set(found(tmp_path / "course").values()) == {
        (w, a, None) for w in ("ann", "ben") for a in ("01_rnn_decay", "02_qkv_attention")}
    assert set(found(tmp_path / "canvas").values()) == {("chen", "02_qkv_attention", None),
                                                        ("dora", "02_qkv_attention", None)}
    assert set(found(tmp_path / "moodle").values()) == {("Eva Li", "02_qkv_attention", None),
                                                        ("Finn Ma", "02_qkv_attention", None)}


def test_assignment_from_metadata_grade_ids_or_the_flag(tmp_path):
    put(tmp_path, "a.ipynb", notebook("x = 1", assignment="04_multi_head_attention"))
    put(tmp_path, "b.ipynb", notebook("x = 1", grade_ids=("ex3_2",)))
    put(tmp_path, "c.ipynb", PLAIN)
    rows = found(tmp_path)
    assert rows["a.ipynb"] == ("a", "04_multi_head_attention", None)
    assert rows["b.ipynb"] == ("b", "03_padding_masks", None)
    student, assignment, problem = rows["c.ipynb"]
    assert (student, assignment) == ("c", None) and problem.startswith("unknown assignment")
    assert found(tmp_path, assignment="03_padding_masks")["c.ipynb"] == ("c", "03_padding_masks", None)


def test_ambiguous_and_conflicting_identities_are_reported(tmp_path):
    put(tmp_path, "alice/01_rnn_decay.ipynb")
    put(tmp_path, "bob/drafts/01_rnn_decay.ipynb")                       # two folders could name him
    put(tmp_path, "carol/01_rnn_decay_02_qkv_attention.ipynb")           # two assignments in one name
    put(tmp_path, "dan/01_rnn_decay.ipynb", notebook("x = 1", assignment="02_qkv_attention"))
    put(tmp_path, "erin/02_qkv_attention.ipynb")
    put(tmp_path, "erin/02_qkv_attention-Copy1.ipynb")                   # the same student twice
    put(tmp_path, "fay/work.ipynb", notebook("x = 1", assignment="09_nonexistent"))
    rows = found(tmp_path)
    assert rows["alice/01_rnn_decay.ipynb"] == ("alice", "01_rnn_decay", None)
    assert rows["bob/drafts/01_rnn_decay.ipynb"][2].startswith("ambiguous student")
    assert rows["carol/01_rnn_decay_02_qkv_attention.ipynb"][2].startswith("ambiguous assignment")
    # What the notebook says of itself wins over the name: another assignment's notebook is named as such.
    assert rows["dan/01_rnn_decay.ipynb"][2] == ("wrong assignment: the notebook is 02_qkv_attention (notebook "
                                                 "metadata), not 01_rnn_decay")
    # The same student twice: the notebook named as the assignment's is graded, the copy is named in it.
    assert rows["erin/02_qkv_attention.ipynb"] == ("erin", "02_qkv_attention", None)
    assert "erin/02_qkv_attention-Copy1.ipynb" not in rows
    assert "no such assignment" in rows["fay/work.ipynb"][2]
    d = discover(tmp_path, COURSE)
    assert len({s.key for s in d.submissions}) == len(d.submissions)   # every row keeps its own files
    assert d.superseded == {"erin/02_qkv_attention-Copy1.ipynb": "erin/02_qkv_attention.ipynb"}
    erin = next(s for s in d.submissions if s.student == "erin")
    assert erin.evidence["also_found"] == "erin/02_qkv_attention-Copy1.ipynb"


def test_assignment_flag_scopes_the_batch(tmp_path):
    put(tmp_path, "ann/01_rnn_decay.ipynb")
    put(tmp_path, "ann/02_qkv_attention.ipynb")
    put(tmp_path, "ben.ipynb", QKV)                                       # the notebook says 02
    d = discover(tmp_path, COURSE, assignment="01_rnn_decay")
    assert d.out_of_scope == ["ann/02_qkv_attention.ipynb"]
    rows = {s.source: (s.student, s.assignment, s.problem) for s in d.submissions}
    assert rows["ann/01_rnn_decay.ipynb"] == ("ann", "01_rnn_decay", None)
    assert rows["ben.ipynb"][2].startswith("wrong assignment: the notebook is 02_qkv_attention")
    with pytest.raises(AutograderError, match="no assignment '01_rnn_decy'") as info:
        discover(tmp_path, COURSE, assignment="01_rnn_decy")
    assert "01_rnn_decay" in (info.value.hint or "")


def test_unreadable_notebooks_are_still_found(tmp_path):
    put(tmp_path, "alice/02_qkv_attention.ipynb", "{not json")
    put(tmp_path, "bob/02_qkv_attention.ipynb", "")
    put(tmp_path, "carol.ipynb", "{not json")
    rows = found(tmp_path)
    assert rows["alice/02_qkv_attention.ipynb"] == ("alice", "02_qkv_attention", None)  # graded -> unreadable row
    assert rows["bob/02_qkv_attention.ipynb"] == ("bob", "02_qkv_attention", None)
    assert rows["carol.ipynb"][2] == ("unknown assignment: the path names none and the notebook is unreadable "
                                      "(pass --assignment)")


def _zip_with(path: Path, members: dict[str, bytes], links: dict[str, str] = {}) -> Path:  # noqa: B006
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def test_zip_extracts_safely_and_reports_what_it_refused(tmp_path):
    archive = _zip_with(tmp_path / "lms.zip", {
        "export/alice/02_qkv_attention.ipynb": PLAIN.encode(),
        "export/bob/02_qkv_attention.ipynb": PLAIN.encode(),
        "../../evil/02_qkv_attention.ipynb": PLAIN.encode(),
        "/abs/mallory.ipynb": PLAIN.encode(),
        "export/notes.txt": b"hi",
    }, links={"export/trudy/02_qkv_attention.ipynb": "/etc/passwd"})
    with opened(archive) as (root, refused):
        assert root.stat().st_mode & 0o077 == 0
        assert not (tmp_path.parent / "evil").exists() and not Path("/abs/mallory.ipynb").exists()
        assert refused == {"../../evil/02_qkv_attention.ipynb": "path with '..'",
                           "/abs/mallory.ipynb": "absolute path",
                           "export/trudy/02_qkv_attention.ipynb": "a link or special file"}
        d = discover(root, COURSE, refused=refused)
        rows = {s.source: (s.student, s.assignment, s.problem) for s in d.submissions}
        assert rows["export/alice/02_qkv_attention.ipynb"] == ("alice", "02_qkv_attention", None)
        assert rows["export/bob/02_qkv_attention.ipynb"] == ("bob", "02_qkv_attention", None)
        for name in refused:
            assert rows[name][2].startswith("not extracted from the zip")
        assert d.ignored == ["export/notes.txt"]
        kept = root
    assert not kept.exists()  # the private folder goes away


def test_zip_bomb_stops_at_the_cap(tmp_path):
    big = tmp_path / "bomb.zip"
    with zipfile.ZipFile(big, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a/02_qkv_attention.ipynb", b"\0" * (4 * 2**20))
        zf.writestr("b/02_qkv_attention.ipynb", PLAIN)
    out = tmp_path / "x"
    out.mkdir()
    result = extract_zip(big, out, max_member_bytes=2**20)
    assert "larger than" in result.refused["a/02_qkv_attention.ipynb"]
    assert (out / "b/02_qkv_attention.ipynb").exists() and not (out / "a/02_qkv_attention.ipynb").exists()
    with pytest.raises(UnsafeArchive, match="once extracted"):
        extract_zip(big, tmp_path / "y", max_bytes=2**20)
    with pytest.raises(UnsafeArchive, match="members"):
        extract_zip(big, tmp_path / "z", max_members=1)


def test_neither_folder_nor_zip_is_a_user_error(tmp_path):
    put(tmp_path, "x.ipynb")
    with pytest.raises(AutograderError, match="neither a folder nor a zip"):
        with opened(tmp_path / "x.ipynb"):
            pass
    with pytest.raises(AutograderError, match="no such file"):
        with opened(tmp_path / "nope"):
            pass


def test_a_folder_named_like_another_students_key_takes_nothing_from_them(tmp_path):
    """Issue 23, item 10: a folder literally named as the key "Ada Lovelace" gets (Ada_Lovelace-<hash>)
    is a student of its own; both are graded, under two keys."""
    twin = safe_name("Ada Lovelace")
    assert twin.startswith("Ada_Lovelace-")
    put(tmp_path, "Ada Lovelace/02_qkv_attention.ipynb")
    put(tmp_path, f"{twin}/02_qkv_attention.ipynb")
    d = discover(tmp_path, COURSE)
    rows = {s.source: (s.student, s.problem) for s in d.submissions}
    assert rows == {"Ada Lovelace/02_qkv_attention.ipynb": ("Ada Lovelace", None),
                    f"{twin}/02_qkv_attention.ipynb": (twin, None)}
    assert len({s.key for s in d.submissions}) == 2


def test_stems_are_injective_over_names_that_look_like_stems():
    names = ["a b", "a_b", "a b-" + "0" * 6, safe_name("a b"), safe_name(safe_name("a b")), "x" * 300,
             "x" * 299 + "y", "ab-abcdef", "ab-abcdeg", "张 三", safe_name("张 三")]
    stems = [safe_name(n) for n in names]
    assert len(set(stems)) == len(names), dict(zip(names, stems))


def test_a_notebook_without_metadata_is_known_by_the_functions_it_defines(tmp_path):
    from autograder.grading.evidence import _defined_names, notebook_evidence

    # Definitions where a parse finds them: decorated, async, after a continuation; a half-written cell is
    # scanned line by line; a cell whose lines never start with def or class defines nothing.
    assert _defined_names("@cache\ndef softmax(x):\n    pass\n") == {"softmax"}
    assert _defined_names("async \\\ndef f():\n    pass\nclass G: pass\n") == {"f", "G"}
    assert _defined_names("  def padding_mask(lengths:\n") == {"padding_mask"}
    assert _defined_names("x = 1  # define softmax, classify\ny = 'def softmax(x):'\n") == set()
    put(tmp_path, "s1/qkv.ipynb", QKV)
    put(tmp_path, "s2/masks.ipynb", notebook("import torch", "def padding_mask(lengths, T):\n    pass\n"))
    rows = found(tmp_path)
    assert rows["s1/qkv.ipynb"][1] == "02_qkv_attention"
    assert rows["s2/masks.ipynb"][1] == "03_padding_masks"
    # Where the metadata names the assignment, the definitions are not read (they could not change it).
    declared = notebook_evidence(notebook("def padding_mask(l, T):\n    pass\n",
                                          assignment="02_qkv_attention").encode(), COURSE)
    assert declared.declared == "02_qkv_attention" and declared.by_function == {}
