"""Issue 51 (accessibility and language): every page of the service passes an automated WCAG 2.1 AA audit
(axe-core, bundled by axe-playwright-python, run in Debian's Chromium), in Chinese and with the English switch,
and a student signs in and hands in a notebook with the keyboard alone.

The audit signs in as a student and as the instructor (and an instructor launched from the simulated LMS of
tests/lti_platform.py with a deep-linking request, for the LTI page that lists the assignments to add) and opens each
page of :data:`PAGES` with ``?lang=zh`` and ``?lang=en``: 0 violations of the rules tagged wcag2a, wcag2aa, wcag21a
and wcag21aa, every closed <details> opened first (so the feedback inside is checked too), the page's <html lang> the
language asked for. A violation's message names the page, the rule, its impact, the failing nodes' selectors and the
rule's help page. Adding a page to the audit is one line of :data:`PAGES`.
"""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, NamedTuple
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import pytest

from lti_platform import INSTRUCTOR, Lms, lms_serving
from support import make_samples
from served import student_token
from chromium import CHROMIUM_FLAGS
from pages import COURSE, QKV

pytestmark = pytest.mark.slow
TIMEOUT_MS = 60_000
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


class Page(NamedTuple):
    """One page of the audit: who is signed in ("" nobody; "lms": by the LMS's deep-linking launch), its path ({sub}:
    the graded submission's number, {request}: the deep-linking request the launch landed with),
    the HTTP status it answers, a selector it must show (so the audit sees what it claims to), and a button to
    press first ("" none: the page is the one the path opens)."""
    who: str
    path: str
    status: int = 200
    shows: str = "main h1"
    press: str = ""


#: Every page the audit opens, each in Chinese and in English. One line a page.
PAGES = [
    Page("", "/login", shows="input[type=password]"),
    Page("ada", "/me", shows=".not_attempted"),                     # graded (feedback: failed, not attempted)
    Page("ben", "/me", shows="form.upload"),                         # no submission yet
    Page("ada", "/dashboard", status=403, shows="h1#error"),         # a refusal, as a page
    Page("teacher", "/dashboard?notice=ok", shows="#notice"),        # the dashboard, its notice and extensions
    Page("teacher", "/dashboard/student?id=ada", shows="#score-history"),   # a student's submissions and scores
    Page("teacher", "/dashboard/explain?submission={sub}&exercise=2.3", shows=".explanation"),
    Page("teacher", "/dashboard/explain?submission=999&exercise=2.3", status=404, shows="h1#error"),
    Page("teacher", "/dashboard/roster", shows="#roster"),
    Page("teacher", "/dashboard/tokens", shows="#tokens"),
    Page("teacher", "/dashboard/actions", shows="#actions"),
    Page("teacher", "/dashboard/tokens", shows="#new-token", press="#tokens tr:has-text('cy') .reissue-token button"),
    Page("teacher", "/dashboard/analytics?assignment=02_qkv_attention", shows="#analytics-exercises"),
    Page("teacher", "/dashboard/grading", shows="#question-2\\.Q1"),
    Page("teacher", "/dashboard/grading/answer?question=2.Q1&submission={sub}", shows="#mark-form"),
    Page("teacher", "/dashboard/grading/unanswered", shows="main h1"),
    Page("teacher", "/dashboard/adjust?submission={sub}", shows="#adjustments"),
    Page("teacher", "/dashboard/reviews", shows="#reviews form.review-accept"),
    Page("ada", "/me", shows=".review-list .review-answer"),
    Page("teacher", "/dashboard/lti", shows="#lti-urls"),
    Page("lms", "/lti/deep-link?request={request}", shows="#deep-link input[name=assignment]"),
]


def _sign_in(page, url: str, token: str) -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=token]", token)
    page.click("form[action$='/login'] button")
    page.wait_for_load_state()


#: The simulated LMS's auto-submitted form (what its page does with the id_token it signed): posted by the browser.
FORM_POST = """([action, fields]) => {
  const form = document.createElement("form");
  form.method = "post";
  form.action = action;
  for (const [name, value] of Object.entries(fields)) {
    const input = document.createElement("input");
    input.type = "hidden"; input.name = name; input.value = value;
    form.appendChild(input);
  }
  document.body.appendChild(form);
  form.submit();
}"""


def _deep_linking_launch(page: Any, url: str, lms: Lms) -> str:
    """An instructor's deep-linking launch from the simulated LMS, in this browser: the service's OIDC login (its
    state cookie set here), the platform's signed answer, its form POST to /lti/launch; the browser signed in on the
    page that lists the assignments. The signed request that page carries."""
    hint = lms.prepare(lms.claims("t1", [INSTRUCTOR], message="LtiDeepLinkingRequest", email="prof@uni.example"))
    login = f"{url}/lti/login?" + urlencode({"iss": lms.issuer, "login_hint": hint, "client_id": lms.client_id,
                                             "lti_deployment_id": lms.deployment})
    with page.expect_response(lambda r: r.url.startswith(f"{lms.url}/auth")) as seen:
        page.goto(login)
    answer = seen.value.json()
    with page.expect_navigation(url="**/lti/deep-link?request=*"):
        page.evaluate(FORM_POST, [answer["action"], {"id_token": answer["id_token"], "state": answer["state"]}])
    return str(parse_qs(urlsplit(page.url).query)["request"][0])


def _violations(found: dict, where: str) -> list[str]:
    """Each violation as lines: the page, the rule, its impact and help page, and every failing node."""
    lines = []
    for v in found["violations"]:
        lines.append(f"{where}: {v['id']} ({v['impact']}): {v['help']} - {v['helpUrl']}")
        for node in v["nodes"]:
            why = " | ".join(line.strip() for line in node.get("failureSummary", "").splitlines() if line.strip())
            lines.append(f"    {' '.join(map(str, node['target']))}: {why[:400]}")
    return lines


def _class_with_a_graded_submission(engine, database) -> int:
    """ada: a submission graded by a real worker (2.3 wrong, the last exercise left out), another one queued, an
    extension and so a score history; a token for cy (reissued by the audit). The graded submission's number."""
    from autograder.service import history, repository
    from autograder.service import queue as Q
    from autograder.service.worker import serve

    last = QKV.exercises[-1].id
    notebook = make_samples.submission(QKV, solved=[e.id for e in QKV.exercises if e.id != last], code={
        "2.3": "import torch\ndef attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"})
    sub, _job = Q.store(engine, student="ada", assignment=QKV.id, filename="a.ipynb",
                        data=json.dumps(notebook).encode())
    assert serve(str(database), once=True, owner="w") == 1
    other = next(a for a in COURSE.assignments if a.id != QKV.id)
    Q.store(engine, student="ada", assignment=other.id, filename="b.ipynb",
            data=json.dumps(make_samples.submission(other)).encode())
    repository.grant_extension(engine, student="ada", assignment=QKV.id, reason="ill",
                               due=dt.datetime(2100, 1, 5, 12, tzinfo=dt.timezone.utc), granted_by="teacher")
    history.note(engine, COURSE, [("ada", QKV.id)], why="extension", who="teacher")
    student_token(engine, "cy")
    from autograder.service import reviews      # a review answered and one open (ada's page and the queue)
    first = reviews.ask(engine, COURSE, "ada", QKV.id, "2.3", "<b>please</b> look again")
    reviews.answer(engine, COURSE, first.id, "teacher", True, 1.0, "half right", first.version)
    reviews.ask(engine, COURSE, "ada", QKV.id, "2.1", "and this one")
    return sub


def test_every_page_passes_the_wcag_21_aa_audit_in_both_languages(site, browser_kit):
    from axe_playwright_python.sync_playwright import Axe

    from autograder.service.lti import platforms as P

    url, engine, who, database = site
    sub = _class_with_a_graded_submission(engine, database)
    axe, problems, audited = Axe(), [], 0
    with browser_kit.sync_playwright() as pw, lms_serving() as lms:
        lms.tool_url = url
        P.register(engine, **lms.registration(), courses=[lms.context], by="test")
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            tabs, request = {}, ""
            for person in dict.fromkeys(p.who for p in PAGES):
                tabs[person] = chromium.new_context(locale="zh-CN", timezone_id="Asia/Shanghai").new_page()
                tabs[person].set_default_timeout(TIMEOUT_MS)
                if person == "lms":
                    request = _deep_linking_launch(tabs[person], url, lms)
                elif person:
                    _sign_in(tabs[person], url, who.get(person) or "")
            for spec in PAGES:
                page = tabs[spec.who]
                for lang in ("zh", "en"):
                    path = spec.path.format(sub=sub, request=request)
                    path += ("&" if "?" in path else "?") + f"lang={lang}"
                    where = f"{spec.who or 'anonymous'} {path}" + (f" then {spec.press}" if spec.press else "")
                    answer = page.goto(url + path)
                    assert answer is not None and answer.status == (200 if spec.press else spec.status), where
                    if spec.press:
                        with page.expect_navigation():
                            page.click(spec.press)
                    assert page.locator(spec.shows).count() > 0, f"{where}: shows no {spec.shows}"
                    assert page.evaluate("document.documentElement.lang") == lang, where
                    if answer.status == 200 and not spec.press:      # the switch: this page, in the other language
                        other = "en" if lang == "zh" else "zh"
                        kept = [(k, v) for k, v in parse_qsl(urlsplit(path).query) if k not in ("lang", "notice")]
                        assert page.locator(f"header a[hreflang={other}]").get_attribute("href") == \
                            "?" + urlencode([*kept, ("lang", other)]), where
                    page.evaluate("document.querySelectorAll('details:not([open])').forEach(d => d.open = true)")
                    found = axe.run(page, options={"runOnly": {"type": "tag", "values": WCAG_AA},
                                                   "resultTypes": ["violations"]}).response
                    assert found["testEngine"]["name"] == "axe-core" and found["passes"], where   # it checked
                    problems += _violations(found, where)
                    audited += 1
        finally:
            chromium.close()
    assert audited == 2 * len(PAGES)
    assert not problems, "accessibility violations (WCAG 2.1 AA):\n" + "\n".join(problems)


def test_axe_finds_what_the_pages_must_not_have(browser_kit):
    """The audit can fail: the same run on a page with an unlabelled field, a low-contrast text and no lang
    reports each (so 0 on the service's pages means something)."""
    from axe_playwright_python.sync_playwright import Axe

    with browser_kit.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = chromium.new_page()
            page.set_content("<!DOCTYPE html><html><head><title>t</title></head><body><main><h1>x</h1>"
                             "<p style='color:#aaa'>faint</p><input name=token></main></body></html>")
            found = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_AA},
                                             "resultTypes": ["violations"]}).response
        finally:
            chromium.close()
    lines = _violations(found, "bad")
    assert {v["id"] for v in found["violations"]} >= {"html-has-lang", "color-contrast", "label"}, lines
    assert any("dequeuniversity.com" in line and "(serious)" in line for line in lines), lines
    assert any(line.strip().startswith("input") for line in lines), lines


#: What a keyboard user's focus must look like: on screen, and outlined (the pages' :focus-visible style).
FOCUSED = """() => {
  const el = document.activeElement, r = el.getBoundingClientRect(), s = getComputedStyle(el);
  return {tag: el.tagName.toLowerCase(), cls: el.className, name: el.getAttribute("name") || "",
          type: el.getAttribute("type") || "", text: (el.textContent || "").trim().slice(0, 40),
          visible: r.width > 0 && r.height > 0 && r.bottom > 0 && r.right > 0
                   && r.top < innerHeight && r.left < innerWidth && s.visibility !== "hidden",
          outline: s.outlineStyle, width: parseFloat(s.outlineWidth) || 0};
}"""


def _tab_to(page, wanted, most: int = 40) -> list[dict]:
    """Tab until the focus is on an element ``wanted`` accepts; each element focused on the way is checked."""
    seen = []
    for _ in range(most):
        page.keyboard.press("Tab")
        focus = page.evaluate(FOCUSED)
        seen.append(focus)
        assert focus["visible"] and focus["outline"] not in ("none", "") and focus["width"] >= 2, seen
        if wanted(focus):
            return seen
    raise AssertionError(f"never reached by Tab: {seen}")


def test_a_student_signs_in_and_hands_in_a_notebook_with_the_keyboard_alone(site, browser_kit, tmp_path):
    url, engine, who, database = site
    notebook = tmp_path / QKV.notebook
    notebook.write_text(json.dumps(make_samples.submission(QKV, solved="all")), encoding="utf-8")
    with browser_kit.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = chromium.new_context(locale="zh-CN").new_page()
            page.set_default_timeout(TIMEOUT_MS)
            # A listener from the start: Playwright intercepts the file dialog from then on (expect_file_chooser
            # alone turns the interception on as it starts waiting, which a busy machine may see too late).
            page.on("filechooser", lambda _chooser: None)
            page.goto(f"{url}/login?lang=zh")
            # The skip link comes first, shown when focused, and takes the focus to the page's content.
            seen = _tab_to(page, lambda f: True)
            assert seen[0]["cls"] == "skip" and seen[0]["text"] == "跳到正文", seen
            page.keyboard.press("Enter")
            assert page.evaluate("document.activeElement.id") == "main"
            _tab_to(page, lambda f: f["name"] == "token", most=3)     # the sign-in form is the content's first
            page.keyboard.type(who["ada"])
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert page.url.endswith("/me")
            # Her page: from the top, past the header's links, to her upload form; the file chosen from the
            # keyboard; submitted with Enter.
            section = f"#assignment-{QKV.id}"
            page.locator(section).scroll_into_view_if_needed()
            page.evaluate("window.scrollTo(0, 0)")
            seen = _tab_to(page, lambda f: f["type"] == "file" and
                           page.evaluate(f"document.activeElement.closest('{section}') !== null"))
            assert seen[0]["cls"] == "skip"
            with page.expect_file_chooser() as chooser:
                page.keyboard.press("Enter")
            chooser.value.set_files(str(notebook))
            _tab_to(page, lambda f: f["tag"] == "button", most=2)
            with page.expect_navigation():
                page.keyboard.press("Enter")
            page.wait_for_selector(f"{section} [data-submission][data-state=queued]")
        finally:
            chromium.close()


def test_a_refusal_page_speaks_the_readers_language_first_and_the_other_below():
    from autograder.core.messages import say
    from autograder.service.guard import refusal_body
    from autograder.service.sessions import LANGUAGE_COOKIE

    msg = say("service.bad_csrf")
    for scope, first in (({"query_string": b"lang=en"}, "en"), ({"query_string": b"a=1&lang=zh"}, "zh"),
                         ({"headers": [(b"cookie", f"x=1; {LANGUAGE_COOKIE}=en".encode())]}, "en"),
                         ({"headers": [(b"cookie", b"bad cookie;;==")]}, "zh"), ({}, "zh")):
        body, kind = refusal_body({"path": "/dashboard", "root_path": "/p", **scope}, 403, msg, "k")
        text = body.decode()
        assert kind.startswith(b"text/html") and f"<html lang='{first}'>" in text, (scope, text)
        other = "zh" if first == "en" else "en"
        assert f"<h1 id='error'>{getattr(msg, first)}</h1><p lang='{other}'>{getattr(msg, other)}</p>" in text
        assert "<main>" in text and "href='/p/'>← " + getattr(say("service.home"), first) in text
