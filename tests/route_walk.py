"""Walking the service app's own routes, for the tests that check every route rather than a list of them.
:func:`routes` gives each route of an app (from :func:`autograder.service.app.app_routes`) with each of its methods,
HEAD aside; :func:`route_params` gives every path and query parameter FastAPI reads for a route, its dependencies'
too. tests/service/test_routes.py walks them for the authorization checks and the id parsers,
tests/features/test_maximum.py for every page's maximum.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI

from autograder.service.app import app_routes


def routes(app: FastAPI) -> Iterator[tuple[str, str, Any]]:
    """(method, path, route) of every route of the app, HEAD aside."""
    for route in app_routes(app):
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                yield method, route.path, route


def route_params(dependant: Any) -> Iterator[tuple[str, Any]]:
    """("path" or "query", field) of every parameter FastAPI reads for a route, its dependencies' too."""
    for where, fields in (("path", dependant.path_params), ("query", dependant.query_params)):
        for f in fields:
            yield where, f
    for dep in dependant.dependencies:
        yield from route_params(dep)
