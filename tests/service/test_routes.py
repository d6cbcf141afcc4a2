"""Issue 49: one authorization check per route, held by walking the app's own routes.

Every route that is not on the short public list (signing in, the static files, the API's schema) depends on
one of the checks of :mod:`autograder.service.auth`: a new route without one fails here without being listed.
Then each is called as it would be by a stranger (401 from the API, a redirect to sign in from a page) and,
where staff is needed, by a signed-in student (403).

Issue 65, item 6: every id a route reads (from its path, its query or its form) goes through the service's one id
parser (autograder.service.errors), found from the routes themselves: an id too big for the database, a negative one
and a word are each a 4xx naming the parameter, never a 500.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BeforeValidator

from served import serving, student_token
from pages import browser, csrf_of, sign_in
from route_walk import route_params, routes
from autograder.course.config import load_course
from autograder.service import auth, db, tokens
from autograder.service.app import create_app
from autograder.service.errors import IdParameter
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
    assert {("GET", "/dashboard/grading/moderate"), ("POST", "/dashboard/grading/moderate")} <= set(instructor)
    assert ("POST", "/dashboard/grading/unanswered") in staff
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


# -- ids: one bounded parser (issue 65, item 6) ------------------------------------------------------------------------
#: What each id parameter is sent: past a database integer (2**63 - 1), negative, not a number.
BAD_IDS = (str(2**70), "-1", "x")
#: The service's id parsers as a route's own code calls them: ``parse_id(value, "name")``, ``form_id(form, "name")``.
ID_PARSERS = {"parse_id", "form_id"}
#: The package whose functions a route's code is followed into: a helper there that reads the route's form (a mark's
#: form, read once for two routes: ``grading.mark_form``) reads the route's ids.
ROUTES_PACKAGE = "autograder.service.routes."


def _checked(field: Any) -> IdParameter | None:
    """The id check a declared parameter carries (errors.checked_id), if any."""
    for m in getattr(field.field_info, "metadata", ()):
        if isinstance(m, BeforeValidator) and isinstance(m.func, IdParameter):
            return m.func
    return None


def _routes_function(func: ast.expr, namespace: dict[str, Any]) -> Any:
    """The function of the routes' modules a call names (``mark_form(...)``, ``grading.mark_form(...)``), else None."""
    if isinstance(func, ast.Name):
        found = namespace.get(func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        found = getattr(namespace.get(func.value.id), func.attr, None)
    else:
        return None
    return found if inspect.isfunction(found) and found.__module__.startswith(ROUTES_PACKAGE) else None


def _named_in_code(endpoint: Any, seen: set[Any] | None = None) -> set[str]:
    """The names a route's own code hands to the id parsers (a literal second argument), and those of every function
    of the routes' modules it calls, followed as far as they call (each once)."""
    function = inspect.unwrap(endpoint)
    seen = set() if seen is None else seen
    if function in seen:
        return set()
    seen.add(function)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if called in ID_PARSERS and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            names.add(str(node.args[1].value))
        helper = _routes_function(node.func, function.__globals__)
        if helper is not None:
            names |= _named_in_code(helper, seen)
    return names


def id_parameters(app: FastAPI) -> list[tuple[str, str, str, str]]:
    """(method, path, where, name) of every id a route reads: the path and query parameters declared with the id
    check, and the names its code parses (from its path or query where it declares one so named, else from its form
    on a POST and its query on a GET)."""
    out = set()
    for method, path, route in routes(app):
        if not isinstance(route, APIRoute):
            continue
        declared = {f.name: where for where, f in route_params(route.dependant)}
        for where, f in route_params(route.dependant):
            if _checked(f) is not None:
                out.add((method, path, where, f.name))
        for name in _named_in_code(route.endpoint):
            out.add((method, path, declared.get(name, "form" if method == "POST" else "query"), name))
    return sorted(out)


def test_every_id_a_route_reads_is_found_and_every_int_parameter_is_bounded(tmp_path):
    engine, app = _app(tmp_path)
    try:
        found = id_parameters(app)
        for one in [("GET", "/api/submissions/{submission_id}", "path", "submission_id"),
                    ("GET", "/dashboard/explain", "query", "submission"),
                    ("GET", "/dashboard/grading/answer", "query", "submission"),
                    ("POST", "/dashboard/requeue", "form", "submission"),
                    ("POST", "/dashboard/tokens/revoke", "form", "token"),
                    ("POST", "/dashboard/reviews/answer", "form", "review"),
                    ("POST", "/dashboard/grading/unanswered", "form", "answers"),
                    ("GET", "/dashboard/grading/moderate", "query", "submission"),
                    ("POST", "/dashboard/grading/answer", "form", "submission"),         # (through grading.mark_form)
                    ("POST", "/dashboard/grading/moderate", "form", "submission"),       # (the same)
                    ("POST", "/dashboard/adjust", "form", "submission")]:
            assert one in found, (one, found)
        # A parameter FastAPI reads as an int is an id (through the parser) or has an upper bound: never a number
        # the database cannot hold.
        for method, path, route in routes(app):
            if not isinstance(route, APIRoute):
                continue
            for where, f in route_params(route.dependant):
                if f.field_info.annotation is int:
                    bounded = _checked(f) is not None or any(hasattr(m, "le") or hasattr(m, "lt")
                                                              for m in f.field_info.metadata)
                    assert bounded, (method, path, where, f.name)
    finally:
        engine.dispose()


def test_no_route_reads_a_number_by_hand():
    """The routes' modules read numbers only through the parsers: no ``int(...)`` of a request's text, no
    ``isdigit``/``isdecimal`` check of their own (a check by hand once let 2**70 reach a query: a 500)."""
    routes_dir = Path(__file__).resolve().parents[2] / "autograder" / "service" / "routes"
    found = []
    for module in sorted(routes_dir.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("isdigit", "isdecimal", "isnumeric"):
                found.append(f"{module.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args:
                arg = node.args[0]
                names = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
                if isinstance(arg, ast.Name) or names & {"form", "request", "text", "value"}:
                    found.append(f"{module.name}:{node.lineno} int({ast.unparse(arg)})")
    assert found == []


def test_an_id_out_of_range_negative_or_not_a_number_is_a_4xx_naming_it_on_every_route(tmp_path):
    engine, app = _app(tmp_path, hub=False)
    prof = tokens.issue(engine, "prof", role="instructor")
    found = id_parameters(app)
    try:
        with serving(app) as url, browser(url) as client:
            sign_in(client, prof)
            csrf = csrf_of(client.get("/dashboard").text)
            for method, path, where, name in found:
                for bad in BAD_IDS:
                    target = path.replace("{" + name + "}", bad) if where == "path" else path
                    for example, value in EXAMPLES.items():
                        target = target.replace(example, value)
                    form = {"csrf": csrf} if method == "POST" else None
                    if where == "form":
                        form = {"csrf": csrf, name: bad}
                    answer = client.request(method, target, params={name: bad} if where == "query" else None,
                                            data=form, headers={"Authorization": f"Bearer {prof}"}
                                            if target.startswith("/api/") else None)
                    assert 400 <= answer.status_code < 500, (method, path, where, name, bad, answer.status_code,
                                                             answer.text[:300])
                    assert name in answer.text, (method, path, where, name, bad, answer.text[:300])
            assert client.get("/dashboard").status_code == 200         # still signed in: each reached the parser
    finally:
        engine.dispose()
