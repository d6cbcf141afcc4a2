"""Issue 51 in a real browser (Debian's Chromium, driven by Playwright): a TA grades three written answers one
after another with the rubric, a comment and the keyboard; two TAs grade the same answer at once and the second is
told, nothing overwritten; a student asks for a review from her page, the TA answers it from the queue, and the
student reads the answer and her new score. Issue 66, item 11: the model answer rendered on the server within the
page's Content-Security-Policy, the unanswered answers given 0 from their list, the review queue's link to the
answer."""
from __future__ import annotations

import pytest

from chromium import CHROMIUM_FLAGS
from marking import COURSE, QKV, QUESTION, grading_site, store_answer
from autograder.service import history, marks
from autograder.course.written import answer_sha

pytestmark = pytest.mark.slow
TIMEOUT_MS = 60_000


def _sign_in(page, url: str, token: str) -> None:
    page.goto(f"{url}/login?lang=en")
    page.fill("input[name=token]", token)
    page.click("form[action$='/login'] button")
    page.wait_for_load_state()


def test_a_ta_grades_three_answers_two_graders_meet_and_a_student_asks_for_a_review(tmp_path, browser_kit):
    with grading_site(tmp_path) as (url, engine, who, subs), browser_kit.sync_playwright() as pw:
        subs["cat"] = store_answer(engine, "cat", "Var(q.k) = d_k, so divide by its square root")
        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            tabs = {}
            for person in ("ta1", "ta2", "ada"):
                tabs[person] = chromium.new_context(locale="en-GB").new_page()
                tabs[person].set_default_timeout(TIMEOUT_MS)
                _sign_in(tabs[person], url, who[person])
            ta1, ta2, ada = tabs["ta1"], tabs["ta2"], tabs["ada"]

            # Two graders open ada's answer at once; ta1 saves first, ta2's save is refused and shows ta1's mark.
            first = f"{url}/dashboard/grading/answer?question={QUESTION.id}&submission={subs['ada']}&lang=en"
            ta1.goto(first), ta2.goto(first)
            ta2.check("#rubric-saturation")
            ta2.fill("#comment", "ta2's own words")
            ta1.check("#rubric-variance")
            ta1.fill("#comment", "the variance is right")
            with ta1.expect_navigation():
                ta1.press("#comment", "Enter")                    # Enter in the comment: save, then the next one
            with ta2.expect_navigation():
                ta2.click("#save-next")
            assert "ta1" in ta2.inner_text("#notice") and "ta2's own words" in ta2.inner_text("#notice")
            assert ta2.is_checked("#rubric-variance") and not ta2.is_checked("#rubric-saturation")

            # ta1 goes on: ben's answer (empty: no answer), then cat's; the comment given is offered again.
            assert f"submission={subs['ben']}" in ta1.url and "no answer" in ta1.inner_text("#answer")
            ta1.fill("#comment", "no answer given")
            with ta1.expect_navigation():
                ta1.click("#save-next")
            assert f"submission={subs['cat']}" in ta1.url
            assert ta1.locator("#earlier-comments option[value='the variance is right']").count() == 1
            ta1.check("#rubric-variance"), ta1.check("#rubric-saturation")
            with ta1.expect_navigation():
                ta1.click("#save-next")
            ta1.goto(f"{url}/dashboard/grading?lang=en")
            assert "3 of 3 graded" in ta1.inner_text("#question-" + QUESTION.id.replace(".", "\\."))
            book = marks.Book.read(engine)
            assert [book.mark(s, QKV.id, QUESTION.id, answer_sha(a)).points for s, a in [
                ("ada", "<script>alert(1)</script> Var = d_k"), ("ben", ""),
                ("cat", "Var(q.k) = d_k, so divide by its square root")]] == [1.0, 0.0, 2.0]

            # Ada reads her mark, asks for a review of the written answer; ta1 accepts it from the queue.
            ada.goto(f"{url}/me?lang=en")
            assert "the variance is right" in ada.inner_text("main")
            form = ada.locator(f"#reviews-{QKV.id} form.review-ask")
            form.locator("select[name=item]").select_option(QUESTION.id)
            form.locator("textarea[name=message]").fill("I also explained the <b>saturation</b>, second paragraph")
            with ada.expect_navigation():
                form.locator("button").click()
            assert "<b>saturation</b>" in ada.inner_text(".review-list")          # shown as text
            ta1.goto(f"{url}/dashboard/reviews?lang=en")
            accept = ta1.locator("#reviews form.review-accept").first
            accept.locator("input[name=points]").fill("2")
            accept.locator("input[name=reason]").fill("yes, the second paragraph says it")
            with ta1.expect_navigation():
                accept.locator("button").click()
            ada.goto(f"{url}/me?lang=en")
            assert "yes, the second paragraph says it" in ada.inner_text(".review-list .review-answer")
            assert [c.why for c in history.changes(engine, student="ada")][-1] == "review"
        finally:
            chromium.close()


def test_the_model_answer_renders_within_the_policy_unanswered_answers_get_0_and_reviews_link_to_answers(
        tmp_path, browser_kit):
    """Issue 66, item 11, in Chromium: the model answer is HTML made on the server (paragraphs, formulas kept as their
    source) and the page's Content-Security-Policy reports nothing; the unanswered answers are listed and given 0 with
    one button; the review queue's request links to the answer it is about."""
    with grading_site(tmp_path) as (url, engine, who, subs), browser_kit.sync_playwright() as pw:
        from autograder.service import reviews

        chromium = pw.chromium.launch(executable_path=browser_kit.executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            ta = chromium.new_context(locale="en-GB").new_page()
            ta.set_default_timeout(TIMEOUT_MS)
            refused = []
            ta.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
            _sign_in(ta, url, who["ta1"])
            ta.goto(f"{url}/dashboard/grading/answer?question={QUESTION.id}&submission={subs['ada']}&lang=en")
            ta.click("#model-answer summary")
            model = ta.locator("#model-answer .model-text")
            assert model.is_visible() and model.locator("p").count() == 2           # the source's two paragraphs
            formulas = model.locator(".math")
            assert formulas.count() > 5 and formulas.first.inner_text() == "$q \\cdot k = \\sum_{i=1}^{d_k} q_i k_i$"

            ta.goto(f"{url}/dashboard/grading?lang=en")
            with ta.expect_navigation():
                ta.click("#unanswered-link")
            assert ta.locator("#unanswered tbody tr").count() == 1 and "ben" in ta.inner_text("#unanswered")
            with ta.expect_navigation():
                ta.click("#zero-unanswered")
            assert "1 unanswered answers given 0; 0 left out" in ta.inner_text("#notice")
            assert marks.Book.read(engine).mark("ben", QKV.id, QUESTION.id, answer_sha("")).points == 0.0
            assert "No unanswered answer" in ta.goto(f"{url}/dashboard/grading/unanswered?lang=en").text()

            ada = "<script>alert(1)</script> Var = d_k"
            marks.save_mark(engine, COURSE, student="ada", assignment=QKV.id, question=QUESTION.id,
                            answer_sha=answer_sha(ada), rubric=["variance"], comment="", who="ta1", version=0)
            reviews.ask(engine, COURSE, "ada", QKV.id, QUESTION.id, "please look again")
            ta.goto(f"{url}/dashboard/reviews?lang=en")
            with ta.expect_navigation():
                ta.click("#reviews a.review-target")
            assert f"submission={subs['ada']}" in ta.url and "Var = d_k" in ta.inner_text("#answer")
            assert refused == []
        finally:
            chromium.close()
