"""The engine's messages to students, one catalogue per language.

Every sentence the grader, the sandbox and the reports write for a student comes from
here: ``say("timeout.call", seconds=10)`` gives both languages (a :class:`Msg`), and
``text("timeout.call", "zh", seconds=10)`` one. Parameters are values (numbers, names,
a student's exception text), never sentences, so a Chinese message never carries an
English clause. ``tests/core/test_messages.py`` holds the catalogue to that: every key in
both languages with the same parameters, no English words in the Chinese texts, every
key used and every key used present.

Check titles and course content (``checks/``, ``hidden/``, ``mistakes/``) are the
course's, bilingual where they are declared; this catalogue is the engine's.
"""
from __future__ import annotations

import re
import string
from typing import Any, NamedTuple

LANGUAGES = ("zh", "en")


class Msg(NamedTuple):
    """A message in both languages."""

    zh: str
    en: str

    def get(self, language: str) -> str:
        return self.zh if str(getattr(language, "value", language)) == "zh" else self.en


#: key -> (zh, en). Keys are grouped by who speaks: status words, report labels, check
#: failures, the sandbox, a submission that cannot be graded.
CATALOGUE: dict[str, tuple[str, str]] = {
    # -- autograder explain (the instructor's eyes only: hidden inputs and reference values) -----
    "explain.head": ("{student} · {exercise} {function}：评分于 {graded_at}，来自 {source}（仅限教师：下面有隐藏输入和参考答案的值）",
                     "{student} · {exercise} {function}: graded {graded_at} from {source} (instructor only: hidden "
                     "inputs and reference values below)"),
    "explain.changed": ("注意：当时评为 {then} 分，这次是 {now} 分（评分器后来改过？请重新评分）",
                        "note: it was graded {then}, this run gives {now} (has the grader changed since? grade it again)"),
    "explain.score": ("{points} / {max_points} 分，{status}", "{points} / {max_points} points, {status}"),
    "explain.mistake": ("已知错误 {mistake}：{message}", "known mistake {mistake}: {message}"),
    "explain.last_call": ("最后一次调用（这项检查共 {n} 次），探针 {probe}：", "the last call ({n} in this check), probe {probe}:"),
    "explain.argument": ("参数 {name}：{value}", "argument {name}: {value}"),
    "explain.returned": ("学生的函数返回：{value}", "the student's function returned: {value}"),
    "explain.call_failed": ("学生的调用：{status} {error_type} {error}", "the student's call: {status} {error_type} {error}"),
    "explain.reference": ("参考答案给出：{value}", "the reference gives: {value}"),
    "explain.reference_raises": ("参考答案抛出：{error_type}: {error}", "the reference raises: {error_type}: {error}"),
    # -- a check's or an exercise's status --------------------------------------------------
    "status.passed": ("通过", "passed"),
    "status.failed": ("未通过", "failed"),
    "status.not_attempted": ("未作答", "not attempted"),
    "status.missing": ("函数缺失", "function missing"),
    "status.error": ("出错", "error"),
    "status.forbidden": ("使用了禁止的调用", "forbidden call"),
    "status.timeout": ("超时", "timed out"),
    "status.crashed": ("中断", "crashed"),
    "status.too_large": ("返回值过大", "output too large"),
    "status.check_error": ("检查程序出错", "check error"),
    # -- feedback and report labels ---------------------------------------------------------
    "label.score": ("得分", "Score"),
    "label.exercise": ("练习", "Exercise"),
    "label.status": ("状态", "Status"),
    "label.hidden": ("隐藏检查", "hidden check"),
    "label.public": ("公开检查", "public check"),
    "label.diagnosis": ("诊断", "Diagnosis"),
    "label.cells": ("出错的单元格（从 1 数起，含文字单元格）", "Cells that raised (counting from 1, text cells included)"),
    "label.cell": ("单元格", "cell"),
    "label.not_graded": ("未能评分", "not graded"),
    "label.title": ("评分反馈", "Grading feedback"),
    "label.total": ("总分", "Total"),
    "service.no_token": ("需要令牌：请求头里加上 Authorization: Bearer <你的令牌>", "a token is needed: send "
                         "Authorization: Bearer <your token>"),
    "service.bad_token": ("令牌无效：请检查课程发给你的令牌", "the token is not valid: check the one the course gave you"),
    "service.students_submit": ("只有学生可以提交；教师令牌只能查看", "only students submit; an instructor's token reads"),
    "service.unknown_assignment": ("没有作业 {assignment}；作业有：{known}", "no assignment {assignment}; the "
                                   "assignments are {known}"),
    "service.too_large": ("文件太大：笔记本最大 {limit} MiB", "the file is too large: a notebook is at most {limit} MiB"),
    "service.not_a_notebook": ("这不是 Jupyter 笔记本（.ipynb 的 JSON）", "this is not a Jupyter notebook (.ipynb JSON)"),
    "service.unreadable_notebook": ("这不是 Jupyter 笔记本（.ipynb 的 JSON）：{why}", "this is not a Jupyter notebook "
                                    "(.ipynb JSON): {why}"),
    "service.no_submission": ("找不到提交 {submission}", "no submission {submission}"),
    "service.too_many": ("请求太频繁：请 {seconds} 秒后再试", "too many requests: try again in {seconds} s"),
    "service.queue_full": ("评分队列已满：你的作业没有收下，请稍后再交（不会丢失已收下的作业）",
                           "the grading queue is full: this upload was not taken; submit again shortly (nothing "
                           "already taken is lost)"),
    "service.queued_enough": ("你已有 {waiting} 份提交在排队：等它们评完再交", "you already have {waiting} submissions "
                              "waiting to be graded: submit again once they are"),
    "service.wrong_assignment": ("这份笔记本是作业 {said} 的，不是 {wanted}：请在 {said} 下提交，或者选对文件",
                                 "this notebook is assignment {said}, not {wanted}: submit it under {said}, or choose "
                                 "the right file"),
    "service.notebook_refused": ("笔记本没有收下：{why}", "the notebook was not accepted: {why}"),
    "service.body_too_large": ("请求太大：最多 {limit}", "the request is too large: at most {limit}"),
    "service.body_too_slow": ("请求发送太慢（{seconds} 秒没有收到数据）：请检查网络后再试", "the request came too slowly "
                              "(nothing for {seconds} s): check the network and try again"),
    "service.database_away": ("评分服务的数据库暂时连不上：请几秒后再试（已收下的作业不会丢失）", "the grading service's "
                              "database is not answering: try again in a few seconds (nothing already taken is lost)"),
    "service.internal": ("评分服务内部出错了：请稍后再试；如果一直这样，请告诉助教", "the grading service failed on this "
                         "request: try again later, and tell the course staff if it keeps failing"),
    "service.token_characters": ("令牌里有不该有的字符（空格、换行、中文或全角字符）：请重新复制令牌",
                                 "the token has invalid characters (spaces, line ends or non-ASCII): copy it again"),
    "service.attempts_used": ("这次作业已经提交了 {used} 次，最多 {most} 次", "{used} submissions of this "
                              "assignment already, at most {most}"),
    "service.attempts_today": ("今天这次作业已经提交了 {used} 次，每天最多 {most} 次；明天再交",
                               "{used} submissions of this assignment today, at most {most} a day; submit again "
                               "tomorrow"),
    "service.signed_out": ("登录已过期：请重新登录", "the sign-in has expired: sign in again"),
    "service.bad_csrf": ("表单已过期或来自别的网站：请刷新页面后再试", "the form is stale or came from another site: "
                         "reload the page and try again"),
    "service.instructors_only": ("只有教师和助教能看这一页", "only instructors and TAs see this page"),
    "service.instructor_only": ("只有教师能做这件事（名单和令牌由教师管理）", "only an instructor may do this (the roster and "
                                "the tokens are the instructor's)"),
    "service.not_on_roster": ("{student} 不在名单上（没有令牌，也没有提交过）；相近的有：{close}", "{student} is not on the "
                              "roster (no token, no submission); close ones: {close}"),
    "service.no_exercise": ("作业 {assignment} 没有练习 {exercise}", "assignment {assignment} has no exercise {exercise}"),
    "service.explain_busy": ("另一份扣分原因正在生成：请 {seconds} 秒后再试", "another explanation is being made: try "
                             "again in {seconds} s"),
    "service.explain_failed": ("没能生成扣分原因：{why}", "the explanation could not be made: {why}"),
    "service.bad_extension": ("延期填写有误：{why}", "the extension is not valid: {why}"),
    "service.malformed": ("请求格式不对：{fields}", "the request is malformed: {fields}"),
    "service.no_question": ("没有书面问题 {question}；书面问题有：{known}", "no written question {question}; the questions "
                            "are {known}"),
    "service.no_answer": ("提交 {submission} 不是书面问题 {question} 计分的那份答卷", "submission {submission} is not a "
                          "counted answer to question {question}"),
    "service.not_graded": ("提交 {submission} 还没有评分结果", "submission {submission} has no grade yet"),
    "service.too_long": ("{field} 太长：最多 {n} 个字符", "{field} is too long: at most {n} characters"),
    "service.reason_needed": ("调整分数要写理由：学生会看到它", "an adjustment needs a reason: the student reads it"),
    "service.not_double": ("书面问题 {question} 不是双人评分的题", "written question {question} is not double-marked"),
    "service.not_both_marks": ("提交 {submission} 对 {question} 的答卷还没有两份评分：没有可裁定的", "the answer of "
                               "submission {submission} to {question} has not both its marks yet: nothing to decide"),
    "submit.no_settings": ('不知道把作业交到哪里：请设置环境变量 AUTOGRADER_SERVER 和 AUTOGRADER_TOKEN，或在 {config} 里写上 {{"server": ..., "token": ...}}（地址和令牌由课程提供）', 'no grading service to submit to: set AUTOGRADER_SERVER and AUTOGRADER_TOKEN, or write {{"server": ..., "token": ...}} into {config} (the course gives you both)'),
    "submit.unsaved": ('注意：磁盘上的 {name} 比你最后一次运行单元格还旧，提交的是磁盘上的版本；请先保存（Ctrl+S）再提交', 'note: {name} on disk is older than your last cell run; the file on disk is what is sent: save the notebook (Ctrl+S) first'),
    "submit.no_assignment": ('不知道 {name} 是哪一次作业：请写 submit("作业编号")，作业有：{known}', 'which assignment is {name}? write submit("assignment id"); the assignments are {known}'),
    "submit.unreachable": ('连不上评分服务 {server}：{why}', 'cannot reach the grading service at {server}: {why}'),
    "submit.queued": ('已提交（第 {submission} 号），前面还有 {position} 份', 'submitted (number {submission}), {position} ahead in the queue'),
    "submit.running": ('正在评分……', 'grading...'),
    "submit.done": ('评分完成：{points} / {max_points} 分', 'graded: {points} / {max_points} points'),
    "submit.done_waiting": ('评分完成：{points} / {max_points} 分；书面问题 {questions}（{waiting} 分）等待助教批改，还没有计入',
                            'graded: {points} / {max_points} points; the written answers {questions} ({waiting} '
                            'points) wait for a TA to grade them and are not counted yet'),
    "submit.failed": ('评分程序出错，请联系助教', 'the grader failed; please tell the staff'),
    "submit.waiting": ('还没有评完；稍后再看：提交编号 {submission}', 'not graded yet; look again later: submission {submission}'),
    "submit.passed": ('通过', 'passed'),
    "submit.not_passed": ('未通过', 'not passed'),
    "submit.hidden": ('隐藏检查', 'hidden check'),
    "submit.public": ('公开检查', 'public check'),
    "submit.token_characters": ('令牌里有不该有的字符（空格、中文或全角字符）：请从课程发的文件里重新复制令牌', 'the token has invalid characters (spaces, non-ASCII): copy it again from the file the course gave you'),
    "submit.no_notebook_file": ('不知道这个笔记本存在哪个文件里（在命令行里转换执行或当脚本运行时就是这样）：请在终端里运行 autograder submit 笔记本文件名.ipynb', 'cannot tell which file this notebook is (as when it runs under nbconvert or as a script): run autograder submit NOTEBOOK.ipynb in a terminal'),
    "submit.missing": ('找不到文件 {name}', 'no file {name}'),
    "label.note": ("说明", "Note"),
    "label.written": ("书面问题（人工批改）", "Written answers (graded by a person)"),
    "label.question": ("问题", "Question"),
    "label.waiting": ("等待批改，尚未计分", "waiting for a person, not scored yet"),
    "label.max_waiting": ("其中 {points} 分的书面问题等待批改：{questions}",
                          "{points} points of written answers wait for a person: {questions}"),
    "label.rubric": ("评分细则", "Rubric"),
    "label.comment": ("评语", "Comment"),
    "label.adjusted": ("教师调整了自动得分：{before} → {after}，理由：{reason}",
                       "the automatic score was adjusted by the staff: {before} → {after}, because: {reason}"),
    "label.late": ("迟交", "Late submission"),
    "label.due": ("提交期限", "Deadline"),
    "label.late_total": ("扣分前 {raw}，迟交扣 {penalty}", "{raw} before the late penalty of {penalty}"),
    "label.what_now": ("请检查你提交的文件（正确的 .ipynb 笔记本、文件名与作业对应），然后重新提交。",
                       "Check the file you submitted (a valid .ipynb notebook named for the assignment) and "
                       "submit again."),
    "label.public_summary": ("公开检查：通过 {passed}/{total} 项。隐藏检查的结果在成绩发布后显示。",
                             "Public checks: {passed}/{total} passed. Hidden checks show once grades are published."),
    "label.forbidden_note": ("本题调用了禁止的函数（{names}），整题记 0 分。",
                             "This exercise calls a forbidden function ({names}): the whole exercise scores 0."),
    # -- why a check failed -----------------------------------------------------------------
    "check.not_attempted": ("尚未作答（仍在抛出 NotImplementedError）", "not attempted (still raises NotImplementedError)"),
    "check.missing": ("找不到函数 {function}：请确认定义它的单元格已运行且名字没改",
                      "{function} is not defined: run the cell that defines it and keep its name"),
    "check.too_large": ("返回值过大：{detail}", "return value too large: {detail}"),
    "check.too_large_hidden": ("返回值过大", "return value too large"),
    "check.timeout": ("超时：{detail}", "timed out: {detail}"),
    "check.crashed": ("运行中断：{detail}", "the run was cut short: {detail}"),
    "check.raised": ("代码抛出了 {kind}：{detail}", "your code raised {kind}: {detail}"),
    "check.raised_hidden": ("代码在隐藏测试的输入上抛出了 {kind}（先用公开自检和更多形状测试你的函数）",
                            "your code raised {kind} on a hidden test input (test your function on more shapes "
                            "and dtypes, starting with the public self-check)"),
    "check.failed_hidden": ("在隐藏测试的输入上未通过：{title}", "failed on the hidden test inputs: {title}"),
    "check.forbidden": ("使用了禁止的调用：{names}", "used a forbidden call: {names}"),
    "check.guard_off": ("调用返回时，检查禁止调用的机制已被关闭或改动，这道题记 0 分",
                        "when the call returned, the guard against forbidden calls had been switched off or "
                        "changed: the exercise scores 0"),
    "check.some_exception": ("某种异常", "an exception"),
    "check.own_exception": ("一个不属于 Python、torch 或 NumPy 的异常类（例如你在笔记本里定义的）的异常",
                            "an exception of a class that is not Python's, torch's or NumPy's (one defined in "
                            "your notebook, say)"),
    # -- the sandbox: how a call or a cell ended ----------------------------------------------
    "sandbox.call_timeout": ("调用在 {seconds} 秒内没有返回（死循环？）",
                             "the call did not return within {seconds} s (an endless loop?)"),
    "sandbox.cell_timeout": ("单元格在 {seconds} 秒内没有运行完（死循环？）",
                             "the cell did not finish within {seconds} s (an endless loop?)"),
    "sandbox.budget": ("这份提交用完了它的时间上限（{seconds} 秒）",
                       "the submission used up its time limit of {seconds} s"),
    "sandbox.slow_again": ("不再运行：之前一次调用 {function} 超过了 {seconds} 秒",
                           "not run again: an earlier call of {function} took longer than {seconds} s"),
    "sandbox.output_too_large": ("返回值过大：{size} MiB，上限 {limit} MiB",
                                 "output too large: {size} MiB, at most {limit} MiB"),
    "sandbox.stopped_unknown": ("运行学生代码的进程停止了（退出状态未知）", "the worker stopped (exit status unknown)"),
    "sandbox.stopped_status": ("运行学生代码的进程停止了（等待状态 {status}）", "the worker stopped (wait status {status})"),
    "sandbox.killed_signal_hint": ("运行学生代码的进程被信号 {signal} 终止（{hint}）", "killed by {signal} ({hint})"),
    "sandbox.hint.SIGKILL": ("不是沙箱自己的时间或内存上限：可能是机器本身内存不足，或被人终止", "not one of the sandbox's own limits: the machine ran short of memory, or someone stopped it"),
    "sandbox.killed_memory": ("运行学生代码的进程用的内存（文件与内核内存也算在内）超过上限，被内核终止",
                              "the worker was killed by the kernel: its memory (files and kernel memory included) "
                              "went past limits.memory_mb"),
    "sandbox.hint.SIGXCPU": ("CPU 时间上限", "CPU time limit"),
    "sandbox.hint.SIGXFSZ": ("文件大小上限", "file size limit"),
    "sandbox.hint.SIGSEGV": ("段错误", "segmentation fault"),
    "sandbox.hint.SIGBUS": ("总线错误", "bus error"),
    "sandbox.hint.SIGABRT": ("异常中止", "aborted"),
    "sandbox.hint.SIGFPE": ("算术错误", "arithmetic error"),
    "sandbox.exit_status": ("运行学生代码的进程退出了（状态 {status}：代码里调用了 sys.exit、os._exit 之类？）",
                            "the worker exited with status {status} (sys.exit, os._exit or similar in the "
                            "student's code?)"),
    "sandbox.killed_signal": ("运行学生代码的进程被信号 {signal} 终止", "killed by {signal}"),
    "sandbox.stopped_twice": ("不再运行：{function} 已经两次让运行学生代码的进程停止（{detail}）",
                              "not run again: {function} stopped the worker twice ({detail})"),
    "sandbox.not_run": ("未运行：{detail}", "not run: {detail}"),
    "sandbox.not_run_plain": ("未运行", "not run"),
    "sandbox.keeps_stopping": ("这些单元格反复让运行学生代码的进程停止", "the cells keep stopping the worker"),
    "sandbox.restarts": ("未运行：运行学生代码的进程已经停止了 {count} 次（最近一次：{detail}）",
                         "not run: the worker already stopped {count} times (last: {detail})"),
    "sandbox.malformed": ("运行学生代码的进程发回了格式错误的数据", "the worker sent malformed data"),
    "sandbox.unreadable": ("运行学生代码的进程发回的结果无法读取", "the worker's reply could not be read"),
    "sandbox.unexpected": ("运行学生代码的进程发来了意外的消息", "the worker sent an unexpected message"),
    "sandbox.stopped_after_cell": ("运行学生代码的进程在这个单元格之后停止了", "the worker stopped after this cell"),
    "sandbox.closed": ("运行学生代码的进程已关闭", "the sandbox worker is closed"),
    "sandbox.not_restarted": ("运行学生代码的进程无法重新启动", "the worker could not be restarted"),
    "sandbox.not_started": ("运行学生代码的进程无法启动：{detail}", "the worker could not be started: {detail}"),
    "sandbox.gone": ("运行学生代码的进程已不在", "the sandbox worker is gone"),
    "sandbox.cell_too_large": ("单元格大于 {kib} KiB（limits.cell_kb），没有运行",
                               "the cell is larger than {kib} KiB (limits.cell_kb): not run"),
    # -- a submission that cannot be graded ---------------------------------------------------
    "submission.unreadable": ("无法读取笔记本：{detail}", "the notebook could not be read: {detail}"),
    "submission.also_found": ("同一作业还有其他副本，未评分：{others}", "other copies of this assignment were not graded: {others}"),
    "submission.written_pending": ("书面问题等待助教批改，这里没有计入：{questions}（共 {points} 分）",
                                   "written answers wait for a person and are not counted here: {questions} "
                                   "({points} points)"),
    "submission.old_format": ("笔记本为旧格式 nbformat 3，已自动转换", "the notebook was in the old nbformat 3 and was converted"),
    "submission.grader_fault": ("评分程序处理这份笔记本时出错（{kind}），教师会查看",
                                "the grader failed on this notebook ({kind}); the instructor will look"),
    "submission.stand_in": ("{exercise} 调用了你的 {function}（练习 {earlier}），它在 {earlier} 已经扣过分：评分 {exercise} 时，"
                            "这些调用由参考答案作答，同一个错误只扣一次",
                            "{exercise} calls your {function} (exercise {earlier}), which already lost points in "
                            "{earlier}: while {exercise} was graded, the reference answered those calls, so a mistake "
                            "costs its points once"),
    "submission.stand_in_pasted": ("{exercise} 调用了你粘贴进来的 {function}（练习 {earlier}），它没有通过 {earlier} 自己的检查："
                                   "评分 {exercise} 时，这些调用由参考答案作答，同一个错误只扣一次",
                                   "{exercise} calls the {function} you pasted in (exercise {earlier}), which fails "
                                   "{earlier}'s own checks: while {exercise} was graded, the reference answered those "
                                   "calls, so a mistake costs its points once"),
    "submission.pasted_failed": ("你粘贴进来的 {function}（练习 {earlier}）没有通过 {earlier} 自己的检查（{checks}）。它在这里不计分，"
                                 "也不连累用到它的练习；请回到 {earlier} 改正它",
                                 "the {function} you pasted in (exercise {earlier}) fails {earlier}'s own checks "
                                 "({checks}). It scores nothing here and costs the exercises that use it nothing; "
                                 "go back to {earlier} to fix it"),
    "nbgrader.not_your_answer": ("这里不是你的答案：你提交的笔记本没能评分（{why}），请检查文件后重新提交",
                                 "This is not your answer: the notebook you submitted could not be graded ({why}); "
                                 "check the file and submit it again"),
    "notebook.cannot_read": ("文件读不出来（{detail}）", "the file cannot be read ({detail})"),
    "notebook.empty": ("文件是空的，不是笔记本", "an empty file, not a notebook"),
    "notebook.ipython_too_costly": ("这个单元格有 {lines} 行 IPython 命令（%、!、?）又很长，评分时不改写也不运行",
                                    "this cell holds {lines} lines of IPython commands (%, !, ?) and is long: "
                                    "the grader neither rewrites nor runs it"),
    "notebook.too_large": ("文件有 {size} MiB，超过了笔记本的上限 {limit} MiB", "{size} MiB, more than the {limit} MiB a "
                           "notebook may have"),
    "notebook.not_utf8": ("不是 UTF-8 文本，不是笔记本", "not UTF-8 text, not a notebook"),
    "notebook.invalid_json": ("JSON 格式有误（第 {line} 行第 {column} 列）：文件可能被截断或手工改坏了",
                              "invalid JSON (line {line}, column {column}): the file may be cut short or edited by hand"),
    "notebook.invalid_json_at": ("JSON 格式有误（{detail}）：文件可能被截断或手工改坏了",
                                 "invalid JSON ({detail}): the file may be cut short or edited by hand"),
    "notebook.too_many_cells": ("笔记本有超过 {limit} 个单元格（{setting}），评分程序不读", "the notebook has more than "
                                "{limit} cells ({setting}): the grader does not read it"),
    "notebook.too_deep": ("笔记本的 JSON 嵌套超过 {limit} 层（{setting}），不像是 Jupyter 保存的笔记本",
                          "the notebook's JSON is nested more than {limit} levels deep ({setting}): not a notebook "
                          "Jupyter saved"),
    "notebook.too_many_values": ("笔记本的 JSON 有超过 {limit} 个值（{setting}）：输出太多了？清除所有单元格的输出后"
                                 "保存再交", "the notebook's JSON holds more than {limit} values ({setting}): "
                                 "too much output? Clear the outputs (Edit → Clear Outputs), save and submit again"),
    "notebook.not_a_notebook": ("是 JSON，但不是笔记本（没有 nbformat 字段）", "JSON, but not a notebook (no nbformat field)"),
    "notebook.nbformat": ("不支持的笔记本格式 nbformat {version}（应为 4）", "unsupported nbformat {version} (4 is expected)"),
    "notebook.broken": ("笔记本的结构损坏了，读不出单元格", "the notebook's structure is broken: no cells can be read"),
    "notebook.bad_cell": ("第 {cell} 个单元格损坏了（没有 cell_type）", "cell {cell} is broken (no cell_type)"),
    "submission.too_large": ("结果过大，已截短到 {kib} KiB 以内", "this result was cut to fit {kib} KiB"),
    "submission.problem": ("无法评分：{detail}", "cannot be graded: {detail}"),
    "submission.not_extracted": ("没能从 zip 中取出：{detail}", "not extracted from the zip: {detail}"),
    "submission.unidentified": ("无法确定这份笔记本属于谁、属于哪个作业（{kind}）",
                                "could not tell whose notebook this is or for which assignment ({kind})"),
    "submission.unknown_assignment_said": ("笔记本自称属于作业 {said}，课程中没有这个作业",
                                           "the notebook says it is for {said}, and the course has no such assignment"),
    "submission.unknown_assignment": ("看不出这份笔记本属于哪个作业：请按作业命名文件（例如 02_qkv_attention.ipynb）",
                                      "cannot tell which assignment this notebook is for: name the file for the "
                                      "assignment (e.g. 02_qkv_attention.ipynb)"),
    "submission.ambiguous_assignment": ("路径中出现了多个作业名（{names}），无法确定是哪一个",
                                        "the path names several assignments ({names}): cannot tell which"),
    "submission.wrong_assignment": ("这份笔记本是作业 {said}，这里评分的是 {wanted}",
                                    "this notebook is for {said}; this grades {wanted}"),
    "submission.ambiguous_student": ("路径中有多个文件夹都可能是学生名（{names}）",
                                     "several folders of the path could name the student ({names})"),
    "submission.unknown_student": ("路径和文件名里都看不出学生是谁", "nothing in the path or file name names the student"),
    "submission.namesakes": ("同名学生的 {count} 份笔记本来自不同的文件夹（{where}），无法区分",
                             "{count} notebooks of one student name come from different folders ({where}): "
                             "cannot tell them apart"),
    "submission.no_notebook": ("提交里没有 .ipynb 笔记本", "the submission holds no .ipynb notebook"),
    "submission.several_notebooks": ("提交里有多份笔记本（{names}）：只提交 {notebook}",
                                     "several notebooks ({names}): submit only {notebook}"),
    # -- the student's self-check (check() in a notebook, autograder check NOTEBOOK) --------------
    "selfcheck.no_course": ("这里找不到课程（没有 course.yml）：请在课程文件夹里打开这个笔记本；在课程的在线平台上请联系助教",
                            "no course here (no course.yml): open this notebook inside the course's folder, or have the course set AUTOGRADER_COURSE; on JupyterHub, ask the staff"),
    "selfcheck.bad_course": ("课程文件有误，自检没法运行：{detail}；请告诉助教", "the course's file is broken, so the self-check cannot run: {detail}; tell the staff"),
    "selfcheck.earlier_first": ("{exercise} 调用了你的 {function}（练习 {earlier}），而它自己的公开检查还没通过：{exercise} 的问题可能出在那里，请先改好 {earlier}",
                                "{exercise} calls your {function} (exercise {earlier}), which fails its own public checks: {exercise}'s failure may come from there; fix {earlier} first"),
    "selfcheck.failed": ("自检本身出错了（{kind}: {detail}）。请重新运行上面的单元格后再试；如果仍然出错，请告诉助教。",
                         "self-check itself failed ({kind}: {detail}). Re-run the cells above and try again; if it "
                         "keeps failing, tell the teaching staff."),
    "selfcheck.unknown_language": ("不认识语言 {language}，改用 {using}（可选：zh、en）",
                                   "unknown language {language}, using {using} (choose zh or en)"),
    "selfcheck.no_public_checks": ("练习 {exercise} 还没有公开的自检项。", "exercise {exercise} has no public checks yet."),
    "selfcheck.exit": ("你的代码调用了 exit()/sys.exit()：函数里不要退出程序",
                       "your code called exit()/sys.exit(): do not exit inside the function"),
    "selfcheck.unfinished": ("检查无法完成（{kind}: {detail}）：请确认返回值的类型与形状符合题目要求",
                             "the checks could not finish ({kind}: {detail}): make sure the return value has the "
                             "type and shape the exercise asks for"),
    "selfcheck.no_fingerprints": ("没有找到已知错误的数据（autograder/data/fingerprints.json），所以不能指出是哪种常见错误；"
                                  "教师运行 autograder build 即可生成。",
                                  "no known-mistake data (autograder/data/fingerprints.json), so common mistakes are "
                                  "not named; `autograder build` makes it."),
    "selfcheck.public_checks": ("公开检查", "public checks"),
    "selfcheck.fixed_seed": ("不在 nbgrader autograde 中：用固定的种子", "not under nbgrader autograde: fixed seed"),
    "selfcheck.no_functions": ("没有在这个笔记本里找到任何练习函数。请先运行定义函数的单元格，或者指明练习，例如 "
                               "check(\"2.4\")。可用的练习：{known}",
                               "no exercise function is defined in this notebook yet. Run the cells that define them, "
                               "or name an exercise, e.g. check(\"2.4\"). Exercises: {known}"),
    "selfcheck.cli_unknown_exercise": ("没有编号为 {key} 的练习。可用的练习：{ids}", "there is no exercise {key}. Exercises: {ids}"),
    "selfcheck.cli_unknown_exercise_guess": ("没有编号为 {key} 的练习。你是不是想写 --exercise {guess}？可用的练习：{ids}",
                                             "there is no exercise {key}. Did you mean --exercise {guess}? Exercises: {ids}"),
    "selfcheck.cli_no_exercise": ("{notebook}：这个笔记本里没有定义 course.yml 中的任何练习",
                                  "{notebook}: no exercise of course.yml is defined in this notebook"),
    "selfcheck.cli_no_exercise_hint": ("用 --exercise 编号 指定练习，或者检查笔记本的文件名",
                                       "pass --exercise ID, or check the notebook's file name"),
    "selfcheck.unknown_exercise": ("没有编号为 {key} 的练习。可用的练习：{ids}", "there is no exercise {key}. Exercises: {ids}"),
    "selfcheck.unknown_exercise_guess": ("没有编号为 {key} 的练习。你是不是想写 check(\"{guess}\")？可用的练习：{ids}",
                                         "there is no exercise {key}. Did you mean check(\"{guess}\")? Exercises: {ids}"),
    "selfcheck.head.passed": ("全部通过", "all passed"),
    "selfcheck.head.not_attempted": ("尚未作答（函数仍在抛出 NotImplementedError）",
                                     "not attempted (the function still raises NotImplementedError)"),
    "selfcheck.head.missing": ("找不到这个函数：请运行定义它的单元格，且不要改函数名",
                               "function not defined: run the cell that defines it and keep its name"),
    "selfcheck.head.forbidden": ("使用了禁止的调用 {calls}：本题计 0 分，请自己实现",
                                 "used a forbidden call ({calls}): this exercise scores 0, implement it yourself"),
    "selfcheck.likely_mistake": ("可能的错误：", "likely mistake: "),
    "selfcheck.public_score": ("练习 {exercise}：公开检查 {passed}/{total} 项通过，{score} 分（最终得分由教师的全部检查给出）",
                               "exercise {exercise}: {passed}/{total} public checks pass, {score} points (the final "
                               "score comes from all the instructor's checks)"),
    "selfcheck.checks_passed": ("{ok}/{n} 项检查通过", "{ok}/{n} checks passed"),
    "selfcheck.n_checks": ("（{n} 项检查）", " ({n} checks)"),
    "selfcheck.summary": ("自检 {title}：{done}/{n} 题通过", "self-check {title}: {done}/{n} exercises pass"),
    "selfcheck.summary_todo": ("，{todo} 题尚未作答", ", {todo} not attempted"),
    "selfcheck.exercises_pass": ("{done}/{n} 题通过", "{done}/{n} exercises pass"),
    "selfcheck.no_checks": ("（没有可运行的检查）", "(no checks to run)"),
    "selfcheck.step.itself": ("自检本身", "the self-check itself"),
    "selfcheck.step.cell": ("第 {cell} 个单元格（{first}）", "cell {cell} ({first})"),
    "selfcheck.step.call": ("练习 {exercise}（调用 {function}）", "exercise {exercise} (a call to {function})"),
    "selfcheck.whole_timeout_running": ("自检在 {seconds} 秒内没有完成（course.yml 的 limits.submission_seconds），"
                                        "停止时正在运行{what}。是不是有死循环？",
                                        "the self-check did not finish within {seconds} s (course.yml "
                                        "limits.submission_seconds); it was stopped while running {what}. An endless loop?"),
    "selfcheck.whole_timeout_after": ("自检在 {seconds} 秒内没有完成（course.yml 的 limits.submission_seconds），"
                                      "停止时刚运行完{what}。是不是有死循环？",
                                      "the self-check did not finish within {seconds} s (course.yml "
                                      "limits.submission_seconds); it was stopped just after {what}. An endless loop?"),
    "selfcheck.call_timeout": ("{what}运行超过 {seconds} 秒（course.yml 的 limits.call_seconds）仍未结束，已停止。"
                               "是不是有死循环？改好后再运行 autograder check。",
                               "{what} was still running after {seconds} s (course.yml limits.call_seconds) and was "
                               "stopped. An endless loop? Fix it and run autograder check again."),
    "selfcheck.died": ("运行{what}时，自检进程意外退出（退出码 {exitcode}）：是不是调用了 os._exit()，或者内存用光了？",
                       "the self-check process ended while running {what} (exit code {exitcode}): did the code "
                       "call os._exit(), or run out of memory?"),
    "selfcheck.table_title": ("自检：{name}", "self-check: {name}"),
    "selfcheck.column.exercise": ("练习", "exercise"),
    "selfcheck.column.check": ("检查", "check"),
    "selfcheck.column.result": ("结果", "result"),
    "selfcheck.column.message": ("说明", "message"),
    "selfcheck.column.mistake": ("可能的错误", "mistake"),
    "selfcheck.cell_not_run": ("第 {cell} 个单元格未运行：{detail}", "cell {cell} not run: {detail}"),
    "selfcheck.call_stopped": ("{function} 运行超过 {seconds} 秒（course.yml 的 limits.call_seconds）仍未结束，已停止：是不是有死循环？",
                               "{function} was still running after {seconds} s (course.yml limits.call_seconds) and "
                               "was stopped: an endless loop?"),
    "selfcheck.call_stopped_in": ("{function} 运行超过 {seconds} 秒（course.yml 的 limits.call_seconds）仍未结束，已停止：它停在你的函数 "
                                  "{inner} 里，是不是 {inner} 有死循环？",
                                  "{function} was still running after {seconds} s (course.yml limits.call_seconds) "
                                  "and was stopped inside your function {inner}: does {inner} loop forever?"),
    "selfcheck.cell_stopped": ("第 {cell} 个单元格（{first}）运行超过 {seconds} 秒，已停止；后面的单元格照常运行",
                               "cell {cell} ({first}) was still running after {seconds} s and was stopped; the cells "
                               "after it ran as usual"),
    "selfcheck.cell_stopped_in": ("第 {cell} 个单元格（{first}）运行超过 {seconds} 秒，已停止：它停在你的函数 {function} "
                                  "里，是不是 {function} 有死循环？后面的单元格照常运行",
                                  "cell {cell} ({first}) was still running after {seconds} s and was stopped inside "
                                  "your function {function}: does {function} loop forever? The cells after it ran as "
                                  "usual"),
    "selfcheck.demo_stopped": ("第 {cell} 个单元格（{first}，本章的演示单元格）运行超过 {seconds} 秒（course.yml 的 limits.demo_seconds），已停止{where}；后面的单元格照常运行",
                               "cell {cell} ({first}, a demonstration cell of the chapter) was still running after {seconds} s (course.yml limits.demo_seconds) and was stopped{where}; the cells after it ran as usual"),
    "selfcheck.demo_stopped_in": ("，停止时它正在调用你的 {function}", ", while it was calling your {function}"),
    "selfcheck.interrupted": ("自检被中断了（停止按钮或 Ctrl-C）：中断前还没检查的练习标为未检查",
                              "the self-check was interrupted (the stop button or Ctrl-C): the exercises it had not "
                              "checked yet are marked so"),
    "selfcheck.cell_raised": ("第 {cell} 个单元格出错并被跳过：{kind}: {detail}", "cell {cell} raised and was skipped: {kind}: {detail}"),
    "selfcheck.cell_out_of_time": ("第 {cell} 个单元格（{first}）运行了 {seconds} 秒后被停止{where}：笔记本分到的时间用完了（{share} 秒：course.yml 的 limits.submission_seconds 减去留给检查的 {checks} 秒）",
                                   "cell {cell} ({first}) was stopped after {seconds} s{where}: the notebook's share of "
                                   "the time ran out ({share} s: course.yml limits.submission_seconds less the "
                                   "{checks} s kept for the checks)"),
    "selfcheck.cells_skipped_time": ("第 {cells} 个单元格没有运行：笔记本分到的 {share} 秒已经用完（course.yml 的 limits.submission_seconds 减去留给检查的 {checks} 秒）",
                                     "cells {cells} were not run: the notebook's share of the time, {share} s, was "
                                     "spent (course.yml limits.submission_seconds less the {checks} s kept for the "
                                     "checks)"),
    "selfcheck.cell_killed": ("{what}运行超过 {seconds} 秒仍未结束，而且无法中断（卡在一次很长的调用里）：自检只好停在这里",
                              "{what} was still running after {seconds} s and could not be interrupted (stuck in "
                              "one long call): the self-check stopped there"),
    "selfcheck.not_checked": ("未检查：{why}", "not checked: {why}"),
    "selfcheck.why.checks_time": ("留给检查的 {seconds} 秒已经用完", "the {seconds} s kept for the checks were spent"),
    "selfcheck.why.stopped": ("自检停在了{what}", "the self-check was stopped in {what}"),
    "selfcheck.why.died": ("运行{what}时自检进程意外退出", "the self-check process ended while running {what}"),
    "selfcheck.why.interrupted": ("自检被中断了", "the self-check was interrupted"),
    # -- the service as a JupyterHub service (autograder/service/hub.py) and submit() inside the Hub -----------
    "hub.bad_next": ("登录后只能回到评分服务自己的页面（以 {prefix} 开头的地址）", "after signing in, only a page of the grading service (an address starting with {prefix}) can be returned to"),
    "hub.bad_state": ("这次登录不是从本页面开始的，或者已经过期：请重新登录", "this sign-in did not start from here, or it expired: sign in again"),
    "hub.refused": ("Jupyter 平台没有完成登录（{why}）：请重新登录", "JupyterHub did not complete the sign-in ({why}): sign in again"),
    "hub.no_access": ("Jupyter 平台的账号 {user} 没有使用评分服务的权限：请联系助教", "the JupyterHub account {user} has no access to the grading service: ask the staff"),
    "hub.unavailable": ("暂时无法向 Jupyter 平台核实身份：请稍后再试", "JupyterHub could not be asked who this is just now: try again shortly"),
    "hub.busy": ("同时登录的人太多：请稍后再试", "too many sign-ins under way: try again shortly"),
    "submit.no_server": ("不知道评分服务的地址：在 Jupyter 平台上它由课程设置（环境变量 AUTOGRADER_SERVER），请联系助教", "no grading service address: on JupyterHub the course sets it (the AUTOGRADER_SERVER variable, c.Spawner.environment): ask the staff"),
    # -- the service's pages (autograder/service/ui.py: UI, the templates' T) -------------------------------------
    "page.login": ("登录", "Sign in"),
    "page.token": ("令牌（课程发给你的）", "Token (the course gave you one)"),
    "page.sign_in": ("登录", "Sign in"),
    "page.hub_sign_in": ("用 Jupyter 平台登录", "Sign in with JupyterHub"),
    "page.logout": ("退出", "Sign out"),
    "page.mine": ("我的提交", "My submissions"),
    "page.dashboard": ("教师面板", "Instructor dashboard"),
    "page.due": ("截止", "Due"),
    "page.no_due": ("没有截止时间", "no due date"),
    "page.attempts_left": ("还可提交 {n} 次", "{n} submissions left"),
    "page.attempts_any": ("提交次数不限", "no limit on submissions"),
    "page.today_left": ("今天还可提交 {n} 次", "{n} left today"),
    "page.upload": ("上传笔记本", "Upload a notebook"),
    "page.send": ("提交", "Submit"),
    "page.received": ("收到时间", "received"),
    "page.state": ("状态", "state"),
    "page.score": ("得分", "score"),
    "page.feedback": ("反馈", "feedback"),
    "page.none_yet": ("还没有提交。", "No submission yet."),
    "page.queued": ("排队中", "queued"),
    "page.running": ("评分中", "grading"),
    "page.done": ("已评分", "graded"),
    "page.failed": ("评分出错", "grading failed"),
    "page.unknown": ("未知", "unknown"),
    "page.student": ("学生", "student"),
    "page.assignment": ("作业", "assignment"),
    "page.all": ("全部", "all"),
    "page.filter": ("筛选", "Filter"),
    "page.sort": ("排序", "sort"),
    "page.by_time": ("按时间", "by time"),
    "page.by_score": ("按得分", "by score"),
    "page.requeue": ("重新评分", "Grade again"),
    "page.requeue_all": ("重新评分这次作业的全部提交", "Grade every submission of this assignment again"),
    "page.extension": ("延期", "Extension"),
    "page.reason": ("原因", "reason"),
    "page.grant": ("批准延期", "Grant the extension"),
    "page.downloads": ("下载", "Downloads"),
    "page.feedback_zip": ("全部反馈（zip）", "all feedback (zip)"),
    "page.report": ("班级报告（实时）", "Class report (live)"),
    "page.history": ("{student} 的提交记录", "Submissions of {student}"),
    "page.late": ("迟交", "late"),
    "page.extensions": ("已批准的延期", "Extensions granted"),
    "page.queued_again": ("已重新排队：{n} 份", "queued again: {n}"),
    "page.granted": ("已批准 {student} 在 {assignment} 上延期到 {due}", "granted {student} an extension on {assignment} to {due}"),
    "page.position": ("前面还有 {n} 份", "{n} ahead in the queue"),
    "page.count": ("{n} 份提交", "{n} submissions"),
    "page.file_wins": ("；但课程的 {file} 里已有这位学生这次作业的延期，以文件为准（请在文件里修改）", "; but the course's {file} already has an extension for this student and assignment, and the file wins (change it there)"),
    "page.revoke": ("撤销", "Revoke"),
    "page.score_history": ("成绩变化记录", "Score history"),
    "page.why_graded": ("评分", "graded"),
    "page.why_regrade": ("重新评分", "graded again"),
    "page.why_extension": ("延期", "extension"),
    "page.why_late_policy": ("截止时间或迟交规则变更", "due date or late policy changed"),
    "page.why_manual": ("人工调整", "adjusted by hand"),
    "page.why_review": ("复查", "review"),
    "page.grader": ("评分程序", "the grader"),
    # Accessibility (issue 51): the skip link and the names of the pages' navigation landmarks.
    "page.skip": ("跳到正文", "Skip to the content"),
    "page.site_nav": ("语言与页面", "Language and pages"),
    "page.staff_nav": ("教师页面", "Instructor pages"),
    "service.home": ("返回首页", "Back to the first page"),
    # Hand grading (issue 51): the written answers and the adjustments of automatic scores.
    "page.grading": ("人工批改", "Hand grading"),
    "page.grading_intro": ("书面问题的答卷（只列计分的那份提交）。按评分细则勾选，分数自动相加；评语学生能看到。",
                           "The written answers of the submissions that count. Tick the rubric's items and the "
                           "points add up; the student reads the comment."),
    "page.graded_of": ("已批改 {graded} / {total}", "{graded} of {total} graded"),
    "page.grade_next": ("批改下一份", "Grade the next one"),
    "page.answer_of": ("答卷 #{submission}", "Answer #{submission}"),
    "page.answer_position": ("第 {n} 份，共 {total} 份", "{n} of {total}"),
    "page.exercise": ("练习", "exercise"),
    "page.no_answer_text": ("（学生没有作答：答卷里仍是模板文字或为空）", "(no answer: the cell still holds the template text "
                            "or is empty)"),
    "page.rubric": ("评分细则", "Rubric"),
    "page.comment": ("评语", "Comment"),
    "page.model_answer": ("参考答案（学生看不到）", "Model answer (students do not see it)"),
    "page.graded_by": ("{who} 于 {when} 批改：{points} 分", "graded by {who} at {when}: {points} points"),
    "page.not_graded_yet": ("还没有人批改", "not graded yet"),
    "page.save_next": ("保存并批改下一份", "Save and go to the next"),
    "page.save_only": ("只保存", "Save"),
    "page.previous": ("上一份", "Previous"),
    "page.next": ("下一份", "Next"),
    "page.keys_hint": ("键盘：Tab 在细则之间移动，空格勾选，在评语里按回车即保存并批改下一份；Alt+S 同样，Alt+N 下一份，"
                       "Alt+P 上一份。",
                       "Keyboard: Tab moves between the items, Space ticks one, Enter in the comment saves and goes "
                       "to the next (Alt+S too); Alt+N next, Alt+P previous."),
    "page.mark_saved": ("已保存：{points} / {max} 分", "Saved: {points} / {max} points"),
    "page.mark_conflict": ("没有保存：在你打开这份答卷之后，{who} 于 {when} 保存了它的评分（下面显示的是他们的评分）。你的选择是：{mine}；"
                           "你的评语是：{comment}。核对后再保存一次即可。",
                           "Not saved: {who} saved a mark of this answer at {when}, after you opened it (theirs is "
                           "shown below). Yours was: {mine}; your comment: {comment}. Check, then save again."),
    "page.blind": ("匿名批改：不显示学生姓名", "Blind grading: the students' names are hidden"),
    "page.answers": ("答卷", "Answers"),
    "page.all_graded": ("这道题的答卷都批改完了", "every answer to this question is graded"),
    "page.adjust": ("调整自动得分", "Adjust automatic scores"),
    "page.adjust_intro": ("改动某道练习的自动得分必须写理由，学生会在反馈里看到理由和原来的分数。",
                          "Changing an exercise's automatic points needs a reason: the student reads it, with the "
                          "points before, in the feedback."),
    "page.auto_points": ("自动得分", "automatic points"),
    "page.points_now": ("现在的得分", "points now"),
    "page.new_points": ("新的得分", "new points"),
    "page.save": ("保存", "Save"),
    "page.adjusted": ("已调整：练习 {exercise} 现在是 {points} 分", "Adjusted: exercise {exercise} now scores {points}"),
    "page.adjust_conflict": ("没有保存：{who} 刚刚调整过这道练习（理由：{reason}）。你要改成 {points} 分，理由：{mine}。核对后再保存一次。",
                             "Not saved: {who} adjusted this exercise meanwhile (because: {reason}). You wanted "
                             "{points} points, because: {mine}. Check, then save again."),
    "page.total_now": ("现在的总分：{points} / {max}", "total now: {points} / {max}"),
    # Hand grading at class size (issue 66): every unanswered answer given 0 in one action, double marking.
    "page.unanswered": ("未作答的答卷", "Unanswered answers"),
    "page.unanswered_link": ("有 {n} 份未作答的答卷还没有评分：列出来，一次给 0 分", "{n} unanswered answers wait: list them "
                             "and give them all 0"),
    "page.unanswered_intro": ("下面这些答卷仍是模板文字或为空，也还没有人评分。确认后每份记 0 分，评语是“{comment}”，和其他评分一样记录（评分历史、操作记录）；"
                              "在你确认之前有变化的答卷（学生重新提交了，或有人评了分）不会被记 0 分。",
                              "These answers still hold the template text or are empty, and no one has marked them. "
                              "Confirm, and each is given 0 with the comment \"{comment}\", recorded as any mark is "
                              "(the score history, the actions); an answer that changes before you confirm (handed in "
                              "again, or marked by someone) is left out."),
    "page.unanswered_none": ("没有未作答又未评分的答卷。", "No unanswered answer waits for a mark."),
    "page.unanswered_more": ("这里列出的是 {total} 份中的前 {n} 份：记 0 分后，这一页会列出其余的。", "These are the first {n} of "
                             "{total}: once they are given 0, this page lists the rest."),
    "page.unanswered_confirm": ("给这 {n} 份答卷记 0 分", "Give these {n} answers 0"),
    "page.unanswered_comment": ("未作答：答卷里仍是模板文字或为空。", "Unanswered: the answer cell still held the template "
                                "text or was empty."),
    "page.unanswered_done": ("已给 {n} 份未作答的答卷记 0 分；{left} 份有变化，没有记分", "{n} unanswered answers given 0; "
                             "{left} left out (changed or marked meanwhile)"),
    "page.question": ("问题", "Question"),
    "page.cell_text": ("答卷里的文字", "What the cell holds"),
    "page.empty_cell": ("（空）", "(empty)"),
    "page.double_marking": ("双人评分：两位评分人各自独立评分，互相看不到对方的评分；两人的总分相差不超过 {threshold} 分时取平均分，否则由教师裁定。",
                            "Double marking: two markers mark each answer, neither seeing the other's mark; where "
                            "their totals are at most {threshold} points apart their mean counts, else an "
                            "instructor decides."),
    "page.double_count": ("已有 {n} / 2 份评分", "{n} of 2 marks"),
    "page.double_yours": ("（其中一份是你的）", "(one is yours)"),
    "page.double_none_left": ("没有等你评分的答卷了", "nothing left for you to mark"),
    "page.double_moderation": ("两份评分都已给出，相差太大：等教师裁定", "both marks are in and differ: an instructor "
                               "decides"),
    "page.double_slot": ("你给出的是第 {n} 份评分（共 2 份）；另一位评分人的评分不显示。", "You give mark {n} of 2; the other "
                         "marker's is not shown."),
    "page.double_mine": ("你的评分：{points} 分（{when}）", "your mark: {points} points ({when})"),
    "page.double_decided": ("计分的评分：{points} 分，{who}", "the mark that counts: {points} points, {who}"),
    "page.double_saved": ("已保存你的评分：{points} / {max} 分（第 {n} 份，共 2 份）。", "Saved your mark: {points} / {max} "
                          "points (mark {n} of 2)."),
    "page.double_agreed": ("两份评分一致：计分的是平均分 {points} 分。", "The two marks agree: their mean, {points}, counts."),
    "page.double_differ": ("两份评分相差超过 {threshold} 分：由教师裁定。", "The two marks are more than {threshold} points "
                           "apart: an instructor decides."),
    "page.double_conflict": ("没有保存：在你打开这份答卷之后，别人保存了第 {n} 份评分。你的选择是：{mine}；你的评语是：{comment}。核对后再保存一次即可。",
                             "Not saved: someone saved mark {n} of this answer after you opened it. Yours was: "
                             "{mine}; your comment: {comment}. Check, then save again."),
    "page.double_closed": ("没有保存：这份答卷的两份评分都已给出（或已裁定），不能再改。你的选择是：{mine}；你的评语是：{comment}。",
                           "Not saved: both marks of this answer are in (or its mark is decided), and they no longer "
                           "change. Yours was: {mine}; your comment: {comment}."),
    "page.double_same": ("没有保存：这份答卷的另一份评分是你给的，两份评分要由两个人给出。你的选择是：{mine}；你的评语是：{comment}。",
                         "Not saved: you gave this answer's other mark, and its two marks are two people's. Yours "
                         "was: {mine}; your comment: {comment}."),
    "page.moderate": ("裁定评分", "Moderation"),
    "page.moderate_link": ("裁定", "Decide"),
    "page.moderation_waiting": ("{n} 份答卷等教师裁定", "{n} answers wait for an instructor's decision"),
    "page.moderate_intro": ("这份答卷的两份评分相差太大，或还没有裁定。你的裁定就是计分的评分，学生会看到评语。",
                            "The two marks of this answer; your decision is the mark that counts, and the student "
                            "reads its comment."),
    "page.marker": ("第 {n} 份评分：{who}，{when}，{points} 分", "Mark {n}: {who}, {when}, {points} points"),
    "page.marks_gap": ("两份总分相差 {gap} 分（一致的上限是 {threshold} 分）", "the totals are {gap} points apart (agreement: "
                       "at most {threshold})"),
    "page.moderate_points": ("分数（留空则按细则相加）", "Points (empty: the items' sum)"),
    "page.moderate_save": ("保存裁定", "Save the decision"),
    "page.moderated": ("已裁定：{points} / {max} 分", "Decided: {points} / {max} points"),
    "page.next_to_decide": ("下一份待裁定", "Next to decide"),
    # LTI 1.3 (autograder.service.lti): the launches' refusals, the staff's LTI page, the deep-linking pages
    "service.lti.login": ("LTI 登录缺少平台或用户信息：请从 LMS 里重新打开", "the LTI login lacks the platform or the user: "
                          "open the tool from the LMS again"),
    "service.lti.unknown_platform": ("没有登记这个 LMS：发行方 {issuer}，客户端 {client}（请教师先登记平台）",
                                     "no LMS is registered with issuer {issuer} and client id {client} (the instructor "
                                     "registers it first: autograder serve lti register)"),
    "service.lti.state": ("这次 LTI 登录不是从这个浏览器开始的，或者已经超过 10 分钟：请从 LMS 里重新打开",
                          "this LTI launch was not started in this browser, or is over 10 minutes old: open the tool "
                          "from the LMS again"),
    "service.lti.malformed": ("LMS 发来的登录凭据格式不对", "the LMS's launch token is malformed"),
    "service.lti.bad_signature": ("LMS 发来的登录凭据签名不对", "the signature of the LMS's launch token does not hold"),
    "service.lti.unknown_key": ("LMS 的公钥里没有编号为 {kid} 的密钥", "the LMS's JWKS holds no key with id {kid}"),
    "service.lti.platform_away": ("LMS 没有应答（{url}）：请稍后再试", "the LMS did not answer ({url}): try again later"),
    "service.lti.jwks_busy": ("正在向 LMS 取它的公钥（JWKS）：请 {seconds} 秒后再试",
                              "the LMS's keys (JWKS) are being fetched: try again in {seconds} s"),
    "service.lti.bad_jwks": ("LMS 的公钥地址（{url}）给出的不是可用的 JWKS（太大、格式不对或没有签名密钥）：请管理员检查平台登记",
                             "the LMS's key set at {url} is not a usable JWKS (too large, malformed or without a "
                             "signing key): the administrator checks the platform's registration"),
    "service.lti.expired": ("LMS 发来的登录凭据已经过期：请从 LMS 里重新打开", "the LMS's launch token has expired: "
                            "open the tool from the LMS again"),
    "service.lti.future": ("LMS 发来的登录凭据的签发时间在将来：请检查 LMS 服务器的时钟",
                           "the LMS's launch token was issued in the future: check the LMS server's clock"),
    "service.lti.azp": ("LMS 发来的登录凭据不是给这个工具的", "the LMS's launch token is for another tool (azp)"),
    "service.lti.nonce": ("LMS 发来的登录凭据不属于这次登录", "the LMS's launch token belongs to another login (nonce)"),
    "service.lti.replayed": ("这份 LTI 登录凭据已经用过了：请从 LMS 里重新打开", "this LTI launch token was used already: "
                             "open the tool from the LMS again"),
    "service.lti.deployment": ("LMS 的部署 {deployment} 没有登记", "the LMS deployment {deployment} is not registered"),
    "service.lti.message": ("不支持的 LTI 消息类型：{message}", "an LTI message type this tool does not take: {message}"),
    "service.lti.version": ("不支持的 LTI 版本：{version}（需要 1.3.0）", "LTI version {version} is not supported "
                            "(1.3.0 is)"),
    "service.lti.no_role": ("LMS 没有给你学生、助教或教师的身份", "the LMS gives you no role of a learner, a teaching "
                            "assistant or an instructor"),
    "service.lti.staff_only": ("只有教师和助教可以在 LMS 里添加作业", "only instructors and teaching assistants add "
                               "assignments from the LMS"),
    "service.lti.not_on_roster": ("你（{who}）不在本课程的名单上：请联系教师", "you ({who}) are not on the course's "
                                  "roster: ask the instructor"),
    "service.lti.unbound_course": ("LMS 里的课程「{course}」没有绑定到本评分服务，所以这次进入被拒绝：请本服务的教师在"
                                   "「LTI 与 LMS」页面上绑定它（课程编号 {context}）", "the LMS course \"{course}\" is not "
                                   "bound to this grading service, so this launch is refused: the service's instructor "
                                   "binds it on the \"LTI and the LMS\" page (course id {context})"),
    "service.lti.deep_link": ("添加作业的请求无效或已过期：请从 LMS 里重新添加", "the request to add an assignment is "
                              "invalid or expired: add it from the LMS again"),
    "page.lti": ("LTI 与 LMS", "LTI and the LMS"),
    "page.lti_tool": ("在 LMS 里登记本工具时填写", "What to enter when registering this tool in the LMS"),
    "page.lti_login_url": ("登录发起地址", "Login initiation URL"),
    "page.lti_launch_url": ("启动与跳转地址", "Launch and redirect URL"),
    "page.lti_jwks_url": ("公钥地址（JWKS）", "Public keys URL (JWKS)"),
    "page.lti_deep_link_url": ("深度链接地址", "Deep linking URL"),
    "page.lti_placements": ("放置位置", "Placements"),
    "page.lti_canvas_placements": ("Canvas：{placements}（深度链接：教师从列表里选作业），窗口设为在新标签页打开",
                                   "Canvas: {placements} (deep linking: the instructor picks the assignment from a "
                                   "list), their window set to open in a new tab"),
    "page.lti_moodle_placements": ("Moodle：勾选 {option}，内容选择地址填深度链接地址，默认启动容器选新窗口",
                                   "Moodle: tick {option}, the Content Selection URL is the deep linking URL, the "
                                   "default launch container New window"),
    "page.lti_custom_fields": ("自定义参数（Canvas）", "Custom fields (Canvas)"),
    "page.lti_no_public_url": ("course.yml 里没有设置 {setting}：下面是打开这个页面所用的地址，LMS 未必访问得到。请把它设为 LMS "
                               "和浏览器访问本服务的地址",
                               "{setting} is not set in course.yml: the URLs below are the ones this page was opened "
                               "at, which the LMS may not reach. Set it to the address the LMS and the browsers reach "
                               "the service at"),
    "page.lti_platforms": ("已登记的 LMS", "Registered LMSs"),
    "page.lti_issuer": ("发行方", "Issuer"),
    "page.lti_client": ("客户端编号", "Client id"),
    "page.lti_deployments": ("部署编号", "Deployment ids"),
    "page.lti_none": ("还没有登记 LMS：autograder serve lti register", "no LMS registered yet: autograder serve lti "
                      "register"),
    "page.lti_courses": ("LMS 里的课程", "Courses in the LMS"),
    "page.lti_courses_intro": ("本服务只接受从已绑定的课程进入：同一个 Moodle 站点或 Canvas 账户里其他课程的教师和学生会被拒绝，"
                               "他们的课程列在这里等待绑定。只绑定你自己的课程。",
                               "The service takes launches only from the courses bound here: the teachers and students "
                               "of other courses of the same Moodle site or Canvas account are refused, and their "
                               "courses are listed here as asking. Bind only your own course."),
    "page.lti_course": ("课程", "Course"),
    "page.lti_course_id": ("课程编号", "Course id"),
    "page.lti_bound": ("状态", "State"),
    "page.lti_is_bound": ("已绑定", "bound"),
    "page.lti_asking": ("等待绑定（进入被拒绝）", "asking (launches refused)"),
    "page.lti_bind": ("绑定", "Bind"),
    "page.lti_unbind": ("解除绑定", "Unbind"),
    "page.lti_bound_now": ("已绑定 LMS 课程 {course}", "LMS course {course} bound"),
    "page.lti_unbound_now": ("已解除与 LMS 课程 {course} 的绑定：其成员的会话已结束", "LMS course {course} unbound: its "
                             "members' sessions have ended"),
    "page.lti_members": ("成员", "Members"),
    "page.lti_grades": ("成绩回传", "Grade passback"),
    "page.lti_names": ("成员名单", "Member list"),
    "page.lti_sync": ("现在回传成绩", "Send grades now"),
    "page.lti_roster": ("从 LMS 导入名单", "Import the roster from the LMS"),
    "page.lti_passback": ("每位学生的成绩回传", "Each student's grade passback"),
    "page.lti_sent": ("已回传", "Sent"),
    "page.lti_pending": ("等待回传", "Waiting"),
    "page.lti_error": ("上次的问题", "Last problem"),
    "page.lti_synced": ("已回传 {sent} 个成绩；{failed} 个稍后重试", "{sent} grades sent; {failed} to try again later"),
    "page.lti_pulled": ("从 LMS 读到 {read} 位成员；新加入名单 {added} 人", "{read} members read from the LMS; {added} "
                        "added to the roster"),
    "page.lti_pick": ("选择要添加到 LMS 的作业", "Choose the assignment to add to the LMS"),
    "page.lti_pick_intro": ("作业", "Assignments"),
    "page.lti_add": ("添加", "Add"),
    "page.lti_returning": ("正在回到 LMS：{assignments}", "Back to the LMS: {assignments}"),
    "page.lti_back": ("回到 LMS", "Back to the LMS"),
    "page.roster": ("名单", "Roster"),
    "page.roster_count": ("名单上 {n} 人", "{n} on the roster"),
    # Review requests (issue 51): the student's form and list on /me, the staff's queue (autograder/service/reviews.py).
    "page.reviews": ("复查申请", "Review requests"),
    "page.reviews_link": ("复查申请（{n} 条待处理）", "Reviews ({n} open)"),
    "page.review_item": ("练习或书面题", "Exercise or written question"),
    "page.review_message": ("你的理由（最多 {n} 字）", "Your message (at most {n} characters)"),
    "page.review_ask": ("申请复查", "Ask for a review"),
    "page.review_until": ("可以申请复查到 {when}。", "You may ask for a review until {when}."),
    "page.review_window_closed": ("复查申请已于 {when} 截止。", "Review requests closed on {when}."),
    "page.review_open": ("待处理", "open"),
    "page.review_accepted": ("已接受", "accepted"),
    "page.review_declined": ("已驳回", "declined"),
    "page.review_asked": ("申请时间", "Asked"),
    "page.review_student_message": ("学生的理由", "The student's message"),
    "page.review_answer": ("答复", "Answer"),
    "page.review_points": ("得分：{old} → {new}", "points: {old} → {new}"),
    "page.review_current": ("当前得分", "Points now"),
    "page.review_new_points": ("新得分（0 到 {max}）", "New points (0 to {max})"),
    "page.review_reason": ("答复（学生会看到）", "Answer (the student reads it)"),
    "page.review_accept": ("接受并改分", "Accept with these points"),
    "page.review_decline": ("驳回", "Decline"),
    "page.review_none": ("还没有复查申请。", "No review requests yet."),
    "page.review_sent": ("已提交对 {item} 的复查申请", "review of {item} requested"),
    "page.review_accepted_notice": ("已接受 {student} 对 {item} 的复查申请：{old} → {new} 分", "accepted {student}'s review of {item}: {old} → {new} points"),
    "page.review_declined_notice": ("已驳回 {student} 对 {item} 的复查申请", "declined {student}'s review of {item}"),
    "service.review_item": ("作业 {assignment} 没有练习或书面题 {item}", "assignment {assignment} has no exercise or written question {item}"),
    "service.review_empty": ("请写下申请复查的理由", "write why you ask for a review: the message is empty"),
    "service.review_too_long": ("内容太长：{n} 字，最多 {limit} 字", "the text is too long: {n} characters, at most {limit}"),
    "service.reviews_off": ("本课程不接受复查申请", "this course takes no review requests"),
    "service.review_no_result": ("作业 {assignment} 还没有计入成绩的结果，没有可以复查的得分", "assignment {assignment} has no counted result yet: there is no score to review"),
    "service.review_ungraded": ("{item} 还没有人工评分：评分后再申请复查", "{item} has not been graded by a person yet: ask once it has"),
    "service.review_closed": ("作业 {assignment} 的复查申请已于 {when} 截止", "review requests for {assignment} closed on {when}"),
    "service.review_open": ("{item} 已有一份待处理的复查申请：请等待答复", "a review of {item} is already requested and open: wait for its answer"),
    "service.review_students_only": ("只有学生可以申请复查", "only students ask for reviews"),
    "service.review_missing": ("找不到复查申请 {review}", "no review request {review}"),
    "service.review_conflict": ("这份复查申请已被别人答复或正在答复（{who}）：你的答复没有保存，请刷新页面查看", "this request was answered, or is being answered, by someone else ({who}): your answer was not saved; reload the page to see it"),
    "service.review_points": ("新得分应为 0 到 {max} 之间的数", "the new points are a number from 0 to {max}"),
    "service.review_reason": ("请写下答复：学生会看到它", "write an answer: the student reads it"),
    "service.review_score_changed": ("{item} 的得分刚被别人改过：你的答复没有保存，复查申请仍待处理，请刷新页面", "the score of {item} was changed meanwhile: your answer was not saved and the request is still open; reload the page"),
    # -- e-mail to a student (autograder.service.mail): the words of their page, no more ---------------------------
    "mail.verdict.subject": ("{course}：作业 {assignment} 的提交 {submission} 已评分",
                             "{course}: your submission {submission} of {assignment} is graded"),
    "mail.verdict.body": ("你在 {received} 提交的作业 {assignment}（提交 {submission}）已评分，得分：{score}。",
                          "Your submission {submission} of {assignment}, received {received}, is graded: {score}."),
    "mail.hand_grade.subject": ("{course}：作业 {assignment} 的书面题 {question} 已评分",
                                "{course}: your written answer {question} of {assignment} is graded"),
    "mail.hand_grade.body": ("老师已为你在作业 {assignment} 中的书面题 {question}（{title}）评分。",
                             "A person graded your written answer {question} ({title}) of {assignment}."),
    "mail.review.subject": ("{course}：你对作业 {assignment} 中 {item} 的复查申请已有答复",
                            "{course}: your review request of {item} in {assignment} is answered"),
    "mail.review.accepted": ("你对 {item}（{title}）的复查申请已被接受：得分从 {old} 改为 {new}。",
                             "Your review request of {item} ({title}) was accepted: its points went from {old} to {new}."),
    "mail.review.declined": ("你对 {item}（{title}）的复查申请未被接受：得分不变。",
                             "Your review request of {item} ({title}) was declined: the points stay as they were."),
    "mail.see_page": ("详情见你的页面：{url}", "The details are on your page: {url}"),
    "mail.see_page_unlinked": ("详情见你的页面：登录评分服务后打开 /me。",
                               "The details are on your page: sign in to the grading service and open /me."),
    "mail.footer": ("这封邮件由课程 {course} 的评分服务自动发出。", "This mail was sent by the grading service of {course}."),
    "page.analytics": ("作业分析", "Analytics"),
    "page.analytics_show": ("查看", "Show"),
    "page.analytics_counted": ("{n} 名学生有计入成绩的结果（作业满分 {points} 分）", "{n} students with a counted result (the assignment has {points} points)"),
    "page.analytics_note": ("只统计计入成绩的结果：每名学生一份（按 course.yml 的计分规则选出），迟交规则按现在的规定计算；直方图和各班级的平均总分用的就是这些总分。满分率：这道练习拿到满分的学生比例。难度：平均得分除以这道练习的满分（越接近 1 越容易）。区分度：校正后的题目与总分相关，即“这道练习是否满分”与本次作业其余练习的总分（不含本题，不计迟交扣分）之间的点二列相关系数，取值 -1 到 1：越高，说明总体做得好的学生越能拿到这道题的满分；接近 0 或为负的题值得检查；学生少于 2 人或没有差异时为“不适用”。到满分的提交次数和时间：只统计拿到满分的学生，取中位数；次数包括第一份满分的提交及之前的全部提交，时间从该学生第一次提交这次作业算起。错误：检查诊断出的已知错误，每名学生只计一次。", "Counted results only: one per student (the one course.yml's service.counts picks), with the late policy as it is now; the histogram and the section means are of those totals. Pass rate: the share of students with full marks on the exercise. Difficulty: the mean points over the exercise's points (nearer 1 is easier). Discrimination: the corrected item-total correlation, that is the point-biserial correlation of \"full marks on this exercise\" with the total of the assignment's other exercises (without this one, before any late penalty), from -1 to 1: the higher, the more the students who do well overall are those with full marks here; one near 0 or negative is worth a look; n/a with fewer than 2 students or where either side does not vary. Submissions and time to full marks: medians over the students who reached full marks, counting every submission up to and including the first with full marks, the time from the student's first submission of the assignment. Mistakes: the named mistakes the checks diagnosed, each counted once per student."),
    "page.analytics_exercises": ("各练习", "Per exercise"),
    "page.analytics_exercise": ("练习", "Exercise"),
    "page.analytics_n": ("人数", "Students"),
    "page.analytics_pass_rate": ("满分率", "Pass rate (full marks)"),
    "page.analytics_mean": ("平均得分", "Mean points"),
    "page.analytics_distribution": ("得分分布（分数 × 人数）", "Distribution (points × students)"),
    "page.analytics_difficulty": ("难度（平均分 / 满分）", "Difficulty (mean / max)"),
    "page.analytics_discrimination": ("区分度（校正的点二列相关）", "Discrimination (corrected point-biserial)"),
    "page.analytics_attempts": ("到满分的提交次数（中位数）", "Submissions to full marks (median)"),
    "page.analytics_time": ("从首次提交到满分的时间（中位数）", "Time to full marks (median)"),
    "page.analytics_reached": ("{k}/{n} 人拿到满分", "{k} of {n} reached it"),
    "page.analytics_mistakes": ("最常见的已诊断错误（每人计一次）", "Most common mistakes (once per student)"),
    "page.analytics_sections": ("各班级", "Per section"),
    "page.analytics_no_section": ("未分班", "no section"),
    "page.analytics_mean_total": ("平均总分", "Mean total"),
    "page.analytics_histogram": ("{assignment} 的总分分布", "Totals of {assignment}"),
    "page.analytics_hist_x": ("总分（占作业满分的 %）", "total (% of the assignment's points)"),
    "page.analytics_hist_y": ("学生数", "students"),
    "page.analytics_totals": ("每名学生的总分", "Each student's total"),
    "page.analytics_total": ("总分", "Total"),
    "page.analytics_empty": ("这次作业还没有计入成绩的结果。", "No counted result for this assignment yet."),
    "page.analytics_na": ("不适用", "n/a"),
    "page.analytics_minutes": ("{n} 分钟", "{n} min"),
    "page.analytics_hours": ("{n} 小时", "{n} h"),
    "page.analytics_days": ("{n} 天", "{n} d"),
    "page.analytics_csv_exercises": ("各练习表（CSV）", "per exercise (CSV)"),
    "page.analytics_csv_sections": ("各班级表（CSV）", "per section (CSV)"),
    "page.analytics_csv_totals": ("每名学生的总分（CSV）", "each student's total (CSV)"),
    "page.missing": ("未提交", "not submitted"),
    "page.waiting": ("待评分", "waiting for a grade"),
    "page.graded": ("已评分", "graded"),
    "page.not_on_roster": ("不在名单上", "not on the roster"),
    "page.name": ("姓名", "Name"),
    "page.email": ("邮箱", "Email"),
    "page.section": ("班级", "Section"),
    "page.download_csv": ("下载 CSV", "Download CSV"),
    "page.mail_them": ("给这 {n} 人写邮件（密送）", "Mail these {n} (blind copies)"),
    "page.remove_student": ("移出名单", "Remove from the roster"),
    "page.removed": ("已把 {student} 移出名单，撤销了 {n} 个令牌；提交记录保留", "removed {student} from the roster and revoked {n} token(s); their submissions stay"),
    "page.tokens": ("令牌", "Tokens"),
    "page.live": ("有效", "live"),
    "page.revoked_state": ("已撤销", "revoked"),
    "page.expired": ("已过期", "expired"),
    "page.role": ("角色", "Role"),
    "page.role_student": ("学生", "student"),
    "page.role_ta": ("助教", "TA"),
    "page.role_instructor": ("教师", "instructor"),
    "page.holder": ("持有人", "Holder"),
    "page.issued": ("发放时间", "Issued"),
    "page.expires": ("到期时间", "Expires"),
    "page.reissue": ("重新发放", "Issue again"),
    "page.tokens_revoked": ("已撤销 {n} 个令牌：立即失效，用它登录的页面也随之退出", "revoked {n} token(s): they stop at once, and so do the pages signed in with them"),
    "page.new_token": ("{who} 的新令牌（只显示这一次，请现在交给对方；旧令牌已失效）", "{who}'s new token (shown this once: hand it over now; the old one has stopped)"),
    "page.actions": ("操作记录", "Actions"),
    "page.when": ("时间", "When"),
    "page.by": ("操作人", "By"),
    "page.action": ("操作", "Action"),
    "page.detail": ("详情", "Detail"),
    "page.due_or_duration": ("新的截止时间（课程时区 {tz}），或在原截止时间上延长多久（如 3d、36h）", "new due date (the course's time zone, {tz}), or how long past the due date (e.g. 3d, 36h)"),
    "page.revoked": ("已撤销 {student} 在 {assignment} 上的延期（{n} 条）", "revoked {student}'s extension on {assignment} ({n})"),
    "page.late_until": ("迟交截止到 {when}", "late submissions taken until {when}"),
    "page.late_open": ("迟交不设截止", "late submissions taken"),
    "page.late_costs": ("；现在交会扣 {penalty} 分（按满分 {points} 分计）", "; handing in now costs {penalty} points (computed on the maximum of {points})"),
    "page.history_waiting": ("其中 {points} 分等待批改", "{points} of it waiting for a person"),
    "page.late_closed": ("迟交时间也已过：现在交不计分", "the late window is over too: a submission now scores nothing"),
    "page.edit_hint": ("要修改一条延期，用上面的表单为同一位学生和作业再批准一次：新的取代旧的。", "To change an extension, grant one again for the same student and assignment: the new one replaces the old."),
    "page.explain": ("练习 {exercise} 为什么扣分", "why {exercise} lost points"),
    "page.explanation": ("{student} · 练习 {exercise}：为什么扣分（仅教师可见）", "{student} · {exercise}: why it lost points (instructors only)"),
}


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def say(key: str, /, **params: Any) -> Msg:
    """Both languages of ``key`` with ``params`` filled in; a parameter that is itself a :class:`Msg`
    (a check's title, another message) goes in language by language."""
    zh, en = CATALOGUE[key]
    return Msg(zh.format(**{k: v.zh if isinstance(v, Msg) else v for k, v in params.items()}),
               en.format(**{k: v.en if isinstance(v, Msg) else v for k, v in params.items()}))


def text(key: str, language: Any, /, **params: Any) -> str:
    """One language of ``key``."""
    return say(key, **params).get(language)


def status_word(status: str, language: Any) -> str:
    """A check's or an exercise's status as a word of ``language`` (an unknown one as it is spelled)."""
    key = f"status.{status}"
    return text(key, language) if key in CATALOGUE else status.replace("_", " ")


def as_dict(msg: Msg) -> dict[str, str]:
    return {"zh": msg.zh, "en": msg.en}


def is_said(message: Any, key: str) -> bool:
    """Whether ``message`` (a result's {"zh", "en"}, a :class:`Msg` or a string) is the catalogue's ``key``, with
    any parameters: a note kept in a result is found again by what it says (the feedback leaves out one that no
    longer holds)."""
    if isinstance(message, dict):
        said = [message.get(language) for language in LANGUAGES]
    elif isinstance(message, Msg):
        said = [message.zh, message.en]
    else:
        said = [message]
    for template, value in zip(CATALOGUE[key], said):
        if not isinstance(value, str):
            continue
        pattern = "".join(re.escape(literal) + ("(?s:.*?)" if name is not None else "")
                          for literal, name, _, _ in string.Formatter().parse(template))
        if re.fullmatch(pattern, value):
            return True
    return False
