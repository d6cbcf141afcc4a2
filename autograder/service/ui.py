"""What the service's pages share: their words in both languages, the templates, the style and the one
script, and rendering a page.

Server-rendered HTML (Jinja2, autoescaped: every piece of student text, from names to exception
messages, is escaped where it is written into a page) with one small script served by the
service (no inline script: the Content-Security-Policy forbids it). The script only follows
submissions to their verdict through the JSON API (long polls) and refreshes the class report.
Chinese by default (course.yml's language), English by the switch at the top of every page.
"""
from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from autograder.course.clock import readable
from autograder.core.messages import CATALOGUE
from autograder.service import sessions
from autograder.service.context import Service
from autograder.service.errors import base_path
from autograder.service.hub import local_path

if TYPE_CHECKING:
    from autograder.course.config import Course

#: The pages' words by language: the catalogue's ``page.*`` messages (:mod:`autograder.core.messages`, where every
#: sentence a person reads is kept in both languages), and the sign-in's refusal, said as the API says it.
UI: dict[str, dict[str, str]] = {
    language: {key.removeprefix("page."): pair[i] for key, pair in CATALOGUE.items() if key.startswith("page.")}
    | {"bad_token": CATALOGUE["service.bad_token"][i]}
    for i, language in enumerate(("zh", "en"))
}

#: The pages' templates (autoescaped: a value is escaped unless the code marked it as the kit's own HTML).
_ENV = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True))

STYLE = """header{border-bottom:1px solid #ccc;padding:.4rem 0;margin-bottom:1rem}form.inline{display:inline}
label{margin-right:.8rem}section{margin:1.5rem 0}.state.queued,.state.running{color:#8a6d00}.state.done{color:#1a7f37}
.state.failed{color:#b42318}tr.feedback td{border-top:none;background:#fafafa}details summary{cursor:pointer}
.explanation p{margin:.2rem 0;white-space:pre-wrap}.explanation .head{font-weight:bold}.explanation .fail{color:#b42318;
margin-top:1rem}.explanation .pass{color:#1a7f37;margin-top:1rem}.explanation .mistake{color:#8e24aa}
.explanation .said,.explanation .mistake{margin-left:1.5rem}.explanation .call{margin-left:3rem;font-family:monospace}
header nav{display:inline}.not_attempted{color:#666}
.answer-text{white-space:pre-wrap;border:1px solid #ccc;padding:.6rem;background:#fcfcfc;max-height:40rem;overflow:auto}
.model-text{border:1px solid #ccc;padding:0 .6rem;background:#fcfcfc;max-height:40rem;overflow:auto}
.math{font-family:monospace;white-space:pre-wrap}
fieldset div{margin:.3rem 0}
:focus-visible{outline:3px solid #1d4ed8;outline-offset:2px}main:focus{outline:none}
.skip{position:absolute;left:-100vw;top:.3rem}.skip:focus{left:.5rem;z-index:10;background:#fff;padding:.3rem .6rem}
.sr-only{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);
white-space:nowrap;border:0}
"""

SCRIPT = r"""// Follows each unfinished submission to its verdict (long polls on the JSON API), then reloads the page;
// shows the time left to each due date (the dates themselves are the page's, in the course's zone);
// refreshes the dashboard's class report.
(function () {
  const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";
  const base = meta("base"), zh = meta("lang") === "zh";
  const left = () => document.querySelectorAll("[data-due]").forEach((el) => {
    const ms = new Date(el.dataset.due) - new Date();
    if (ms <= 0) { el.textContent = zh ? "已过截止时间" : "past the due date"; return; }
    const d = Math.floor(ms / 864e5), h = Math.floor(ms / 36e5) % 24, m = Math.floor(ms / 6e4) % 60;
    el.textContent = zh ? `剩余 ${d} 天 ${h} 小时 ${m} 分` : `${d} d ${h} h ${m} min left`;
  });
  left(); setInterval(left, 30000);
  async function follow(cell) {
    const id = cell.dataset.submission, was = cell.dataset.state;
    for (;;) {
      try {
        const r = await fetch(`${base}/api/submissions/${id}?wait=20`, {credentials: "same-origin"});
        if (r.status === 429) { await new Promise((ok) => setTimeout(ok, 5000)); continue; }
        if (!r.ok) return;
        const s = await r.json();
        if (s.state !== was) { location.reload(); return; }
      } catch (e) { await new Promise((ok) => setTimeout(ok, 5000)); }
    }
  }
  document.querySelectorAll("[data-submission]").forEach((c) => {
    if (c.dataset.state === "queued" || c.dataset.state === "running") follow(c);
  });
  document.querySelectorAll("form[data-autosubmit]").forEach((f) => f.submit());   // LTI: back to the LMS
  const report = document.getElementById("report");
  if (report && report.dataset.refresh) {
    setInterval(async () => {
      try {
        const r = await fetch(report.dataset.refresh, {credentials: "same-origin"});
        if (r.ok) report.innerHTML = await r.text();    // the service's own escaped HTML
      } catch (e) { /* the next round tries again */ }
    }, 10000);
  }
})();
"""



def closes_form(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A page's POST handler whose parsed form (and its uploaded file) is closed however it ends."""
    @functools.wraps(handler)
    async def closing(request: Request, *args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(request, *args, **kwargs)
        finally:
            await request.close()
    return closing


def to_dashboard(request: Request, said: str, page: str = "") -> RedirectResponse:
    """Back to the dashboard (or its ``page``: roster, tokens) after one of its forms, saying what was done."""
    where = f"/dashboard/{page}" if page else "/dashboard"
    return RedirectResponse(f"{base_path(request)}{where}?notice={quote(said)}", status_code=303)


def language(request: Request, course: Course) -> str:
    wanted = request.query_params.get("lang") or request.cookies.get(sessions.LANGUAGE_COOKIE)
    return wanted if wanted in UI else (course.language.value if course.language.value in UI else "zh")


def local_next(request: Request, text: str | None) -> str:
    """A page to go to after sign-in: a path of this service (the same rule as the Hub's sign-in), else
    the service's first page."""
    base = base_path(request) + "/"
    return local_path(base, text) or base


def language_links(request: Request) -> dict[str, str]:
    """The language switch's links: this page (its query kept, less a one-time notice) in each language."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("lang", "notice")]
    return {code: "?" + urlencode([*kept, ("lang", code)]) for code in UI}


def render(request: Request, state: Service, name: str, signed: sessions.Signed | None, *, csrf: str | None = None,
           status: int = 200, **context: Any) -> HTMLResponse:
    """The page ``templates/NAME.html`` in the reader's language."""
    course = state.course
    lang = language(request, course)
    page = _ENV.get_template(f"{name}.html").render(
        lang=lang, T=UI[lang], base=base_path(request), course=course.name, who=signed.caller if signed else None,
        switch=language_links(request),
        csrf=csrf or (signed.csrf if signed else ""), title=context.pop("title", course.name),
        notice=context.pop("notice", None) or request.query_params.get("notice", "")[:300] or None, **context)
    response = HTMLResponse(page, status_code=status)
    if request.query_params.get("lang") in UI:
        response.set_cookie(sessions.LANGUAGE_COOKIE, request.query_params["lang"], max_age=365 * 86400,
                            **sessions.cookie_options(request))
    return response



def local_text(when: dt.datetime, course: Course) -> str:
    """A time as the pages write it: the one format people read (:func:`autograder.course.clock.readable`), in the
    course's zone (``2026-12-10 23:59 +08:00``): the same on every page, whatever the reader's own zone."""
    return readable(when, course.zone)
