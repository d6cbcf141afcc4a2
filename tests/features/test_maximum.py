"""Issue 66, item 1: one maximum per assignment, everywhere.

An assignment's maximum is :func:`~autograder.course.written.maximum`: its exercises' points and its written questions',
graded or not, with what still waits for a person said beside it. A TA's grade of a written answer once made the
dashboard and the student's page say "12 / 10", canvas.csv's "Points Possible" 10 beside students' 12, moodle.csv a
Grade of 12 with a Maximum Grade of 10, the student's page a late penalty "of 10" computed on 12, the analytics "the
assignment has 10 points", the score history "10 / 10", and the feedback kept saying the marked answer waited.

The walk is built from the app's own routes (every GET route, as the staff and as a student see it) and the
exporters' registries (:data:`autograder.reports.lms.FORMAT_MODULES`, :data:`autograder.exports.targets.
TARGET_MODULES`), for a class whose written answers are graded and one whose answers wait: every maximum a page, a
download or an export shows is the function's.
"""
from __future__ import annotations

import csv
import html
import io
import json
import re
import zipfile
from typing import Any

import pytest

from maximum_class import COURSE, FULL, QKV, served_class
from pages import browser, sign_in
from route_walk import route_params, routes
from autograder.core.messages import say
from autograder.service import history
from autograder.course.written import maximum

#: The largest maximum of one of 02's items (an exercise, a question): a larger number shown as a maximum is the
#: assignment's.
ITEM = max([e.points for e in QKV.exercises] + [q.points for q in QKV.questions])


# -- what a page, a file or an export shows as a maximum ------------------------------------------------------------
_NUMBER = r"\d+(?:\.\d+)?"
#: "10 / 12" (a score out of its maximum); "满分 12 分", "按满分 12 分计" (the pages' words).
_FRACTION = re.compile(rf"(?<![\d.]){_NUMBER}\s*/\s*({_NUMBER})(?![\d.])")
_WORDS = re.compile(rf"满分\s*({_NUMBER})\s*分")
#: The columns a CSV gives a maximum in, and where it gives "x / y".
MAX_COLUMNS = {"max", "max_points", "Maximum Grade"}


def _from_html(text: str) -> list[float]:
    shown = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return [float(m) for m in _FRACTION.findall(shown) + _WORDS.findall(shown)]


def _from_csv(text: str) -> list[float]:
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        return []
    header, found = rows[0], []
    for row in rows[1:]:
        cells = dict(zip(header, row))
        if cells.get("assignment", QKV.id) != QKV.id:
            continue
        found += [float(cells[c]) for c in MAX_COLUMNS & set(cells) if cells[c]]
        if row and row[0] == "Points Possible" and QKV.gradebook_title in cells:
            found.append(float(cells[QKV.gradebook_title]))
        found += [float(m) for c, v in cells.items() if c.startswith(QKV.id) for m in _FRACTION.findall(v)]
    return found


def _from_json(value: Any) -> list[float]:
    """The ``max_points`` of every result in a JSON answer (an object with exercises or an assignment)."""
    found = []
    if isinstance(value, dict):
        if "max_points" in value and ("exercises" in value or "assignment" in value) \
                and value.get("assignment", QKV.id) == QKV.id and value["max_points"] is not None:
            found.append(float(value["max_points"]))
        for v in value.values():
            found += _from_json(v)
    elif isinstance(value, list):
        for v in value:
            found += _from_json(v)
    return found


def shown_maxima(name: str, kind: str, data: bytes) -> list[float]:
    """Every assignment-level maximum a response or a file shows (an item's own, at most ITEM, is left out)."""
    if name.endswith(".zip") or "zip" in kind:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            found = [m for member in z.namelist() for m in shown_maxima(member, "", z.read(member))]
    elif name.endswith(".csv") or "csv" in kind:
        found = _from_csv(data.decode("utf-8-sig"))
    elif name.endswith(".json") or "json" in kind:
        found = _from_json(json.loads(data))
    else:
        found = _from_html(data.decode("utf-8", "replace"))
    return [m for m in found if m > ITEM]


# -- the walk -------------------------------------------------------------------------------------------------------
def _examples(subs: dict[str, int]) -> dict[str, str]:
    """A value for each path or query parameter a route reads."""
    return {"submission_id": str(subs["ada"]), "submission": str(subs["ada"]), "id": "ada", "student": "ada",
            "question": "2.Q1", "exercise": "2.4", "assignment": QKV.id, "table": "totals"}


def _calls(app, subs) -> list[tuple[str, str, dict[str, str]]]:
    """(route, path, query) of every GET route of the app, its parameters filled in; a route that reads a name from
    a list of its own (a download's) once per name."""
    from autograder.service.routes import downloads

    examples = _examples(subs)
    out = []
    for method, path, route in routes(app):
        if method != "GET":
            continue
        query, names = {}, [path]
        for where, field in route_params(route.dependant) if hasattr(route, "dependant") else ():
            if where == "query" and field.name in examples:
                query[field.name] = examples[field.name]
            elif where == "query" and field.field_info.is_required():
                pytest.fail(f"GET {path}: no example for its query parameter {field.name!r}")
        if "{name}" in path:
            names = [path.replace("{name}", n) for n in downloads.FILES]
        for one in names:
            for name, value in examples.items():
                one = one.replace("{" + name + "}", value)
            out.append((path, one, query))
    return out


@pytest.mark.parametrize("graded", [True, False], ids=["answers-graded", "answers-waiting"])
def test_every_page_and_every_exporter_shows_the_one_maximum(tmp_path, graded):
    with served_class(tmp_path, graded) as (app, url, engine, who, subs), browser(url) as staff, \
            browser(url) as student:
        assert sign_in(staff, who["prof"]).status_code == 303 and sign_in(student, who["ada"]).status_code == 303
        seen: dict[str, list[float]] = {}
        walked = _calls(app, subs)
        assert len(walked) >= 20
        for route, path, query in walked:
            for client in (staff, student):
                got = client.get(path, params=query, headers={"Authorization": f"Bearer {who['prof']}"}
                                 if client is staff and path.startswith("/api/") else None)
                if got.status_code != 200:
                    continue
                name = path.rsplit("/", 1)[-1]
                found = shown_maxima(name, got.headers.get("content-type", ""), got.content)
                assert all(m == FULL for m in found), (route, path, found, got.text[:3000])
                seen.setdefault(route, []).extend(found)
        # The pages the issue named show the maximum (and the walk found them).
        for route in ("/me", "/dashboard", "/dashboard/roster", "/dashboard/analytics", "/dashboard/adjust",
                      "/dashboard/student", "/dashboard/download/{name}", "/api/submissions/{submission_id}"):
            assert seen.get(route), (route, sorted(seen))

        # What still waits is said beside it; a marked answer no longer waits, anywhere.
        mine = student.get("/me").text
        waiting = say("label.max_waiting", points="2", questions="2.Q1").zh
        note = say("submission.written_pending", questions="2.Q1", points="2").zh
        assert (waiting in mine) is not graded and note not in mine
        assert note not in staff.get("/dashboard/student", params={"id": "ada"}).text
        # The late penalty is computed on the maximum it names, the same before and after the grading.
        assert f"分（按满分 {FULL:g} 分计）" in mine
        ben = student.get("/api/submissions/" + str(subs["ben"]), headers={"Authorization": f"Bearer {who['prof']}"})
        assert ben.json()["result"]["late"]["penalty"] == pytest.approx(0.1 * FULL)
        # The score history: each score out of the maximum it was out of, with what waited then.
        recorded = [(c.why, c.new_points, c.max_points, c.waiting_points)
                    for c in history.changes(engine, student="ada")]
        assert recorded[0] == ("graded", QKV.points, FULL, 2.0)
        assert recorded[-1] == (("manual", FULL, FULL, 0.0) if graded else ("graded", QKV.points, FULL, 2.0))

        # Every exporter of the registries, from the same results.
        from autograder.exports.gradescope import gradescope_results
        from autograder.exports.targets import targets
        from autograder.reports.lms import formats
        from autograder.service.export import export

        out = tmp_path / "export"
        results = export(engine, COURSE, out)          # (serve export: the LMS files, grades.csv, the feedback)
        for name in ("grades.csv", "score-history.csv"):
            assert shown_maxima(name, "", (out / name).read_bytes()), name
        for f in formats():
            found = [m for name, _ in ((f.file, f.write), *f.more)
                     for m in shown_maxima(name, "", (out / name).read_bytes())]
            assert found and all(m == FULL for m in found), (f.name, found)
        for path in (out / "feedback").glob("*.html"):
            assert all(m == FULL for m in shown_maxima(path.name, "", path.read_bytes())), path.name
        # An autograder package's platform is told the autograder's part; the written answers are graded by hand
        # there (Gradescope's manual questions), the two adding up to the maximum.
        part = maximum(QKV).automatic
        read = {"gradescope": lambda files, r: gradescope_results(r, COURSE, QKV, "zh", seconds=0, plan=[])[
                    "extra_data"]["max_points"],
                "otter": lambda files, r: json.loads(files["otter_config.json"])["points_possible"]}
        assert set(read) == set(targets()), "a new export target: say here where it shows the maximum"
        for name, target in targets().items():
            files = target.files(COURSE, QKV) if name == "otter" else {}
            assert read[name](files, results[0]) == part, name
        assert part + maximum(QKV).written == FULL
