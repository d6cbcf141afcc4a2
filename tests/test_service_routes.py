"""Issue 49: one authorization check per route, held by walking the app's own routes.

Every route that is not on the short public list (signing in, the static files, the API's schema) depends on
one of the checks of :mod:`autograder.service.auth`: a new route without one fails here without being listed.
Then each is called as it would be by a stranger (401 from the API, a redirect to sign in from a page) and,
where staff is needed, by a signed-in student (403).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from served import serving, student_token
from test_service_pages import browser, csrf_of, sign_in
from autograder.config import load_course
from autograder.service import auth, db, tokens
from autograder.service.app import app_routes, create_app
from autograder.service.hub import Hub

COURSE = load_course()
HUB_ENV = {"JUPYTERHUB_API_TOKEN": "t" * 32, "JUPYTERHUB_SERVICE_PREFIX": "/services/grader/",
           "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api"}
#: A value for each path parameter, so that a route can be called.
EXAMPLES = {"{submission_id}": "1", "{name}": "grades.csv"}


def _calls(dependant: Any) -> Iterator[Any]:
    for dep in dependant.dependencies:
        yield dep.call
        yield from _calls(dep)


def routes(app: FastAPI) -> Iterator[tuple[str, str, Any]]:
    """(method, path, route) of every route of the app, HEAD aside."""
    for route in app_routes(app):
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                yield method, route.path, route


def unguarded(app: FastAPI) -> list[str]:
    """The routes that are neither public nor behind one of the checks."""
    out = []
    for method, path, route in routes(app):
        if (method, path) in auth.PUBLIC_ROUTES:
            continue
        checks = set(_calls(route.dependant)) & set(auth.CHECKS) if isinstance(route, APIRoute) else set()
        if not checks:
            out.append(f"{method} {path}")
    return out


def _app(tmp_path, hub: bool = True):
    engine = db.engine_for(str(tmp_path / "service.db"))
    db.upgrade(engine)
    return engine, create_app(engine, COURSE, hub=Hub(COURSE, HUB_ENV) if hub else None)


def test_every_route_is_public_or_names_its_caller(tmp_path):
    engine, app = _app(tmp_path)
    try:
        assert unguarded(app) == []
        seen = {(m, p) for m, p, _ in routes(app)}
        assert auth.PUBLIC_ROUTES <= seen, auth.PUBLIC_ROUTES - seen      # no stale entry on the public list
        assert len(seen - auth.PUBLIC_ROUTES) >= 12
    finally:
        engine.dispose()


def test_a_new_route_without_a_check_is_found(tmp_path):
    engine, app = _app(tmp_path, hub=False)
    try:
        from fastapi import APIRouter

        leak = APIRouter()

        @leak.get("/dashboard/everyone")
        def everyone() -> dict[str, str]:
            return {"all": "the grades"}

        app.include_router(leak)
        app.state.routers.append(leak)
        assert unguarded(app) == ["GET /dashboard/everyone"]
    finally:
        engine.dispose()


def test_every_guarded_route_refuses_a_stranger_and_every_staff_route_a_student(tmp_path):
    engine, app = _app(tmp_path, hub=False)
    ada = student_token(engine, "ada")
    guarded = [(m, p, r) for m, p, r in routes(app) if (m, p) not in auth.PUBLIC_ROUTES]
    ta = tokens.issue(engine, "T. A.", role="ta")
    staff = [(m, p) for m, p, r in guarded if set(_calls(r.dependant)) & set(auth.STAFF_CHECKS)]
    assert ("POST", "/dashboard/extensions/revoke") in staff and len(staff) >= 8
    instructor = [(m, p) for m, p, r in guarded if set(_calls(r.dependant)) & set(auth.INSTRUCTOR_CHECKS)]
    assert ("POST", "/dashboard/tokens/revoke") in instructor and ("POST", "/dashboard/roster/remove") in instructor
    try:
        with serving(app) as url, browser(url) as anonymous, browser(url) as student, browser(url) as assistant:
            sign_in(student, ada)
            csrf = csrf_of(student.get("/me").text)
            sign_in(assistant, ta)
            ta_csrf = csrf_of(assistant.get("/dashboard").text)
            for method, path in instructor:              # a TA: staff, but not an instructor
                refused = assistant.request(method, path, data={"csrf": ta_csrf} if method == "POST" else None)
                assert refused.status_code == 403, (method, path, refused.status_code)
            for method, path, _ in guarded:
                for name, value in EXAMPLES.items():
                    path = path.replace(name, value)
                seen = anonymous.request(method, path, data={"csrf": "x"} if method == "POST" else None)
                if path.startswith("/api/"):
                    assert seen.status_code == 401 and seen.json()["error"]["en"], (method, path, seen.text)
                else:
                    assert seen.status_code == 303 and "/login" in seen.headers["location"], (method, path, seen)
            for method, path in staff:
                for name, value in EXAMPLES.items():
                    path = path.replace(name, value)
                refused = student.request(method, path, data={"csrf": csrf} if method == "POST" else None)
                assert refused.status_code == 403, (method, path, refused.status_code)
    finally:
        engine.dispose()
