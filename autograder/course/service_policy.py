"""course.yml's ``service`` section: what the grading service lets students see and do, double marking and e-mail.

Each key is declared once here, with its description and default, as :mod:`autograder.course.config` declares
the rest: ``service`` itself (:class:`ServicePolicy`), the written questions marked twice
(:class:`DoubleMarking`) and the e-mail the service sends students (:class:`MailSettings`).

A value is checked as it is read (a ValueError saying what was expected, which the config's reader turns into a
ConfigError naming the file and the field); nothing here connects anywhere. No secret is ever in course.yml (it
ships to students): the mail password is named by its environment variable, never given.
"""
from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


#: What sends a student an e-mail (course.yml's service.email.events; autograder.service.mail).
MAIL_EVENTS = ("verdict", "hand_grade", "review_answer")
#: An SMTP connection's TLS, and the port each uses where service.email.port is not given.
MAIL_TLS_PORTS = {"none": 25, "starttls": 587, "ssl": 465}
#: An environment variable's name as service.email.password_env gives it: upper case, so that a password written
#: there by mistake (which is then said in errors and logs) is refused instead.
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class MailSettings(_Strict):
    """E-mail to students when something of theirs is ready (autograder.service.mail): without this section, none.
    The password is never here (course.yml ships to students): ``password_env`` names the variable that holds it."""

    host: str = Field(min_length=1, description="the SMTP server: a host name or address")
    port: int | None = Field(default=None, ge=1, le=65535, description=(
        "its port (default: 25 for tls none, 587 for starttls, 465 for ssl)"))
    tls: str = Field(default="starttls", description=(
        "none (plain SMTP: only to a relay on the same machine or a trusted network), starttls (the connection "
        "upgraded to TLS; port 587) or ssl (TLS from the start; port 465)"))
    username: str | None = Field(default=None, description="the SMTP login (none: the server takes mail unsigned)")
    password_env: str | None = Field(default=None, description=(
        "the name of the environment variable of autograder serve that holds the login's password (required with "
        "username; never the password itself)"))
    sender: str = Field(description='the From address: grader@example.edu or "Course <grader@example.edu>"')
    events: list[str] = Field(default_factory=lambda: list(MAIL_EVENTS), description=(
        "what sends a student a mail: verdict (a submission's first automatic grade), hand_grade (a person graded "
        "a written answer), review_answer (a review request answered); default: all three; [] sends none"))
    timeout_seconds: float = Field(default=30, gt=0, le=600, description=(
        "how long one SMTP connection or command may take before the mail is tried again later"))

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if any(c.isspace() for c in value) or "/" in value:
            raise ValueError(f"host is a host name or address (smtp.example.edu), got {value!r}")
        return value

    @field_validator("tls")
    @classmethod
    def _tls(cls, value: str) -> str:
        if value not in MAIL_TLS_PORTS:
            raise ValueError(f"tls is none, starttls or ssl, got {value!r}")
        return value

    @field_validator("password_env")
    @classmethod
    def _password_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(f"password_env is the name of an environment variable (upper case: SMTP_PASSWORD), never "
                             f"the password itself; got {len(value)} characters that are no such name")
        return value

    @field_validator("sender")
    @classmethod
    def _sender(cls, value: str) -> str:
        from email.utils import parseaddr  # noqa: PLC0415 - only a course with mail needs it

        _name, address = parseaddr(value)
        if "\n" in value or "\r" in value or "@" not in address or any(c.isspace() for c in address):
            raise ValueError(f'sender is an e-mail address (grader@example.edu or "Course <grader@example.edu>"), '
                             f"got {value!r}")
        return value

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in MAIL_EVENTS]
        if unknown:
            raise ValueError(f"events lists {', '.join(map(repr, unknown))}: the events are "
                             f"{', '.join(MAIL_EVENTS)}")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _login(self) -> MailSettings:
        if (self.username is None) != (self.password_env is None):
            raise ValueError("username and password_env go together (a login needs both; "
                             "a server that takes mail unsigned, neither)")
        return self

    @property
    def port_or_default(self) -> int:
        """The port to connect to: ``port``, else the usual one of ``tls``."""
        return self.port or MAIL_TLS_PORTS[self.tls]


#: The host names of this machine itself: an LMS elsewhere never reaches the service there.
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def public_url(value: str) -> str:
    """course.yml's ``service.public_url`` checked (ValueError says why), without its trailing slash: an https URL
    (the LMS launches tools over HTTPS, and the launch's cookie must be ``SameSite=None; Secure`` to come back with
    its cross-site POST) whose host is not this machine's loopback (the LMS fetches the tool's keys from it and
    sends browsers to it), with neither user name, query nor fragment."""
    import ipaddress  # noqa: PLC0415 - only a course with a public URL needs it
    from urllib.parse import urlsplit  # noqa: PLC0415 - (as above)

    said = f"public_url is the https URL the LMS reaches the service at (https://grader.example.edu), got {value!r}"
    if len(value) > 300 or not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError(said)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - (a port that is no number or out of range raises here)
    except ValueError:
        raise ValueError(said) from None
    host = (parts.hostname or "").rstrip(".")
    if parts.scheme == "http" and host:
        raise ValueError(f"public_url {value!r} is plain http: LMSs launch a tool over HTTPS only (and the launch's "
                         "cookie must be Secure to come back with the LMS's cross-site POST); put TLS in front of the "
                         "service and give its https URL")
    if parts.scheme != "https" or not host or parts.username is not None or parts.query or parts.fragment \
            or "?" in value or "#" in value:
        raise ValueError(said)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        loopback = host in _LOOPBACK_NAMES or host.endswith(".localhost")
    else:
        loopback = address.is_loopback or address.is_unspecified
    if loopback:
        raise ValueError(f"public_url {value!r} names this machine's loopback address: an LMS elsewhere cannot "
                         "reach it (the address the LMS and the browsers reach the service at; a trial on one "
                         "machine gives its URL on the command line: serve lti register --url, serve lti selftest "
                         "--url)")
    return value.rstrip("/")


class DoubleMarking(_Strict):
    """Written questions marked twice, blind (autograder.service.double_marking): two staff members mark each answer
    without seeing the other's mark; where their totals are within ``threshold`` of each other, their mean counts,
    else an instructor moderates, seeing both."""

    questions: list[str] = Field(default_factory=list, description=(
        'the written questions ("2.Q1") two staff members mark, each blind to the other\'s mark; where their totals '
        "differ by at most the threshold, the mean of the two counts (the items both ticked, both comments), else "
        "an instructor decides on the moderation page, seeing both; [] (the default): one mark each, as ever"))
    threshold: float = Field(default=0.5, ge=0, description=(
        "the largest difference of the two markers' totals (points) still taken as agreement; past it the answer "
        "waits for an instructor's decision"))

    @field_validator("questions")
    @classmethod
    def _questions(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class ServicePolicy(_Strict):
    """What the grading service (autograder serve) lets students see and do."""

    before_due: str = Field(default="titles", description=(
        "what a student sees of a verdict before the due date (always, for an assignment without one): "
        "everything (all feedback shows), titles (the score, every check's title and pass/fail, the public "
        "checks' messages) or score (the score only); after the due date, everything"))
    attempts: int | None = Field(default=None, ge=1, description="submissions per assignment, at most")
    attempts_per_day: int | None = Field(default=None, ge=1, description=(
        "submissions per assignment and day (the course's timezone), at most"))
    counts: str = Field(default="last", description="which attempt counts in the export: last or best")
    queued_per_student: int | None = Field(default=3, ge=1, description=(
        "a student's submissions waiting for a worker, at most (another upload is refused with 429 until one is "
        "graded); workers take every student's first waiting submission before anyone's second"))
    instructors: list[str] = Field(default_factory=list, description=(
        "JupyterHub users who are instructors or TAs in the service (they see everything); every other Hub "
        "user with access to the service is a student, their Hub name their student id"))
    instructor_group: str | None = Field(default="instructors", description=(
        "a JupyterHub group whose members are instructors or TAs too (none: only the list)"))
    public_url: str | None = Field(default=None, description=(
        "the service's address as the LMS and the browsers reach it (https://grader.example.edu; with the path it is "
        "mounted at, such as https://hub.example.edu/services/autograder): the LTI URLs serve lti register prints "
        "and the dashboard's LTI page shows, and the service serve lti selftest checks; an https URL, never a "
        "loopback address (a trial on one machine names its URL on the command line instead: --url); none: those "
        "URLs are the ones a page was opened at"))
    blind_grading: bool = Field(default=False, description=(
        "hand-grading pages hide the students' names and ids (each answer is shown by its submission number)"))
    review_days: int = Field(default=7, ge=0, description=(
        "days a student may ask for a review of a score, counted from the due date (from the grading, for an "
        "assignment without one, or where the grading came later); 0: no reviews"))
    double_marking: DoubleMarking = Field(default=DoubleMarking(), description=(
        "written questions two staff members mark blind, and how far apart their totals may be before an "
        "instructor decides (questions, threshold)"))
    email: MailSettings | None = Field(default=None, description=(
        "e-mail to students when a verdict, a hand grade or a review answer is ready (SMTP; the mail outbox of "
        "autograder serve); none: no mail"))

    @field_validator("before_due")
    @classmethod
    def _before_due(cls, value: str) -> str:
        if value not in ("everything", "titles", "score"):
            raise ValueError(f"before_due is everything, titles or score, got {value!r}")
        return value

    @field_validator("counts")
    @classmethod
    def _counts(cls, value: str) -> str:
        if value not in ("last", "best"):
            raise ValueError(f"counts is last or best, got {value!r}")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return None if value is None else public_url(value)
