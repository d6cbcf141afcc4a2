"""Hidden stays hidden, and no points without output (issue 9).

Every exercise is graded in-process with the real catalog (public and hidden checks,
the reference from solutions/, live diagnosis), as the grader does, on every known
mistake and on adversarial submissions. A recording runner keeps every value a
hidden check sent to the student and what the reference returns on the same
request; no hidden check's message (zh or en) may hold one of those numbers, nor
text the student's objects spelled (a class named after its inputs, a dict key, an
exception's class name), beyond a short bounded description.

A submission with no output (every function returns None, raises, or is still the
stub) earns 0 points on every exercise.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from autograder import catalog as C
from autograder.inside import plain
from autograder.inside.probes import Reply, Request
from autograder.authoring.validate import solution_for

EXERCISES = ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1", "2.2", "2.3", "2.4",
             "3.1", "3.2", "3.3", "3.4", "3.5", "4.1", "4.2", "4.3", "4.4", "4.5",
             "5.1", "5.2", "5.3", "5.4", "5.5", "5.6", "5.7", "5.8", "5.9"]
BOTH = (C.Audience.PUBLIC, C.Audience.HIDDEN)
pytestmark = pytest.mark.usefixtures("one_thread")


# -- recording what is hidden ----------------------------------------------------------
class Recorder:
    """A runner that runs the student's code and remembers every hidden number.

    For each request of a hidden check it keeps the inputs and what the reference
    returns on the very same request (same probe, same dtypes); ``reference`` wraps
    the solution to keep what ``ctx.reference`` returns (float64 copies) as well.
    """

    def __init__(self, exercise_id: str, function: str, fn: Any, solution: Any):
        self.hidden_checks = {c.name for c in C.checks_for(exercise_id, [C.Audience.HIDDEN])}
        self.student = C.in_process_runner({function: fn})
        self.truth = C.in_process_runner({function: solution})
        self.numbers: list[float] = []
        self.reference = solution if isinstance(solution, type) else self._recording(solution)

    def _recording(self, solution: Callable[..., Any]) -> Callable[..., Any]:
        def reference(*args: Any, **kwargs: Any) -> Any:
            out = solution(*args, **kwargs)
            self.keep(out)
            return out

        return reference

    def __call__(self, request: Request) -> Reply:
        if request.site.split("#")[0] in self.hidden_checks:
            self.keep(request.args)
            self.keep(request.kwargs)
            truth = self.truth(request)
            if truth.status == "ok":
                self.keep(truth.value().to_python())
        return self.student(request)

    def keep(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if value.dtype != torch.bool:
                self.numbers.extend(value.detach().double().flatten().tolist())
        elif isinstance(value, np.ndarray):
            if value.dtype.kind in "iuf":
                self.numbers.extend(value.astype(np.float64).ravel().tolist())
        elif isinstance(value, (bool, type(None), str)):
            return
        elif isinstance(value, (int, float)):
            self.numbers.append(float(value))
        elif isinstance(value, (tuple, list)):
            for v in value:
                self.keep(v)
        elif isinstance(value, dict):
            for v in value.values():
                self.keep(v)


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d+|\d+)(?:e[-+]?\d+)?", re.IGNORECASE)


def leaked_numbers(text: str, numbers: np.ndarray) -> list[str]:
    """Numbers in ``text`` precise enough to carry a value (3+ significant digits with a
    fraction or exponent, 4+ for an integer) that match a hidden number to their last digit."""
    found = []
    for token in _NUMBER.findall(text):
        mantissa = re.split(r"[eE]", token)[0].lstrip("+-")
        digits = mantissa.replace(".", "").lstrip("0")
        fractional = "." in token or "e" in token.lower()
        if len(digits) < (3 if fractional else 4):
            continue
        x = float(token)
        if x == 0 or not math.isfinite(x):
            continue
        # one unit in the last place shown covers rounding and truncation alike
        ulp = 10.0 ** (math.floor(math.log10(abs(x))) - len(digits) + 1)
        if numbers.size and bool(np.any(np.abs(numbers - x) <= ulp * 1.0001)):
            found.append(token)
    return found


def spelled_pieces(text: str, width: int = 16) -> set[str]:
    """Every ``width``-character piece, holding 4+ digits, of a text the student's objects spell.

    (Pieces of prose such as "dtype=torch.floa" may rightly occur in a message.)
    """
    pieces = {text[i:i + width] for i in range(0, max(len(text) - width, 0) + 1)}
    return {p for p in pieces if sum(ch.isdigit() for ch in p) >= 4}


def grade_recorded(course, exercise_id: str, fn: Any, seed: int = 0) -> tuple[C.ExerciseResult, Recorder]:
    _, ex = course.exercise(exercise_id)
    recorder = Recorder(exercise_id, ex.function, fn, solution_for(course, exercise_id))
    result = C.run_exercise(ex, recorder, audiences=BOTH,
                            tolerances=course.tolerances, seed_parts=("hidden-safety", seed),
                            reference=recorder.reference, diagnoser=C.LiveDiagnoser(course.tolerances))
    return result, recorder


def hidden_messages(result: C.ExerciseResult) -> list[tuple[str, str]]:
    return [(f"{r.exercise}/{r.check} [{lang}]", text) for r in result.checks
            if r.audience == C.Audience.HIDDEN.value and r.message is not None
            for lang, text in r.message._asdict().items()]


def assert_nothing_hidden_shown(result: C.ExerciseResult, recorder: Recorder, spelled: str = "") -> None:
    numbers = np.asarray(recorder.numbers, dtype=np.float64)
    numbers = numbers[np.isfinite(numbers)]
    pieces = spelled_pieces(spelled) if spelled else set()
    problems = []
    for where, text in hidden_messages(result):
        leaked = leaked_numbers(text, numbers)
        if leaked:
            problems.append(f"{where}: hidden numbers {leaked} in {text!r}")
        if "tensor(" in text or re.search(r"(?<!nd)array\(", text):      # str() of a tensor or an array
            problems.append(f"{where}: a printed tensor in {text!r}")
        shown = sorted(p for p in pieces if p in text)
        if shown:
            problems.append(f"{where}: the student's text {shown[:2]} in {text!r}")
    assert not problems, "\n".join(problems)


# -- adversarial submissions --------------------------------------------------------------
def spelled_text(args: tuple, kwargs: dict) -> str:
    with np.printoptions(threshold=50):
        return f"{args!r}{kwargs!r}"


def named_after(args: tuple, kwargs: dict) -> Any:
    """An object whose class name and module are its inputs, printed."""
    text = spelled_text(args, kwargs)
    cls = type(f"Echo{text}", (), {})
    cls.__qualname__ = f"Echo{text}"
    cls.__module__ = f"m{text}"
    return cls()


def wrong_everywhere(value: Any) -> Any:
    """The reference's output moved off in every element, kind and shape kept."""
    if isinstance(value, torch.Tensor):
        return ~value if value.dtype == torch.bool else -value - 1.5
    if isinstance(value, np.ndarray):
        return ~value if value.dtype == np.bool_ else -value - 1.5
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 3 + 1
    if isinstance(value, float):
        return -value - 1.5
    if isinstance(value, (tuple, list)):
        return type(value)(wrong_everywhere(v) for v in value)
    return value


def adversaries(solution: Any) -> dict[str, tuple[Any, Callable[[Recorder], str]]]:
    """name -> (submission, the text its objects spelled on the hidden requests)."""
    spelled: list[str] = []

    def remember(args: tuple, kwargs: dict) -> None:
        spelled.append(spelled_text(args, kwargs))

    def said(_recorder: Recorder) -> str:
        return "".join(spelled)

    if isinstance(solution, type):          # 4.4: the student's class, through the "module" probe
        class NamedAfter(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                remember((query, key, value), {"key_padding_mask": key_padding_mask})
                return named_after((query, key, value), {}), named_after((key,), {})

        class WrongEverywhere(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                out, weights = super().forward(query, key, value, key_padding_mask=key_padding_mask)
                return -out - 1.5, -weights - 1.5

        class Echo(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                return query * 1.0 + 0 * self.in_proj_weight.sum(), key.unsqueeze(1) + 0 * self.in_proj_weight.sum()

        class RaisesNamed(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                remember((query,), {})
                raise type(spelled_text((query,), {}), (ValueError,), {})(spelled_text((query,), {}))

        return {"named-after-inputs": (NamedAfter, said), "wrong-everywhere": (WrongEverywhere, said),
                "echo": (Echo, said), "raises-named-after-inputs": (RaisesNamed, said)}

    def named(*args, **kwargs):
        remember(args, kwargs)
        return named_after(args, kwargs)

    def spelled_tuple(*args, **kwargs):
        remember(args, kwargs)
        text = spelled_text(args, kwargs)
        return named_after(args, kwargs), {text[:200]: 1.0}, text[:200]

    def wrong(*args, **kwargs):
        return wrong_everywhere(solution(*args, **kwargs))

    def echo(*args, **kwargs):
        return args[0] if args else next(iter(kwargs.values()))

    def raises_named(*args, **kwargs):
        remember(args, kwargs)
        text = spelled_text(args, kwargs)
        raise type(text[:300], (ValueError,), {})(text)

    return {"named-after-inputs": (named, said), "spelled-tuple": (spelled_tuple, said),
            "wrong-everywhere": (wrong, said), "echo": (echo, said),
            "raises-named-after-inputs": (raises_named, said)}


# -- hidden stays hidden ------------------------------------------------------------------
@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_known_mistakes_show_no_hidden_number(course, exercise_id):
    mistakes = C.MISTAKES[exercise_id]
    assert mistakes
    for m in mistakes:
        result, recorder = grade_recorded(course, exercise_id, m.fn)
        assert recorder.numbers, f"{exercise_id}/{m.name}: nothing hidden was recorded"
        assert any(r.audience == "hidden" and not r.passed for r in result.checks) or result.points < result.max_points
        assert_nothing_hidden_shown(result, recorder)


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_adversarial_submissions_show_no_hidden_number_or_their_own_text(course, exercise_id):
    solution = solution_for(course, exercise_id)
    for name, (fn, said) in adversaries(solution).items():
        result, recorder = grade_recorded(course, exercise_id, fn)
        hidden_failed = [r for r in result.checks if r.audience == "hidden" and not r.passed]
        assert hidden_failed, f"{exercise_id}/{name}: every hidden check passed"
        assert_nothing_hidden_shown(result, recorder, spelled=said(recorder))


def test_the_leak_detector_sees_what_public_messages_show(course):
    """The detector is not blind: public messages (rich on purpose) do show values it finds."""
    solution = solution_for(course, "2.2")
    fn, _ = adversaries(solution)["wrong-everywhere"]
    _, ex = course.exercise("2.2")
    recorder = Recorder("2.2", ex.function, fn, solution)
    recorder.hidden_checks = {c.name for c in C.checks_for("2.2", BOTH)}     # record the public inputs too
    result = C.run_exercise(ex, recorder, audiences=BOTH, tolerances=course.tolerances,
                            seed_parts=("hidden-safety", 0), reference=recorder.reference)
    numbers = np.asarray(recorder.numbers)
    public = [r.message.en for r in result.checks if r.audience == "public" and r.message is not None]
    assert any(leaked_numbers(text, numbers) for text in public), public
    # ... and each hidden failure keeps its full message for the instructor, outside the JSON
    hidden = [r for r in result.checks if r.audience == "hidden" and r.status is C.Status.FAILED]
    assert hidden and all(r.detail is not None and "expected" in r.detail.en for r in hidden)
    assert all(leaked_numbers(r.detail.en, numbers) for r in hidden)
    assert all("detail" not in r.to_json() for r in result.checks)


def test_hidden_messages_name_what_failed(course):
    """Number-free is not content-free: the output, the property and the shapes are named."""
    solution = solution_for(course, "3.3")
    fn, _ = adversaries(solution)["wrong-everywhere"]
    result, _ = grade_recorded(course, "3.3", fn)
    hidden = {r.check: r.message.en for r in result.checks if r.audience == "hidden" and not r.passed}
    assert "weights" in hidden["reference-random"] and "differs from the reference" in hidden["reference-random"]
    assert "every element" in hidden["reference-random"]

    def masked_softmax(scores, mask):                       # padded keys get weight, no NaN
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)

    result, _ = grade_recorded(course, "3.2", masked_softmax)
    hidden = {r.check: r for r in result.checks if r.audience == "hidden" and not r.passed}
    assert any("padded" in r.message.en for r in hidden.values()), {k: r.message.en for k, r in hidden.items()}

    def split_heads(x, num_heads):                          # the right values in the wrong shape
        B, T, E = x.shape
        return x.reshape(B, T, num_heads, E // num_heads)

    result, _ = grade_recorded(course, "4.1", split_heads)
    message = next(r.message.en for r in result.checks if r.audience == "hidden" and r.check == "reference-random")
    assert "shape" in message and re.search(r"\(\d+, \d+, \d+, \d+\)", message), message


def test_diagnosis_still_names_the_mistake_in_hidden_checks(course):
    for exercise_id, name in (("2.4", "no-scale"), ("3.2", "nan-on-fully-padded")):
        mistake = next((m for m in C.MISTAKES[exercise_id] if m.name == name), None)
        if mistake is None:
            pytest.skip(f"no mistake {exercise_id}/{name}")
        result, _ = grade_recorded(course, exercise_id, mistake.fn)
        named = {r.mistake for r in result.checks if r.audience == "hidden" and r.mistake}
        assert name in named, (exercise_id, named)


def test_brief_is_bounded_and_spells_nothing():
    class Spelled:
        pass

    Spelled.__qualname__ = "Spelled" + "0.123456789" * 40
    value = plain.decode(plain.encode((torch.zeros(2, 3), [Spelled()] * 10, {"0.987654321": 1.5}, "0.55555",
                                       3.14159265, np.float64(2.71828)) * 5))
    text = C.brief(value)
    assert len(text) <= C.BRIEF_LIMIT
    assert "Tensor(2, 3) float32" in text
    for spelled in ("0.1234", "Spelled", "0.9876", "0.5555", "3.1415", "2.7182"):
        assert spelled not in text
    assert C.brief(plain.decode(plain.encode(2.5))) == "float"
    assert C.brief(plain.decode(plain.encode(np.arange(3.0)))) == "ndarray(3,) float64"
    assert "0.5" not in C.number_free("expected 0.5, got -1.25e-05 (shape (2, 3)) near 1e4")
    assert C.number_free("shape (2, 3) near 1e4, float32") == "shape (2, 3) near 1e4, float32"


# -- no points without output --------------------------------------------------------------
def no_output_submissions(exercise_id: str, solution: Any) -> dict[str, Any]:
    stub_text = f"Need to implement for exercise {exercise_id}"
    if isinstance(solution, type):
        class ReturnsNone(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                return None

        class ReturnsNones(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                return None, None

        class Raises(solution):
            def forward(self, query, key, value, key_padding_mask=None):
                raise ValueError("embed_dim must be divisible by num_heads")

        class Stub(solution):
            def __init__(self, embed_dim, num_heads, bias=True):
                raise NotImplementedError(stub_text)

        return {"none": ReturnsNone, "nones": ReturnsNones, "raises": Raises, "stub": Stub}

    def none(*args, **kwargs):
        return None

    def raises(*args, **kwargs):
        raise ValueError("E is not divisible by H")

    def stub(*args, **kwargs):
        raise NotImplementedError(stub_text)

    return {"none": none, "raises": raises, "stub": stub}


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_no_output_earns_no_points(course, exercise_id):
    solution = solution_for(course, exercise_id)
    for name, fn in no_output_submissions(exercise_id, solution).items():
        result, _ = grade_recorded(course, exercise_id, fn)
        earned = {r.check: r.points for r in result.checks if r.points}
        assert result.points == 0.0 and not earned, f"{exercise_id}/{name}: {earned}"


def test_every_check_that_passes_without_output_is_declared(course):
    for exercise_id in EXERCISES:
        for c in C.checks_for(exercise_id, BOTH):
            if c.kind is C.Kind.FORBIDDEN:
                assert c.needs_output, f"{exercise_id}/{c.name}"
            if c.needs_output:
                assert c.kind not in C.OUTPUT_KINDS, f"{exercise_id}/{c.name} cannot vouch for itself"
        assert any(c.kind in C.OUTPUT_KINDS and not c.needs_output for c in C.checks_for(exercise_id, BOTH)), \
            f"{exercise_id}: no output check, so its needs_output checks could never score"
    declared = {(c.exercise, c.name) for e in EXERCISES for c in C.checks_for(e, BOTH) if c.needs_output}
    assert {("4.1", "value-error"), ("1.5", "last-output-is-h_T"), ("3.5", "edge-one-position")} <= declared


def test_withheld_points_say_why(course):
    fn = no_output_submissions("2.4", solution_for(course, "2.4"))["none"]
    result, _ = grade_recorded(course, "2.4", fn)
    scan = next(r for r in result.checks if r.check == "no-forbidden-calls")
    assert scan.status is C.Status.PASSED and scan.passed        # the scan itself found nothing
    assert scan.points == 0.0 and scan.max_points > 0 and scan.withheld
    assert scan.message == C.WITHHELD and "correct output" in scan.message.en and scan.message.zh
    stored = scan.to_json()
    assert stored["withheld"] is True and stored["points"] == 0.0 and stored["message"]["en"] == C.WITHHELD.en


def test_a_correct_output_releases_the_withheld_points(course):
    """With one output check passed the forbidden-call scan earns its share again."""
    def split_heads(x, num_heads):                  # right values, never checks E % H
        B, T, E = x.shape
        return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)

    result, _ = grade_recorded(course, "4.1", split_heads)
    rows = {r.check: r for r in result.checks}
    assert not rows["value-error"].passed
    assert all(r.points == r.max_points and not r.withheld for r in rows.values() if r.passed)

    def raises_only(x, num_heads):                  # the ValueError and nothing else
        raise ValueError(f"{x.shape[-1]} is not divisible by {num_heads}")

    result, _ = grade_recorded(course, "4.1", raises_only)
    row = next(r for r in result.checks if r.check == "value-error")
    assert row.passed and row.withheld and row.points == 0.0 and result.points == 0.0


def test_self_check_scoring_is_unchanged_for_a_correct_answer(course):
    """Public checks only, as self-check runs them: the solution keeps full marks, nothing withheld."""
    for exercise_id in EXERCISES:
        _, ex = course.exercise(exercise_id)
        result = C.run_exercise(ex,
                                C.in_process_runner({ex.function: solution_for(course, exercise_id)}),
                                audiences=[C.Audience.PUBLIC], tolerances=course.tolerances,
                                seed_parts=(C.PUBLIC_SEED,))
        assert result.points == pytest.approx(ex.points), exercise_id
        assert not any(r.withheld for r in result.checks)


DIGIT_WORDS = "Zero One Two Three Four Five Six Seven Eight Nine".split()


def _spelled_in_letters(args: tuple) -> str:
    """The first hidden number the call got, spelled in letters only: a class name that says it."""
    first = next((float(a.flatten()[0]) for a in args if isinstance(a, torch.Tensor) and a.numel()), 0.0)
    digits = f"{abs(first):.4f}".replace(".", "")
    return (("Minus" if first < 0 else "") + "".join(DIGIT_WORDS[int(d)] for d in digits))[:40]


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_an_exception_class_of_the_notebook_is_not_named_by_a_hidden_check(course, exercise_id):
    """Letters can spell a hidden input (``MinusTwoZeroSixFourFive``): a hidden check names only Python's,
    torch's and NumPy's exception classes, and says of any other that the notebook defined it."""
    solution = solution_for(course, exercise_id)
    names: list[str] = []

    def raise_spelled(args: tuple) -> None:
        name = _spelled_in_letters(args)
        names.append(name)
        raise type(name, (ValueError,), {})("no detail")

    if isinstance(solution, type):          # 4.4, 5.4, 5.5: the student's class (5.5 gets its tokens by keyword)
        class Spells(solution):
            def forward(self, *args, **kwargs):
                raise_spelled(args + tuple(kwargs.values()))

        fn: Any = Spells
    else:
        def fn(*args, **kwargs):
            raise_spelled(args + tuple(kwargs.values()))

    result, _recorder = grade_recorded(course, exercise_id, fn)
    messages = hidden_messages(result)
    assert names and messages, exercise_id
    shown = sorted({n for n in names for _where, text in messages if len(n) >= 8 and n in text})
    assert not shown, f"{exercise_id}: class names that spell hidden inputs in {messages[:2]}"
    assert any("not Python's, torch's or NumPy's" in text for _where, text in messages), messages[:2]


def test_builtin_and_torch_exceptions_are_still_named():
    from autograder.catalog.outcomes import CheckFailed, hidden_message, safe_name

    check = C.checks_for("2.2", [C.Audience.HIDDEN])[0]
    for name in ("ValueError", "RuntimeError", "IndexError", "OutOfMemoryError", "LinAlgError"):
        assert safe_name(name) == name
        said = hidden_message(check, CheckFailed(C.Msg("x", "x"), status=C.Status.ERROR, error_type=name))
        assert name in said.en and name in said.zh
    assert safe_name("MinusTwoZeroSix") == "" and safe_name("Ada") == ""
