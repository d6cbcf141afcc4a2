"""The service's pages over HTTP, as the page tests reach them: a course, a running site, a browser-like client.
:data:`COURSE` is this course with 02_qkv_attention due far ahead (before its due date students see titles and
pass/fail); :func:`site_for` runs the app for a course on uvicorn (a thread of this process) over a new SQLite
database, with tokens for ada, ben and a teacher (the ``site`` fixture of tests/conftest.py is it for
:data:`COURSE`); :func:`browser` is an httpx client that keeps cookies as a browser does, :func:`sign_in` signs it
in with a token through the login form, :func:`csrf_of` reads a page's CSRF token, and :func:`said` tells whether a
refusal's page says a message of the catalogue, in both its languages.
"""
from __future__ import annotations

import contextlib
import html
import re

import httpx

from served import serving, student_token
from autograder.core.messages import CATALOGUE
from autograder.course.config import load_course
from autograder.service import db, tokens
from autograder.service.app import create_app

COURSE = load_course()
# The course with a due date for 02_qkv_attention, far ahead: before it, students see titles and pass/fail.
COURSE = COURSE.model_copy(update={"assignments": [a.model_copy(update={"due": "2099-12-01T23:59:00+00:00"})
                                                   if a.id == "02_qkv_attention" else a for a in COURSE.assignments]})
QKV = COURSE.assignment("02_qkv_attention")


@contextlib.contextmanager
def site_for(folder, course):
    """The app for ``course`` on uvicorn (a thread) over a new database in ``folder``; tokens for ada, ben and
    a teacher: (base URL, engine, tokens, database file)."""
    database = folder / "service.db"
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    people = {"ada": student_token(engine, "ada"), "ben": student_token(engine, "ben"),
              "teacher": tokens.issue(engine, "teacher", role="instructor")}
    try:
        with serving(create_app(engine, course)) as url:
            yield url, engine, people, database
    finally:
        engine.dispose()


def browser(url: str) -> httpx.Client:
    """A client for the site at ``url`` that keeps its cookies and follows no redirect."""
    return httpx.Client(base_url=url, timeout=30, follow_redirects=False)


def csrf_of(page: str) -> str:
    """The CSRF token of a page's form."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def sign_in(client: httpx.Client, token: str, next_url: str = "/") -> httpx.Response:
    """Sign ``client`` in with ``token`` through the login form; the form's answer."""
    page = client.get("/login")
    assert page.status_code == 200
    return client.post("/login", data={"csrf": csrf_of(page.text), "token": token, "next": next_url})


def said(response: httpx.Response, key: str) -> bool:
    """The refusal's page says the message ``key`` (in English under the Chinese: the page says both)."""
    zh, en = CATALOGUE[key]
    return all(html.escape(text.split("{")[0], quote=True) in response.text for text in (zh, en))
