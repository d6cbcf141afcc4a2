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
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from autograder.service import sessions
from autograder.service.context import Service
from autograder.service.errors import base_path

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



def closes_form(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A page's POST handler whose parsed form (and its uploaded file) is closed however it ends."""
    @functools.wraps(handler)
    async def closing(request: Request, *args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(request, *args, **kwargs)
        finally:
            await request.close()
    return closing


def to_dashboard(request: Request, said: str) -> RedirectResponse:
    """Back to the dashboard after one of its forms, saying what was done."""
    return RedirectResponse(f"{base_path(request)}/dashboard?notice={quote(said)}", status_code=303)


def language(request: Request, course: Any) -> str:
    wanted = request.query_params.get("lang") or request.cookies.get(sessions.LANGUAGE_COOKIE)
    return wanted if wanted in UI else (course.language.value if course.language.value in UI else "zh")


def local_next(request: Request, text: str | None) -> str:
    """A page to go to after sign-in: a path of this service (the same rule as the Hub's sign-in), else
    the service's first page."""
    from autograder.service.hub import local_path

    base = base_path(request) + "/"
    return local_path(base, text) or base


def render(request: Request, state: Service, name: str, signed: sessions.Signed | None, *, csrf: str | None = None,
           status: int = 200, **context: Any) -> HTMLResponse:
    """The page ``templates/NAME.html`` in the reader's language."""
    course = state.course
    lang = language(request, course)
    page = _ENV.get_template(f"{name}.html").render(
        lang=lang, T=UI[lang], base=base_path(request), course=course.name, who=signed.caller if signed else None,
        csrf=csrf or (signed.csrf if signed else ""), title=context.pop("title", course.name),
        notice=request.query_params.get("notice", "")[:300] or None, **context)
    response = HTMLResponse(page, status_code=status)
    if request.query_params.get("lang") in UI:
        response.set_cookie(sessions.LANGUAGE_COOKIE, request.query_params["lang"], max_age=365 * 86400,
                            **sessions.cookie_options(request))
    return response



def local_text(when: dt.datetime, course: Any) -> str:
    """A time as the pages write it: in the course's zone, to the minute, with the zone's name."""
    return when.astimezone(course.zone).strftime("%Y-%m-%d %H:%M %Z")
