"""One language across the course: the glossary's vocabulary, Chinese quotation marks in Chinese prose,
one title format, and student-visible text in course.yml's language (no "中文 / English" pairs)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder.authoring import build as B
from autograder.course.config import load_course

ROOT = Path(__file__).resolve().parents[2]
COURSE = load_course()
GLOSSARY = yaml.safe_load((ROOT / "source" / "glossary.yml").read_text(encoding="utf-8"))["terms"]
CJK = re.compile(r"[\u4e00-\u9fff]")
#: Code blocks, code spans and math: not prose, left as they are.
NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$", re.S)


def notebooks(folder: str = "source") -> dict[str, nbformat.NotebookNode]:
    return {a.id: nbformat.read(ROOT / folder / a.id / a.notebook, as_version=4) for a in COURSE.assignments}


def prose(cell: nbformat.NotebookNode) -> str:
    return NOT_PROSE.sub(" ", cell.source)


def markdown_cells():
    for assignment, nb in notebooks().items():
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                yield assignment, cell


def test_glossary_is_well_formed():
    for term in GLOSSARY:
        assert {"en", "zh", "avoid"} <= set(term), term
        assert term["zh"] not in term["avoid"], term


@pytest.mark.parametrize("term", GLOSSARY, ids=[t["en"] for t in GLOSSARY])
def test_markdown_uses_the_glossary_terms(term):
    found = []
    for assignment, cell in markdown_cells():
        text = prose(cell)
        for word in term["avoid"]:
            # the English gloss right after the preferred term is how a term is introduced: 词元（token）
            text = text.replace(f"{term['zh']}（{word}）", term["zh"])
        for word in term["avoid"]:
            pattern = rf"(?<![A-Za-z_]){re.escape(word)}(?![A-Za-z_])" if word.isascii() else re.escape(word)
            if re.search(pattern, text, flags=re.I):
                found.append(f"{assignment}/{cell.id}: {word!r} (say {term['zh']})")
    assert found == []
    if term.get("mentions") == "once":
        count = sum(prose(cell).count(term["zh"]) for _a, cell in markdown_cells())
        assert count == 1, f"{term['zh']} is mentioned {count} times, once is wanted"


def test_chinese_prose_uses_chinese_quotation_marks():
    straight = [f"{assignment}/{cell.id}: {line.strip()[:80]}"
                for assignment, cell in markdown_cells()
                for line in prose(cell).splitlines() if '"' in line and CJK.search(line)]
    assert straight == []
    unbalanced = [f"{assignment}/{cell.id}" for assignment, cell in markdown_cells()
                  if prose(cell).count("“") != prose(cell).count("”")]
    assert unbalanced == []


def test_one_title_format():
    for assignment, nb in notebooks().items():
        number = assignment[:2]
        title = nb.cells[0].source.splitlines()[0]
        assert re.fullmatch(rf"# {number} · \S.*", title), title
        headings = [line for cell in nb.cells if cell.cell_type == "markdown"
                    for line in cell.source.splitlines() if line.startswith("## 练习")]
        exercises = [e.id for a in COURSE.assignments if a.id == assignment for e in a.exercises]
        assert [h.split("　")[0] for h in headings] == [f"## 练习 {e}" for e in exercises], headings


def _string_literals(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


@pytest.mark.skipif(COURSE.language.value != "zh", reason="the course speaks English")
def test_printed_and_plotted_text_is_chinese_without_english_pairs():
    pairs = []
    for assignment, nb in notebooks().items():
        for cell in nb.cells:
            if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("solution"):
                continue
            for text in _string_literals(cell.source):
                # "中文 / English": Chinese, a slash, then an English word
                if CJK.search(text) and re.search(r"[\u4e00-\u9fff）][^/\n]*\s/\s*[A-Za-z]{3,}", text):
                    pairs.append(f"{assignment}/{cell.id}: {text[:60]!r}")
            for call in re.findall(r"\.set_(?:title|xlabel|ylabel)\(([^\n]*)", cell.source):
                if not call.startswith("plot_text(") and re.search(r"[A-Za-z]{4,}", call.split(",")[0]):
                    pairs.append(f"{assignment}/{cell.id}: plot text not in Chinese: {call[:60]}")
    assert pairs == []


@pytest.mark.skipif(COURSE.language.value != "zh", reason="the course speaks English")
def test_hidden_test_cells_speak_the_course_language():
    for assignment, nb in notebooks("release").items():
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
                comments = [line for line in cell.source.splitlines() if line.strip().startswith("#")]
                assert comments and all(CJK.search(line) for line in comments), (assignment, cell.source)


@pytest.mark.skipif(COURSE.language.value != "zh", reason="the course speaks English")
def test_stubs_speak_the_course_language():
    for assignment, nb in notebooks("release").items():
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                assert "Need to implement" not in cell.source
                assert "请完成练习" in cell.source, (assignment, cell.source)
    assert "请完成练习" in B.stub_for("zh") and "Need to implement" in B.stub_for("en")


def test_selfcheck_setup_never_leaves_a_missing_glyph():
    """Every chapter picks a CJK font at runtime, or English plot text when there is none."""
    for assignment, nb in notebooks().items():
        setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "selfcheck_setup")
        assert "def plot_text(" in setup.source and "font_manager" in setup.source, assignment
    namespace: dict = {}
    import matplotlib
    matplotlib.use("Agg")
    code = next(c for c in notebooks()["01_rnn_decay"].cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "selfcheck_setup").source
    exec(compile(code.replace("from autograder import check", ""), "selfcheck_setup", "exec"), namespace)
    import warnings

    import matplotlib.pyplot as plt
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a missing glyph would be a UserWarning
        fig, ax = plt.subplots()
        ax.set_title(namespace["plot_text"]("句尾还剩多少第一个词元的信息 −1", "What is left −1"))
        fig.canvas.draw()
        plt.close(fig)


# -- everything a student reads (tests/student_text.py) -------------------------------------------------------
def _identifiers() -> set[str]:
    """The course's own names a Chinese sentence may hold as they are: functions, their parameters, the
    names their docstrings give the outputs."""
    import inspect

    from autograder.authoring.validate import solution_for

    names = {"out", "weights", "outputs", "scores", "grad"}
    for ex in COURSE.exercises:
        fn = solution_for(COURSE, ex.id)
        names.add(ex.function)
        target = fn.__init__ if inspect.isclass(fn) else fn
        names.update(inspect.signature(target).parameters)
    return names


#: The English gloss after a Chinese term, the course's way of introducing one: 词元（token）.
GLOSS = re.compile(r"(?<=[\u4e00-\u9fff])（[A-Za-z][A-Za-z ,\-]*）")
#: A shape's letters: Tq, Tk, Dk, Dv (B, T, H, E, d are caught as short capitals and single letters).
SHAPE_LETTERS = re.compile(r"(?<![A-Za-z])[A-Z][a-z](?![A-Za-z])")


def _student_texts():
    import student_text as S

    texts = list(S.notebook_texts(COURSE))
    texts += list(S.source_texts(COURSE))
    texts += list(S.catalog_texts(COURSE))
    return S, texts


@pytest.fixture(scope="module")
def student_texts():
    return _student_texts()


@pytest.mark.slow
@pytest.mark.skipif(COURSE.language.value != "zh", reason="the course speaks English")
def test_everything_a_student_reads_is_chinese(student_texts):
    """No English but code identifiers and values: the markdown, the comments and docstrings of the cells
    a student gets, every check title, check message and diagnosis the catalog produces (failures
    included), the self-check table and the feedback (issue 24, item 9)."""
    S, texts = student_texts
    allowed = _identifiers()
    found = []
    for t in texts:
        text = SHAPE_LETTERS.sub(" ", GLOSS.sub("", t.text))
        # The student's own exception text is theirs to read as it is (after "XxxError:").
        text = re.sub(r"\b\w*(?:Error|Exception|Warning)\b:?.*", " ", text)
        words = S.english_words(text, allowed)
        if words:
            found.append(f"{t.where}: {' '.join(words[:8])}")
    assert found == [], f"{len(found)} texts hold English:\n" + "\n".join(found[:60])


@pytest.mark.parametrize("term", GLOSSARY, ids=[t["en"] for t in GLOSSARY])
def test_every_student_visible_text_uses_the_glossary_terms(term, student_texts):
    """The glossary beyond markdown: comments, docstrings, check titles and messages, diagnoses."""
    _S, texts = student_texts
    found = []
    for t in texts:
        if "(markdown)" in t.where:
            continue          # test_markdown_uses_the_glossary_terms, with its own exceptions
        text = NOT_PROSE.sub(" ", t.text)
        for word in term["avoid"]:
            text = text.replace(f"{term['zh']}（{word}）", term["zh"])
        for word in term["avoid"]:
            if word.isascii():
                continue      # English words: test_everything_a_student_reads_is_chinese
            if word in text:
                found.append(f"{t.where}: {word!r} (say {term['zh']})")
    assert found == []
