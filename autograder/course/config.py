"""course.yml: read once, validated field by field into a typed object.

Every key is declared once here, with its description and default (the ``service`` section's in
:mod:`autograder.course.service_policy`). A bad file raises :class:`ConfigError` naming the file, the field
and what was expected; an unknown key gets a "did you mean ..." hint (the words:
:mod:`autograder.course.config_errors`). Which course.yml is read, and where its files are, is
:mod:`autograder.course.files`. ``autograder course``, which shows the course as read, is
:mod:`autograder.commands.course`.
"""
from __future__ import annotations

import datetime
import enum
import functools
import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from autograder.course import clock
from autograder.course.config_errors import did_you_mean, validation_message
from autograder.core.errors import ConfigError, UnknownExercise
from autograder.course.files import COURSE_NAME, course_file
from autograder.course.late_policy import LatePolicy
from autograder.course.roster import read_roster
from autograder.course.service_policy import ServicePolicy
from autograder.course.written import Question

#: The LMSs the kit writes grade files for (autograder.reports.lms.FORMAT_MODULES), as course.yml's lms names them.
LMS_NAMES = ("canvas", "moodle")

EXERCISE_ID = re.compile(r"^[1-9]\d*\.[1-9]\d*$")
ASSIGNMENT_ID = re.compile(r"^\d\d_[a-z][a-z0-9_]*$")


class Language(str, enum.Enum):
    ZH = "zh"
    EN = "en"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Tolerance(_Strict):
    rtol: Annotated[float, Field(ge=0, description="relative tolerance")]
    atol: Annotated[float, Field(ge=0, description="absolute tolerance")]


class Tolerances(_Strict):
    float32: Tolerance = Field(description="for outputs the student computes in float32")
    float64: Tolerance = Field(description="for outputs the student computes in float64")

    def for_dtype(self, dtype: Any) -> Tolerance:
        """The tolerance for a torch/numpy dtype (or its name); float64 for anything 64-bit."""
        name = str(dtype)
        return self.float64 if "64" in name else self.float32


class Limits(_Strict):
    call_seconds: Annotated[float, Field(gt=0, description="wall time of one call into student code")] = 10
    submission_seconds: Annotated[float, Field(gt=0, description="wall time of one submission")] = 120
    cpu_seconds: Annotated[int, Field(gt=0, description="CPU seconds of the worker")] = 120
    memory_mb: Annotated[int, Field(ge=256, description="memory the student's code may allocate on top of "
                                                   "the warm template (which already holds torch), MiB")] = 3072
    output_mb: Annotated[float, Field(gt=0, description="largest data one call may return, MiB")] = 16
    file_mb: Annotated[float, Field(gt=0, description="largest file the worker may write, MiB")] = 16
    processes: Annotated[int, Field(ge=0, description="extra processes the worker may start")] = 0
    disk_mb: Annotated[float, Field(gt=0, description="the worker's own scratch file system (a tmpfs), MiB")] = 256
    notebook_mb: Annotated[float, Field(gt=0, description="largest notebook file the grader reads, MiB")] = 64
    cell_kb: Annotated[float, Field(gt=0, description="largest code cell the grader parses and runs, KiB "
                                                     "(a larger one is recorded as not run)")] = 256
    demo_seconds: Annotated[float, Field(gt=0, description="wall time of one of the chapter's demonstration cells "
                                                          "(a locked cell of no exercise: a training run, a "
                                                          "timing experiment) in the self-check")] = 120
    notebook_cells: Annotated[int, Field(gt=0, description="most cells a notebook may have (a larger one is "
                                                          "refused unread)")] = 2_000
    notebook_depth: Annotated[int, Field(ge=8, description="deepest nesting of a notebook's JSON (Jupyter writes "
                                                          "5 to 8 levels)")] = 32
    notebook_values: Annotated[int, Field(ge=10_000, description="most JSON values (keys included) a notebook may "
                                                                "hold: a file of millions of tiny values is refused "
                                                                "after a bounded look, never parsed")] = 200_000


def grade_id(exercise_id: str) -> str:
    """``"2.4"`` -> ``"ex2_4"``: the nbgrader grade_id of the exercise's solution cell (nbgrader rejects
    dots). Its check cell is ``ex2_4_check``, its test cell ``ex2_4_tests``: every name derives from this."""
    return "ex" + exercise_id.replace(".", "_")


_GRADE_ID = re.compile(r"^ex(\d+)_(\d+)$")


def exercise_of(cell_grade_id: str) -> str | None:
    """``"ex2_4"`` -> ``"2.4"``; None for any other grade_id."""
    m = _GRADE_ID.match(cell_grade_id or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


class Exercise(_Strict):
    id: str = Field(description='exercise ID such as "2.4", used everywhere')
    function: str = Field(description="name of the student's function or class")
    points: Annotated[float, Field(gt=0, description="points of the whole exercise")]
    title: str = Field(description="short English title")
    title_zh: str | None = Field(None, description="short Chinese title (feedback in zh; the English one if absent)")
    builds_on: list[str] = Field(default_factory=list, description=(
        "IDs of earlier exercises whose functions or classes this one calls: of the same assignment, or of an "
        "earlier one whose answer the student pastes into this notebook (judged here by its own checks, for no "
        "points); where one of them lost points, this exercise is graded with that exercise's reference "
        "answering those calls (see earlier_mistakes)"))

    def title_in(self, language: Any) -> str:
        """The title in ``language`` ("zh" or "en")."""
        return self.title_zh if str(getattr(language, "value", language)) == "zh" and self.title_zh else self.title

    @field_validator("id", mode="before")
    @classmethod
    def _id_is_text(cls, value: Any) -> Any:
        # YAML reads 2.4 as a float and 2.10 as 2.1: demand a quoted string.
        if not isinstance(value, str):
            raise ValueError(f'an exercise ID must be a quoted string such as "2.4", got {value!r}')
        if not EXERCISE_ID.match(value):
            raise ValueError(f'an exercise ID looks like "2.4", got {value!r}')
        return value

    @field_validator("function")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError(f"a function name must be a Python identifier, got {value!r}")
        return value


class Assignment(_Strict):
    id: str = Field(description="folder name under source/ and release/, e.g. 02_attention")
    title: str = Field(description="English title")
    title_zh: str | None = Field(None, description="Chinese title (feedback in zh; the English one if absent)")
    lms_title: str | None = Field(None, description=(
        "the assignment's name in the LMS gradebook, exactly as it is spelled there (canvas.csv's column "
        "header: Canvas adds a new assignment for a header it does not know); default: title"))
    exercises: list[Exercise] = Field(min_length=1)
    questions: list[Question] = Field(default_factory=list, description=(
        "written answers a person grades (autograder.course.written): each an nbgrader manually graded answer cell of "
        "the notebook, with its points and rubric; automatic grading leaves them waiting, never 0"))
    due: str | datetime.datetime | None = Field(None, description=(
        "the due date, ISO 8601 (2026-12-08T23:59+08:00); without an offset, in the course's timezone"))
    late_until: str | datetime.datetime | None = Field(None, description=(
        "the end of the late window: a submission after it is not accepted (scores 0); default: none"))
    late: LatePolicy | None = Field(None, description="this assignment's late policy (default: the course's late)")

    def title_in(self, language: Any) -> str:
        """The title in ``language`` ("zh" or "en")."""
        return self.title_zh if str(getattr(language, "value", language)) == "zh" and self.title_zh else self.title

    @field_validator("id")
    @classmethod
    def _assignment_id(cls, value: str) -> str:
        if not ASSIGNMENT_ID.match(value):
            raise ValueError(f"an assignment ID looks like 02_attention (two digits, an underscore, lower-case "
                             f"words), got {value!r}")
        return value

    @model_validator(mode="after")
    def _builds_on_earlier(self) -> Assignment:
        seen: list[str] = []
        for e in self.exercises:
            if e.id in seen:   # said here, before a builds_on naming the duplicate could say something stranger
                raise ValueError(f"exercise ID {e.id!r} appears twice in assignment {self.id}")
            for dep in e.builds_on:
                # One of another assignment is the course's to check (Course._builds_on_earlier).
                if dep not in seen and any(x.id == dep for x in self.exercises):
                    raise ValueError(f"exercise {e.id}: builds_on: {dep!r} is not an earlier exercise (an exercise "
                                     f"builds only on those before it)")
            seen.append(e.id)
        return self

    @property
    def module(self) -> str:
        """Importable module name: ``02_qkv_attention`` -> ``qkv_attention``."""
        return self.id.split("_", 1)[1]

    @property
    def notebook(self) -> str:
        return f"{self.id}.ipynb"

    @property
    def points(self) -> float:
        """The points the automatic checks give (the exercises'); the written questions' are :attr:`manual_points`."""
        return sum(e.points for e in self.exercises)

    @property
    def manual_points(self) -> float:
        return sum(q.points for q in self.questions)

    def question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)

    @property
    def gradebook_title(self) -> str:
        """Its name in an LMS gradebook: ``lms_title``, else ``title``."""
        return self.lms_title or self.title


class EarlierMistakes(str, enum.Enum):
    SUBSTITUTE = "substitute"    # a mistake costs its points once: the reference answers the later exercise's calls
    CASCADE = "cascade"          # the later exercise calls the student's own (wrong) function and may lose again


class Course(_Strict):
    _root: Path | None = PrivateAttr(None)

    name: str = Field(description="course name shown in reports")
    seed: int = Field(description="grading seed; hidden inputs derive from it, never shipped to students")
    language: Language = Field(Language.ZH, description="default language of messages: zh or en")
    tolerances: Tolerances
    limits: Limits = Limits()
    earlier_mistakes: EarlierMistakes = Field(EarlierMistakes.SUBSTITUTE, description=(
        "an exercise that builds on an earlier one whose function lost points: substitute (graded as if that "
        "function were right: the reference, on the trusted side, answers its calls) or cascade (it calls the "
        "student's own function, and its mistakes may cost points again)"))
    timezone: str | None = Field(None, description=(
        "the IANA time zone (Asia/Shanghai) of dates written without an offset: due, late_until, extensions"))
    late: LatePolicy = Field(LatePolicy(), description=(
        "the default late policy: kind none, zero, per_hour or per_day (percent or points, floor) or custom "
        "(function: module:function of a .py file in the course folder)"))
    late_marker: str = Field("late_unknown", description=(
        "a submission an LMS marked late without a time (Canvas' _late): late_unknown (the policy applies as "
        "for one started hour or day late) or on_time (no penalty); either way its feedback says so"))
    service: ServicePolicy = Field(default=ServicePolicy(), description="the grading service's rules (serve)")
    roster: str | None = Field(None, description=(
        "the class list, a CSV beside course.yml (the file autograder serve roster reads): the kit's own columns "
        "(student, name, email, section, canvas_id, moodle_id_number) or Canvas' or Moodle's export as downloaded; "
        "an extension naming a student not on it is a typo (an error naming the row), and the LMS files match "
        "students by its ids; without one, an extension for a student with no notebook in a batch is only noted"))
    lms: list[str] | None = Field(None, description=(
        "the LMSs the grades go to (canvas, moodle): lms-skipped.csv lists the graded rows their files cannot "
        "match (no id of theirs); default: every LMS the roster or the downloads give ids of"))
    assignments: list[Assignment] = Field(min_length=1)

    @field_validator("lms")
    @classmethod
    def _lms(cls, value: list[str] | None) -> list[str] | None:
        unknown = [v for v in value or () if v not in LMS_NAMES]
        if unknown:
            raise ValueError(f"lms lists {', '.join(map(repr, unknown))}: the kit writes files for "
                             f"{', '.join(LMS_NAMES)}")
        return value

    @field_validator("late_marker")
    @classmethod
    def _late_marker(cls, value: str) -> str:
        if value not in ("late_unknown", "on_time"):
            raise ValueError(f"late_marker is late_unknown or on_time, got {value!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                clock.zone(value)
            except ConfigError:
                raise ValueError(f"{value!r} is not an IANA time zone (Asia/Shanghai, Europe/Berlin, UTC)") from None
        return value

    @model_validator(mode="after")
    def _deadlines(self) -> Course:
        """Each due date and late window, read now: a date without a time zone is an error here, not later."""
        for a in self.assignments:
            due = self.deadline_of(a.id, where="course.yml")
            if a.late_until is not None and due[0] is None:
                raise ValueError(f"assignment {a.id}: late_until needs a due date")
            if due[0] is not None and due[1] is not None and due[1] < due[0]:
                raise ValueError(f"assignment {a.id}: late_until ({a.late_until}) is before due ({a.due})")
        return self

    @property
    def zone(self) -> datetime.tzinfo:
        """The course's time zone (``timezone:``), in which its dates and pages are written; UTC without one."""
        return clock.zone(self.timezone)

    def roster_students(self) -> set[str] | None:
        """The student ids of course.yml's ``roster`` file; None without one. ConfigError names the file."""
        roster = self.roster_members()
        return None if roster is None else roster.students

    def roster_members(self) -> Any:
        """course.yml's ``roster`` file read (:class:`autograder.course.roster.Roster`: names, emails, LMS ids), or None
        without one. ConfigError names the file and row."""
        if not self.roster:
            return None

        return read_roster(self.root / self.roster, where=f"course.yml: roster: {self.roster}")

    def deadline_of(self, assignment_id: str, where: str = "course.yml") -> tuple[Any, Any, LatePolicy]:
        """(due, late_until, policy) of one assignment, as aware datetimes (None where not set)."""
        a = next(x for x in self.assignments if x.id == assignment_id)
        times = []
        for name in ("due", "late_until"):
            value = getattr(a, name)
            try:
                times.append(None if value is None else
                             clock.parse_time(value, where=f"assignment {a.id}: {name}", default_tz=self.timezone))
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return times[0], times[1], a.late or self.late

    @model_validator(mode="after")
    def _builds_on_earlier(self) -> Course:
        """A builds_on outside its own assignment names an exercise of an earlier assignment (a pasted answer)."""
        earlier: set[str] = set()
        for a in self.assignments:
            own = {e.id for e in a.exercises}
            for e in a.exercises:
                for dep in e.builds_on:
                    if dep not in own and dep not in earlier:
                        raise ValueError(f"exercise {e.id}: builds_on: {dep!r} is not an exercise of assignment "
                                         f"{a.id} or of an assignment before it")
            earlier |= own
        return self

    @model_validator(mode="after")
    def _double_marked(self) -> Course:
        """service.double_marking names written questions of the course."""
        known = [q.id for a in self.assignments for q in a.questions]
        unknown = [q for q in self.service.double_marking.questions if q not in known]
        if unknown:
            raise ValueError(f"service.double_marking.questions: {unknown[0]!r} is not a written question of the "
                             f"course (they are {', '.join(known) or 'none'})")
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> Course:
        seen: dict[str, str] = {}
        for a in self.assignments:
            for eid in [e.id for e in a.exercises] + [q.id for q in a.questions]:
                if eid in seen:
                    raise ValueError(f"exercise ID {eid!r} appears twice ({seen[eid]} and {a.id})")
                seen[eid] = a.id
        ids = [a.id for a in self.assignments]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"assignment ID {dupes[0]!r} appears twice")
        return self

    # -- where the course's files are ----------------------------------------
    @property
    def root(self) -> Path:
        """The folder of the course.yml this course was read from (source/, release/, solutions/)."""
        if self._root is None:
            raise ConfigError("this course was not read from a file: it has no folder",
                              hint="load it with autograder.course.config.load_course(PATH)")
        return self._root

    def content_dir(self, assignment: Assignment | str) -> Path:
        """The folder of one assignment's notebook, checks, hidden checks and known mistakes:
        ``source/<id>/`` in an instructor's course, ``<id>/`` in a student's (only public checks there)."""
        a = assignment if isinstance(assignment, str) else assignment.id
        source = self.root / "source" / a
        return source if source.is_dir() or (self.root / "source").is_dir() else self.root / a

    # -- look-ups -----------------------------------------------------------
    def assignment(self, assignment_id: str) -> Assignment:
        for a in self.assignments:
            if a.id == assignment_id:
                return a
        ids = [a.id for a in self.assignments]
        starts = [i for i in ids if i.startswith(str(assignment_id))]
        guess = f"did you mean {starts[0]!r}?" if len(starts) == 1 else did_you_mean(assignment_id, ids)
        guess = f"{guess} " if guess else ""
        raise UnknownExercise(f"course.yml has no assignment {assignment_id!r}",
                              hint=f"{guess}the assignments are {', '.join(ids)}")

    def exercise(self, exercise_id: str) -> tuple[Assignment, Exercise]:
        for a in self.assignments:
            for e in a.exercises:
                if e.id == exercise_id:
                    return a, e
        known = [e.id for a in self.assignments for e in a.exercises]
        raise UnknownExercise(
            f"course.yml has no exercise {exercise_id!r}",
            hint=did_you_mean(exercise_id, known) or f"known exercises: {', '.join(known)}",
        )

    @property
    def exercises(self) -> list[Exercise]:
        return [e for a in self.assignments for e in a.exercises]


def parse_course(data: Any, source: str = "course.yml") -> Course:
    """Validate already-parsed YAML data; raises ConfigError naming ``source`` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level, got {type(data).__name__}")
    try:
        return Course.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, data, Course, source)) from None


def load_course(path: str | Path | None = None) -> Course:
    """Read and validate course.yml (default: :func:`course_file`); a folder means its course.yml."""
    file = Path(path) if path is not None else course_file()
    if file.is_dir():
        file = file / COURSE_NAME
    return _load(str(file.resolve()), file.stat().st_mtime_ns if file.exists() else 0)


@functools.lru_cache(maxsize=8)
def _load(file: str, _mtime: int) -> Course:
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except ValueError as exc:
        # PyYAML builds a value with Python's own constructors: a date that is no date (2026-13-01), an integer
        # past int()'s limit of digits. Its own words, less the advice to raise that limit.
        said = str(exc).split("; use sys.set_int_max_str_digits")[0][:200]
        raise ConfigError(f"{path}: a value YAML cannot read ({said})") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deep to read (lists or mappings inside one another, hundreds of "
                          "levels)") from None
    try:
        course = parse_course(data, source=path.name)
    except RecursionError:          # (nested just shallow enough for YAML, too deep for the checks)
        raise ConfigError(f"{path}: nested too deep to check (lists or mappings inside one another)") from None
    course._root = path.parent  # noqa: SLF001 - Course's folder: set once, by its loader
    return course
