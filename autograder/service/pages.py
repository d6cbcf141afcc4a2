"""The service's web pages: a student's page and the instructor's dashboard, over the service's own data.

Server-rendered HTML (Jinja2, autoescaped: every piece of student text, from names to exception
messages, is escaped where it is written into a page) with one small script served by the
service (no inline script: the Content-Security-Policy forbids it). The script only follows
submissions to their verdict through the JSON API (long polls) and refreshes the class report.

Who is asking is checked on every route (:func:`_signed`): a page session (sessions.py), from a
token typed into the login form or, inside JupyterHub, the Hub's OAuth. Every form carries the
session's CSRF token and is refused without it. Chinese by default (course.yml's language),
English by the switch at the top of every page.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import functools
import io
import os
import tempfile
import zipfile
from pathlib import Path
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from autograder.service import queue as Q
from autograder.service import sessions
from autograder.service.db import ExtensionGrant, Job, Result, Submission, granted_extensions, writing
from autograder.service.tokens import Caller

UI: dict[str, dict[str, str]] = {
    "zh": {
        "login": "登录", "token": "令牌（课程发给你的）", "sign_in": "登录", "hub_sign_in": "用 JupyterHub 登录",
        "logout": "退出", "bad_token": "令牌无效：请检查课程发给你的令牌", "mine": "我的提交",
        "dashboard": "教师面板", "due": "截止", "no_due": "没有截止时间", "left": "剩余", "past_due": "已过截止时间",
        "attempts_left": "还可提交 {n} 次", "attempts_any": "提交次数不限", "today_left": "今天还可提交 {n} 次",
        "upload": "上传笔记本", "send": "提交", "submission": "提交", "received": "收到时间", "state": "状态",
        "score": "得分", "feedback": "反馈", "none_yet": "还没有提交。", "queued": "排队中", "running": "评分中",
        "done": "已评分", "failed": "评分出错", "unknown": "未知", "student": "学生", "assignment": "作业",
        "all": "全部", "filter": "筛选", "sort": "排序", "by_time": "按时间", "by_score": "按得分",
        "requeue": "重新评分", "requeue_all": "重新评分这次作业的全部提交", "extension": "延期",
        "new_due": "新的截止时间（课程时区 {tz}）", "reason": "原因", "grant": "批准延期",
        "downloads": "下载", "feedback_zip": "全部反馈（zip）", "report": "班级报告（实时）",
        "history": "{student} 的提交记录", "late": "迟交", "extensions": "已批准的延期",
        "queued_again": "已重新排队：{n} 份",
        "granted": "已批准 {student} 在 {assignment} 上延期到 {due}", "position": "前面还有 {n} 份",
        "students": "学生", "count": "{n} 份提交",
        "file_wins": "；但课程的 {file} 里已有这位学生这次作业的延期，以文件为准（请在文件里修改）",
        "revoke": "撤销", "revoked": "已撤销 {student} 在 {assignment} 上的延期（{n} 条）",
        "late_until": "迟交截止到 {when}", "late_open": "迟交不设截止",
        "late_costs": "；现在交会扣 {penalty} 分（满分 {points}）", "late_closed": "迟交时间也已过：现在交不计分",
        "edit_hint": "要修改一条延期，用上面的表单为同一位学生和作业再批准一次：新的取代旧的。",
        "explain": "练习 {exercise} 为什么扣分", "explanation": "{student} · 练习 {exercise}：为什么扣分（仅教师可见）",
    },
    "en": {
        "login": "Sign in", "token": "Token (the course gave you one)", "sign_in": "Sign in",
        "hub_sign_in": "Sign in with JupyterHub", "logout": "Sign out",
        "bad_token": "the token is not valid: check the one the course gave you", "mine": "My submissions",
        "dashboard": "Instructor dashboard", "due": "Due", "no_due": "no due date", "left": "left",
        "past_due": "past the due date", "attempts_left": "{n} submissions left",
        "attempts_any": "no limit on submissions",
        "today_left": "{n} left today", "upload": "Upload a notebook", "send": "Submit", "submission": "submission",
        "received": "received", "state": "state", "score": "score", "feedback": "feedback",
        "none_yet": "No submission yet.", "queued": "queued", "running": "grading", "done": "graded",
        "failed": "grading failed", "unknown": "unknown", "student": "student", "assignment": "assignment",
        "all": "all", "filter": "Filter", "sort": "sort", "by_time": "by time", "by_score": "by score",
        "requeue": "Grade again", "requeue_all": "Grade every submission of this assignment again",
        "extension": "Extension", "new_due": "new due date (the course's time zone, {tz})", "reason": "reason",
        "grant": "Grant the extension", "downloads": "Downloads", "feedback_zip": "all feedback (zip)",
        "report": "Class report (live)", "history": "Submissions of {student}", "late": "late",
        "extensions": "Extensions granted", "queued_again": "queued again: {n}",
        "granted": "granted {student} an extension on {assignment} to {due}", "position": "{n} ahead in the queue",
        "students": "students", "count": "{n} submissions",
        "file_wins": "; but the course's {file} already has an extension for this student and assignment, and "
                     "the file wins (change it there)",
        "revoke": "Revoke", "revoked": "revoked {student}'s extension on {assignment} ({n})",
        "late_until": "late submissions taken until {when}", "late_open": "late submissions taken",
        "late_costs": "; handing in now costs {penalty} of {points} points",
        "late_closed": "the late window is over too: a submission now scores nothing",
        "edit_hint": "To change an extension, grant one again for the same student and assignment: the new one "
                     "replaces the old.",
        "explain": "why {exercise} lost points", "explanation": "{student} · {exercise}: why it lost points "
                                                               "(instructors only)",
    },
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
"""

SCRIPT = r"""// Follows each unfinished submission to its verdict (long polls on the JSON API), then reloads the page;
// shows due dates in the reader's time zone with the time left; refreshes the dashboard's class report.
(function () {
  const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";
  const base = meta("base"), zh = meta("lang") === "zh";
  document.querySelectorAll("time[datetime]").forEach((t) => {
    const d = new Date(t.getAttribute("datetime"));
    if (!isNaN(d)) t.textContent = d.toLocaleString(zh ? "zh-CN" : "en-GB", {dateStyle: "medium", timeStyle: "short"});
  });
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


def _closes_form(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A page's POST handler whose parsed form (and its uploaded file) is closed however it ends."""
    @functools.wraps(handler)
    async def closing(request: Request, *args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(request, *args, **kwargs)
        finally:
            await request.close()
    return closing


def _base(request: Request) -> str:
    """The path the service is mounted under ("" at the root, /services/NAME inside JupyterHub)."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def _to_dashboard(request: Request, said: str) -> RedirectResponse:
    """Back to the dashboard after one of its forms, saying what was done."""
    from urllib.parse import quote

    return RedirectResponse(f"{_base(request)}/dashboard?notice={quote(said)}", status_code=303)


def _language(request: Request, course: Any) -> str:
    wanted = request.query_params.get("lang") or request.cookies.get(sessions.LANGUAGE_COOKIE)
    return wanted if wanted in UI else (course.language.value if course.language.value in UI else "zh")


def _local_next(request: Request, text: str | None) -> str:
    """A page to go to after sign-in: a path of this service (the same rule as the Hub's sign-in), else
    the service's first page."""
    from autograder.service.hub import local_path

    base = _base(request) + "/"
    return local_path(base, text) or base


def install_pages(app: FastAPI, engine: Engine, course: Any,
                  accept: Callable[..., Any]) -> None:
    """Add the pages to ``app``; ``accept`` is the API's upload path (the same checks, the same storing)."""
    from autograder.service.app import ApiError, policy_view
    from autograder.service.standing import Standing
    from autograder.service.export import export
    from autograder.reports.class_report import class_report_parts
    from autograder.reports.feedback import _CSS, feedback_parts

    from autograder.service.live import Assignments

    assignments = Assignments(course)           # (read from the course each time: serve reloads a changed one)

    def render(request: Request, name: str, signed: sessions.Signed | None, *, csrf: str | None = None,
               status: int = 200, **context: Any) -> HTMLResponse:
        lang = _language(request, course)
        page = _ENV.get_template(f"{name}.html").render(
            lang=lang, T=UI[lang], base=_base(request), course=course.name, who=signed.caller if signed else None,
            csrf=csrf or (signed.csrf if signed else ""), title=context.pop("title", course.name),
            notice=request.query_params.get("notice", "")[:300] or None, **context)
        response = HTMLResponse(page, status_code=status)
        if request.query_params.get("lang") in UI:
            response.set_cookie(sessions.LANGUAGE_COOKIE, request.query_params["lang"], max_age=365 * 86400,
                                **sessions.cookie_options(request))
        return response

    async def signed_in(request: Request) -> sessions.Signed | None:
        """The page's session, or None; once known, the guard lets the body be read to the route's limit."""
        from autograder.service.guard import authenticated

        signed = await run_in_threadpool(sessions.find, engine, request.cookies.get(sessions.COOKIE))
        if signed is not None:
            authenticated(request)
        return signed

    def to_login(request: Request) -> RedirectResponse:
        from urllib.parse import quote

        path = request.url.path
        here = path if path.startswith(_base(request)) else _base(request) + path
        return RedirectResponse(f"{_base(request)}/login?next={quote(here)}", status_code=303)

    async def form_checked(request: Request, signed: sessions.Signed) -> Any:
        form = await request.form()
        if not sessions.same(str(form.get("csrf") or ""), signed.csrf):
            raise ApiError(403, "service.bad_csrf")
        return form

    def sign_in(request: Request, who: Caller, next_url: str | None = None) -> Response:
        value, _csrf = sessions.start(engine, who)
        response = RedirectResponse(_local_next(request, next_url), status_code=303)
        response.set_cookie(sessions.COOKIE, value, max_age=int(sessions.LIFETIME.total_seconds()),
                            **sessions.cookie_options(request))
        response.delete_cookie(sessions.LOGIN_CSRF_COOKIE, path=sessions.cookie_options(request)["path"])
        return response

    app.state.sign_in = sign_in

    # -- static parts ---------------------------------------------------------------------------
    @app.get("/static/style.css", include_in_schema=False)
    def _style() -> Response:
        return Response(_CSS + "\n" + STYLE, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    @app.get("/static/app.js", include_in_schema=False)
    def _script() -> Response:
        return Response(SCRIPT, media_type="text/javascript", headers={"Cache-Control": "max-age=300"})

    # -- signing in and out -----------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def _home(request: Request) -> Response:
        signed = await signed_in(request)
        if signed is None:
            return to_login(request)
        return RedirectResponse(f"{_base(request)}/{'dashboard' if signed.caller.instructor else 'me'}",
                                status_code=303)

    @app.get("/login", include_in_schema=False)
    async def _login_page(request: Request, next: str = "") -> Response:
        import secrets

        csrf = request.cookies.get(sessions.LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(32)
        response = render(request, "login", None, csrf=csrf, next=_local_next(request, next),
                          hub=app.state.hub is not None, error=None)
        response.set_cookie(sessions.LOGIN_CSRF_COOKIE, csrf, max_age=3600, **sessions.cookie_options(request))
        return response

    @app.post("/login", include_in_schema=False)
    @_closes_form
    async def _login(request: Request) -> Response:
        from autograder.service.tokens import caller

        form = await request.form()
        cookie = request.cookies.get(sessions.LOGIN_CSRF_COOKIE)
        if not sessions.same(str(form.get("csrf") or ""), cookie):
            raise ApiError(403, "service.bad_csrf")
        token = str(form.get("token") or "").strip()
        who = await run_in_threadpool(caller, engine, token)
        if who is None and app.state.hub is not None and token:
            who = await run_in_threadpool(app.state.hub.api_caller, token)
        if who is None:
            lang = _language(request, course)
            return render(request, "login", None, csrf=cookie, next=_local_next(request, str(form.get("next") or "")),
                          hub=app.state.hub is not None, error=UI[lang]["bad_token"], status=401)
        return await run_in_threadpool(sign_in, request, who, str(form.get("next") or ""))

    @app.post("/logout", include_in_schema=False)
    @_closes_form
    async def _logout(request: Request) -> Response:
        signed = await signed_in(request)
        if signed is not None:
            await form_checked(request, signed)
            await run_in_threadpool(sessions.end, engine, request.cookies.get(sessions.COOKIE))
        response = RedirectResponse(f"{_base(request)}/login", status_code=303)
        response.delete_cookie(sessions.COOKIE, path=sessions.cookie_options(request)["path"])
        return response

    # -- reading the database ---------------------------------------------------------------------
    def listing(who: Caller, lang: str, *, student: str | None = None, assignment: str | None = None,
                status: str | None = None, sort: str = "time", feedback: bool = True,
                open_latest: bool = False, standing: Standing | None = None) -> list[dict[str, Any]]:
        from autograder.points import fmt

        latest = (select(Job.submission_id, func.max(Job.id).label("job")).group_by(Job.submission_id)
                  .subquery())
        query = (select(Submission.id, Submission.student, Submission.assignment, Submission.received_at,
                        Job.id.label("job"), Job.state, Result.points, Result.max_points, Result.result)
                 .join(latest, latest.c.submission_id == Submission.id)
                 .join(Job, Job.id == latest.c.job)
                 .join(Result, Result.submission_id == Submission.id, isouter=True))
        if not who.instructor:
            query = query.where(Submission.student == who.who)
        elif student:
            query = query.where(Submission.student == student)
        if assignment:
            query = query.where(Submission.assignment == assignment)
        if status:
            query = query.where(Job.state == status)
        query = query.order_by(Result.points.desc().nulls_last(), Submission.id.desc()) if sort == "score" \
            else query.order_by(Submission.id.desc())
        with engine.connect() as conn:
            rows = conn.execute(query.limit(2000)).all()
        ahead = Q.positions(engine)                 # (the order workers take them in, as the API says it)
        zone = _zone(course)
        standing = standing or Standing(engine, course)     # the late policy as it is now: an extension since
        out = []
        for r in rows:
            received = r.received_at if r.received_at.tzinfo else r.received_at.replace(tzinfo=dt.timezone.utc)
            shown = None
            now = standing.result(r.result) if r.result is not None else None
            if feedback and now is not None:
                view = policy_view(now, who, course, r.assignment, standing.due(r.student, r.assignment))
                shown = Markup("\n".join(feedback_parts(view, course, lang)))   # escaped by feedback_parts
            late = isinstance((now or {}).get("late"), dict) and (now or {})["late"].get("late") is True
            points = now.get("points") if now is not None else None
            out.append({"id": r.id, "student": r.student, "assignment": r.assignment,
                        "received_iso": received.isoformat(),
                        "received_text": received.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z"),
                        "state": r.state if r.state in ("queued", "running", "done", "failed") else "unknown",
                        "position": ahead.get(r.job), "points": fmt(points) if points is not None else None,
                        "score": float(points) if points is not None else None,
                        "max_points": fmt(r.max_points) if r.max_points is not None else None, "late": late,
                        "feedback": shown, "open": False,
                        # (the staff's: an explanation of each exercise that lost points, hidden inputs and all)
                        "lost": [e["exercise"] for e in (now or {}).get("exercises") or [] if who.instructor
                                 and float(e.get("points", 0)) < float(e.get("max_points", 0)) - 1e-9]})
        if sort == "score":         # (by the points as they are now, not as they were stored)
            out.sort(key=lambda row: (row["score"] is None, -(row["score"] or 0.0), -row["id"]))
        if open_latest and out:
            out[0]["open"] = True
        return out

    # -- a student's page -------------------------------------------------------------------------
    @app.get("/me", include_in_schema=False)
    async def _me(request: Request) -> Response:
        signed = await signed_in(request)
        if signed is None:
            return to_login(request)
        if signed.caller.instructor:
            return RedirectResponse(f"{_base(request)}/dashboard", status_code=303)
        lang = _language(request, course)
        standing = await run_in_threadpool(Standing, engine, course)    # (one read of the deadlines for both)
        mine = await run_in_threadpool(lambda: listing(signed.caller, lang, standing=standing))
        shown = await run_in_threadpool(student_assignments, signed.caller, mine, lang, standing)
        return render(request, "me", signed, assignments=shown, title=UI[lang]["mine"])

    def student_assignments(who: Caller, mine: list[dict[str, Any]], lang: str,
                            standing: Standing) -> list[dict[str, Any]]:
        deadlines = standing.deadlines
        T = UI[lang]
        out = []
        for a in course.assignments:
            deadline = deadlines.deadline(who.who, a.id)
            due = deadline.due if deadline is not None else None
            subs = [s for s in mine if s["assignment"] == a.id]
            if subs and not any(s["state"] in ("queued", "running") for s in subs):
                subs[0]["open"] = True
            out.append({"id": a.id, "title": _title(a, lang), "submissions": subs,
                        "due_iso": due.isoformat() if due else None,
                        "due_text": due.astimezone(_zone(course)).strftime("%Y-%m-%d %H:%M %Z") if due else None,
                        "late_now": late_now(deadline, a, T),
                        "attempts": attempts_text(who, a.id, len(subs), T)})
        return out

    def late_now(deadline: Any, assignment: Any, T: dict[str, str]) -> str | None:
        """Past the due date: what handing in now would cost (the late policy on full marks), until when it is
        taken at all; None before the due date."""
        from autograder import lateness as L
        from autograder.points import fmt

        now = dt.datetime.now(dt.timezone.utc)
        if deadline is None or now <= deadline.due:
            return None
        if deadline.last is not None and now > deadline.last:
            return T["late_closed"]
        cost = L.apply(deadline, submitted=now, late_marker=False, raw=assignment.points,
                       max_points=assignment.points, course_root=course.root)
        window = (T["late_until"].format(when=deadline.last.astimezone(_zone(course)).strftime("%Y-%m-%d %H:%M %Z"))
                  if deadline.last is not None else T["late_open"])
        return window + T["late_costs"].format(penalty=fmt(cost.penalty), points=fmt(assignment.points))

    def attempts_text(who: Caller, assignment: str, used: int, T: dict[str, str]) -> str:
        policy = course.service
        parts = []
        if policy.attempts is not None:
            parts.append(T["attempts_left"].format(n=max(0, policy.attempts - used)))
        if policy.attempts_per_day is not None:
            midnight = dt.datetime.now(_zone(course)).replace(hour=0, minute=0, second=0, microsecond=0)
            with engine.connect() as conn:
                today = conn.execute(select(func.count()).select_from(Submission).where(
                    Submission.student == who.who, Submission.assignment == assignment,
                    Submission.received_at >= midnight.astimezone(dt.timezone.utc))).scalar_one()
            parts.append(T["today_left"].format(n=max(0, policy.attempts_per_day - today)))
        return " · ".join(parts) or T["attempts_any"]

    @app.post("/me/upload", include_in_schema=False)
    @_closes_form
    async def _upload(request: Request) -> Response:
        signed = await signed_in(request)
        if signed is None:
            return to_login(request)
        receipt = await accept(request, signed.caller, signed.csrf)     # (the form is read there, bounded)
        return RedirectResponse(f"{_base(request)}/me#submission-{receipt['submission']}", status_code=303)

    # -- the instructor's dashboard ---------------------------------------------------------------
    async def instructor(request: Request) -> sessions.Signed | Response:
        signed = await signed_in(request)
        if signed is None:
            return to_login(request)
        if not signed.caller.instructor:
            raise ApiError(403, "service.instructors_only")
        return signed

    @app.get("/dashboard", include_in_schema=False)
    async def _dashboard(request: Request, assignment: str = "", student: str = "", status: str = "",
                         sort: str = "time") -> Response:
        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        lang = _language(request, course)
        filters = {"assignment": assignment if assignment in assignments else "", "student": student[:200],
                   "status": status if status in ("queued", "running", "done", "failed") else "",
                   "sort": "score" if sort == "score" else "time"}
        subs = await run_in_threadpool(lambda: listing(signed.caller, lang, student=filters["student"] or None,
                                                       assignment=filters["assignment"] or None,
                                                       status=filters["status"] or None, sort=filters["sort"],
                                                       feedback=False))
        report = await run_in_threadpool(report_html, lang)
        grants = await run_in_threadpool(lambda: [{"student": e.student, "assignment": e.assignment,
                                                   "due": e.due.astimezone(_zone(course)).strftime(
                                                       "%Y-%m-%d %H:%M %Z"), "reason": e.reason}
                                                  for e in granted_extensions(engine)])
        return render(request, "dashboard", signed, title=UI[lang]["dashboard"], submissions=subs,
                      total=len(subs), report=report, f=filters, assignment_ids=list(assignments),
                      states=("queued", "running", "done", "failed"), extensions=grants,
                      tz=course.timezone or "UTC")

    def report_html(lang: str) -> Markup:
        from autograder.service.export import counted

        results = counted(engine, course.service.counts, Standing(engine, course))
        return Markup("\n".join(class_report_parts(results, course, lang, submissions=False, title=False)))

    @app.get("/dashboard/report", include_in_schema=False)
    async def _report(request: Request) -> Response:
        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        lang = _language(request, course)
        report = await run_in_threadpool(report_html, lang)
        return HTMLResponse(f"<h2>{Markup.escape(UI[lang]['report'])}</h2>{report}")

    @app.get("/dashboard/student", include_in_schema=False)
    async def _history(request: Request, id: str = "") -> Response:
        student = id          # a query parameter: a student id may hold any character, "/" too
        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        lang = _language(request, course)
        subs = await run_in_threadpool(lambda: listing(signed.caller, lang, student=student[:200],
                                                       open_latest=True))
        return render(request, "history", signed, title=UI[lang]["history"].format(student=student[:200]),
                      student=student[:200], submissions=subs)

    explaining = asyncio.Semaphore(1)      # one explanation at a time: each grades one exercise in a cage

    @app.get("/dashboard/explain", include_in_schema=False)
    async def _explain(request: Request, submission: int = 0, exercise: str = "") -> Response:
        """`autograder explain` of one stored submission and exercise, in a process of its own (never this one's)."""
        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        lang = _language(request, course)

        def stored() -> Any:
            with engine.connect() as conn:
                return conn.execute(select(Submission.student, Submission.assignment, Submission.data, Result.result)
                                    .join(Result, Result.submission_id == Submission.id)
                                    .where(Submission.id == submission)).first()

        row = await run_in_threadpool(stored)
        if row is None:
            raise ApiError(404, "service.no_submission", submission=str(submission))
        known = {e.id for e in assignments[row.assignment].exercises} if row.assignment in assignments else set()
        if exercise not in known:
            raise ApiError(404, "service.no_exercise", assignment=row.assignment, exercise=exercise[:20])
        if explaining.locked():
            raise ApiError(503, "service.explain_busy", retry_after=30, seconds=30)
        async with explaining:
            lines = await run_in_threadpool(explain_stored, bytes(row.data), dict(row.result), exercise, lang)
        return render(request, "explain", signed, lines=lines, student=row.student, exercise=exercise,
                      submission=submission, title=UI[lang]["explanation"].format(student=row.student,
                                                                                  exercise=exercise))

    def explain_stored(data: bytes, result: dict[str, Any], exercise: str, lang: str) -> list[tuple[str, str]]:
        """The explanation's lines from ``python -m autograder.service.explain_job`` (a private folder holds the
        notebook and its result; the process is bounded by the course's submission_seconds)."""
        import json
        import subprocess
        import sys

        from autograder.service.explain_job import NOTEBOOK, REQUEST

        with tempfile.TemporaryDirectory(prefix="autograder-explain-") as tmp:
            (Path(tmp) / NOTEBOOK).write_bytes(data)
            (Path(tmp) / REQUEST).write_text(json.dumps({"result": result, "exercise": exercise, "language": lang}),
                                             encoding="utf-8")
            env = dict(os.environ, AUTOGRADER_COURSE=str(course.root / "course.yml"))
            try:
                done = subprocess.run([sys.executable, "-m", "autograder.service.explain_job", tmp], env=env,
                                      capture_output=True, timeout=course.limits.submission_seconds + 60,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise ApiError(504, "service.explain_failed", why=f"> {course.limits.submission_seconds + 60:g} s") \
                    from None
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ApiError(500 if done.returncode != 2 else 409, "service.explain_failed",
                           why=(why[-1] if why else f"exit {done.returncode}")[:300])
        return [(str(kind), str(line)) for kind, line in json.loads(done.stdout)]

    @app.post("/dashboard/requeue", include_in_schema=False)
    @_closes_form
    async def _requeue(request: Request) -> Response:

        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        form = await form_checked(request, signed)

        def ids() -> list[int]:
            query = select(Submission.id)
            if form.get("submission"):
                text = str(form["submission"]).strip()
                if not text.isdigit() or len(text) > 18:         # (a database integer: never a 500 from the query)
                    raise ApiError(422, "service.malformed", fields="submission")
                query = query.where(Submission.id == int(text))
            elif str(form.get("assignment") or "") in assignments:
                query = query.where(Submission.assignment == str(form["assignment"]))
            else:
                raise ApiError(422, "service.malformed", fields="submission, assignment")
            with engine.connect() as conn:
                found = list(conn.execute(query).scalars())
            Q.requeue(engine, found, behind=course.service.queued_per_student or 0)   # behind new uploads
            return found

        done = await run_in_threadpool(ids)
        lang = _language(request, course)
        said = UI[lang]["queued_again"].format(n=len(done))
        return _to_dashboard(request, said)

    @app.post("/dashboard/extensions", include_in_schema=False)
    @_closes_form
    async def _extension(request: Request) -> Response:
        from autograder.errors import AutograderError
        from autograder.lateness import parse_time

        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        form = await form_checked(request, signed)
        student, assignment = str(form.get("student") or "").strip(), str(form.get("assignment") or "")
        if not student or len(student) > 200 or not student.isprintable():
            raise ApiError(422, "service.bad_extension", why="student: 1 to 200 printable characters")
        if assignment not in assignments:
            raise ApiError(422, "service.bad_extension", why=f"assignment: one of {', '.join(assignments)}")
        await run_in_threadpool(on_roster, student)
        try:
            due = parse_time(str(form.get("due") or ""), where="due", default_tz=course.timezone or "UTC")
        except AutograderError as exc:
            raise ApiError(422, "service.bad_extension", why=str(exc)[:300]) from None
        reason = str(form.get("reason") or "")[:500]

        def grant() -> None:
            with writing(engine).begin() as conn:
                conn.execute(insert(ExtensionGrant).values(
                    student=student, assignment=assignment, due=due, reason=reason, granted_by=signed.caller.who,
                    granted_at=dt.datetime.now(dt.timezone.utc)))

        await run_in_threadpool(grant)
        lang = _language(request, course)
        said = UI[lang]["granted"].format(student=student, assignment=assignment,
                                          due=due.astimezone(_zone(course)).strftime("%Y-%m-%d %H:%M %Z"))
        from autograder.grading.deadlines import Deadlines

        in_file = await run_in_threadpool(Deadlines.load, course)
        if any((e.student, e.assignment) == (student, assignment) for e in in_file.extensions):
            said += UI[lang]["file_wins"].format(file=in_file.source)
        return _to_dashboard(request, said)

    def on_roster(student: str) -> None:
        """An extension is for a student of the class: one with a token (the roster) or a submission; a typo is
        refused naming the closest ids. (A course on JupyterHub with neither yet takes any id.)"""
        import difflib

        from autograder.service.db import Token

        with engine.connect() as conn:
            known = set(conn.execute(select(Token.who).where(Token.role == "student")).scalars())
            known |= set(conn.execute(select(Submission.student).distinct()).scalars())
        if not known or student in known:
            return
        close = difflib.get_close_matches(student, sorted(known), n=3, cutoff=0.6)
        raise ApiError(422, "service.not_on_roster", student=student[:100], close=", ".join(close) or "—")

    @app.post("/dashboard/extensions/revoke", include_in_schema=False)
    @_closes_form
    async def _revoke(request: Request) -> Response:
        from sqlalchemy import delete

        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        form = await form_checked(request, signed)
        student, assignment = str(form.get("student") or "")[:200], str(form.get("assignment") or "")[:100]

        def revoke() -> int:
            with writing(engine).begin() as conn:
                gone = conn.execute(delete(ExtensionGrant).where(ExtensionGrant.student == student,
                                                                 ExtensionGrant.assignment == assignment))
            return int(gone.rowcount or 0)

        n = await run_in_threadpool(revoke)
        lang = _language(request, course)
        return _to_dashboard(request, UI[lang]["revoked"].format(student=student, assignment=assignment, n=n))

    @app.get("/dashboard/download/{name}", include_in_schema=False)
    async def _download(request: Request, name: str) -> Response:
        signed = await instructor(request)
        if isinstance(signed, Response):
            return signed
        if name not in ("grades.csv", "canvas.csv", "moodle.csv", "moodle-grades.csv", "lms-skipped.csv",
                        "feedback.zip"):
            raise ApiError(404, "service.no_submission", submission=name[:50])

        def build() -> bytes:
            with tempfile.TemporaryDirectory(prefix="autograder-export-") as tmp:
                out = Path(tmp) / "out"
                export(engine, course, out)
                if name != "feedback.zip":
                    return (out / name).read_bytes()
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
                    for path in sorted((out / "feedback").iterdir()):
                        z.write(path, f"feedback/{path.name}")
                return buffer.getvalue()

        data = await run_in_threadpool(build)
        kind = "application/zip" if name.endswith(".zip") else "text/csv; charset=utf-8"
        return Response(data, media_type=kind, headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _zone(course: Any) -> dt.tzinfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo(course.timezone) if course.timezone else dt.timezone.utc


def _title(assignment: Any, lang: str) -> str:
    return str(assignment.title_in(lang))
