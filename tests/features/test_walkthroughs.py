"""Issue 48: the documentation's three walkthroughs (instructor, student, TA), run as printed; issue 66: the files
they write stay out of git, and the administrator's two (a PostgreSQL server started on a fresh Debian machine,
JupyterHub on one machine) run as printed too.

Each ``<!-- walkthrough: ROLE -->`` block of docs/walkthrough.md runs in bash (``set -euo pipefail``) in the
role's folder: the instructor's and the TA's in a copy of the course, the student's in a folder of her own holding her
notebook (the stubs filled in, one of them wrong), with ``AUTOGRADER_COURSE`` at the student course the build
wrote, as the student bundle or the Hub gives it. Only the port (8765, maybe taken here) and ``<your token>``
(s01's row of service-data/tokens.csv) are put in. The service the instructor starts is stopped at the end, whatever
failed. Every file the three write into the course's folder is one the repository's .gitignore ignores.
The ``postgres`` block lives in docs/admin/service.md and the ``hub`` block in docs/admin/jupyterhub.md
(:data:`HOMES`); they run as root, as CI runs, with only their folders and ports put in.
A role's guide (docs/instructor/index.md, docs/student.md, docs/student.en.md, docs/ta.md, docs/admin/setup.md)
repeats its block under the same marker: every copy must hold the same commands (their comments may speak the page's
language).
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, copy_course
from served import free_port
from support import make_samples
from autograder.course.config import load_course

QKV = load_course().assignment("02_qkv_attention")
BIN = Path(sys.executable).parent
PORT = "8765"


DOCS = ROOT / "docs"
#: The page that holds each walkthrough (every other page that shows it must show the same commands).
HOMES = {"instructor": "walkthrough.md", "student": "walkthrough.md", "ta": "walkthrough.md",
         "postgres": "admin/service.md", "hub": "admin/jupyterhub.md", "lti-selftest": "admin/lti.md"}


def _blocks(role: str, text: str) -> list[str]:
    return re.findall(rf"<!-- walkthrough: {role} -->\n```bash\n(.*?)```", text, re.S)


def _commands(block: str) -> list[str]:
    """A block's commands: each line without its trailing comment."""
    return [re.sub(r"\s+#.*$", "", line).rstrip() for line in block.splitlines()]


def walkthrough(role: str) -> str:
    """The bash block after ``<!-- walkthrough: ROLE -->`` in its page (:data:`HOMES`); every other page that shows
    the role's block must show the same commands."""
    home = HOMES[role]
    found = _blocks(role, (DOCS / home).read_text(encoding="utf-8"))
    assert len(found) == 1, f"docs/{home} has {len(found)} walkthrough blocks for {role}, not one"
    for page in sorted(DOCS.rglob("*.md")):
        for copy in _blocks(role, page.read_text(encoding="utf-8")):
            assert _commands(copy) == _commands(found[0]), (
                f"{page.relative_to(ROOT)}: the {role}'s walkthrough differs from docs/{home}'s")
    return found[0]


def test_every_guide_shows_its_roles_walkthrough_as_the_walkthrough_page_does():
    """Each role's guide repeats its block (checked against the page the slow test runs), in both languages."""
    for role, pages in {"instructor": ["instructor/index.md"], "student": ["student.md", "student.en.md"],
                        "ta": ["ta.md"], "postgres": ["admin/setup.md"], "hub": [], "lti-selftest": []}.items():
        walkthrough(role)
        for page in pages:
            assert len(_blocks(role, (DOCS / page).read_text(encoding="utf-8"))) == 1, (page, role)


def put_in(role: str, script: str, put: dict[str, str]) -> str:
    """``script`` (the role's block) with each place of ``put`` (in that order) replaced by this machine's."""
    for place, value in put.items():
        assert place in script, f"the {role}'s walkthrough no longer names {place}"
        script = script.replace(place, value)
    return script


def run_block(role: str, cwd: Path, env: dict[str, str], groups: list[int], prelude: str = "", **put: str) -> str:
    """The role's block run by bash in a process group of its own (added to ``groups``: what it leaves running
    is stopped with it), after ``prelude`` (the test's own lines); its output."""
    script = put_in(role, walkthrough(role), put)
    with subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + prelude + script], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True) as bash:
        groups.append(bash.pid)
        out, _ = bash.communicate(timeout=600)
    assert bash.returncode == 0, f"the {role}'s walkthrough failed ({bash.returncode}):\n{out}"
    return out


def _stop(groups: list[int]) -> None:
    """Whatever a block left running (the instructor's service and its workers): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        deadline = time.monotonic() + 20
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(g) for g in groups):
            time.sleep(0.2)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _files(folder: Path) -> set[str]:
    """Every file under ``folder``, relative to it (posix)."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def unignored(paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to the course's folder) that the repository's .gitignore does not ignore: what
    `git add .` would commit. Asked of git itself, in a repository of its own holding only that .gitignore."""
    with tempfile.TemporaryDirectory() as repo:
        subprocess.run(["git", "init", "-q", repo], check=True, capture_output=True, timeout=60)
        shutil.copy2(ROOT / ".gitignore", Path(repo) / ".gitignore")
        done = subprocess.run(["git", "-C", repo, "-c", "core.quotePath=false", "check-ignore", "--no-index",
                               "--stdin"], input="".join(f"{p}\n" for p in paths), capture_output=True, text=True,
                              timeout=60)
    assert done.returncode in (0, 1), done.stderr          # (1: none of them ignored)
    ignored = set(done.stdout.splitlines())
    return [p for p in paths if p not in ignored]


def test_git_ignores_the_files_a_class_writes_into_the_course_folder():
    """Issue 66, item 5: the walkthrough wrote tokens.csv, ta-token.txt, roster.csv and service.db into the checkout,
    none ignored (a `git add .` committed every token). The service's folder is ignored whole, and so are those
    names where an older guide had them written; the course's own files are not."""
    private = ["service-data/tokens.csv", "service-data/tokens-2.csv", "service-data/roster.csv",
                "service-data/ta-token.txt", "service-data/service.db", "service-data/service.db-wal",
                "service-data/service.log", "tokens.csv", "new-tokens.csv", "ta-token.txt", "roster.csv", "service.db",
                "service.db-wal", "service.db-shm", "service.log", "out/grades.csv", "dist/student-jupyter/x.json"]
    assert unignored(private) == []
    course = ["course.yml", "source/02_qkv_attention/02_qkv_attention.ipynb", "release/01_rnn_decay/01_rnn_decay.ipynb",
              "docs/walkthrough.md", "samples/roster.csv", "autograder/service/command.py"]
    assert unignored(course) == course


@pytest.mark.slow
def test_the_walkthroughs_run_as_printed(tmp_path):
    course = copy_course(tmp_path / "course")
    before = _files(course)
    home = tmp_path / "home"
    home.mkdir()
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGRADER_", "JUPYTERHUB_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(home))
    groups: list[int] = []
    try:
        # -- the instructor: the course built, the class's tokens, the service started -----------------------
        said = run_block("instructor", course, env, groups, **{PORT: port})
        assert "issued 2 tokens" in said and "02_qkv_attention" in said, said
        assert load_course(course / "course.yml").roster_students() == {"s01", "s02"}
        issued = course / "service-data" / "tokens.csv"
        rows = list(csv.DictReader(io.StringIO(issued.read_text(encoding="utf-8"))))
        assert [r["student"] for r in rows] == ["s01", "s02"] and issued.stat().st_mode & 0o077 == 0
        assert (course / "service-data").stat().st_mode & 0o077 == 0
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, (course / "service-data" / "service.log").read_text(errors="replace")
            time.sleep(0.5)

        # -- the student: her notebook (2.3 without the scale), checked, handed in, her verdict -----------------
        desk = tmp_path / "s01"
        desk.mkdir()
        wrong = make_samples.submission(QKV, solved="all", code={
            "2.3": "import torch\ndef attention_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n"})
        (desk / QKV.notebook).write_text(json.dumps(wrong), encoding="utf-8")
        student_env = dict(env, AUTOGRADER_COURSE=str(course / "dist" / "student-course"), HOME=str(desk))
        said = run_block("student", desk, student_env, groups, **{PORT: port, "<your token>": rows[0]["token"]})
        assert "自检：02_qkv_attention.ipynb" in said and "全部通过" in said, said     # check --exercise 2.1
        most = QKV.points + QKV.manual_points           # 02's maximum: its written answer's points included
        assert "评分完成" in said and f"/ {most:g} 分" in said, said               # submit: the verdict
        lost = re.search(r"^2\.3: ([0-9.]+) / ([0-9.]+)$", said, re.M)
        assert lost and float(lost.group(1)) < float(lost.group(2)), said          # (2.3 lost points)

        # -- the TA: who handed in, the export, why s01 lost points on 2.3 ---------------------------------------
        said = run_block("ta", course, env, groups, **{PORT: port})
        listing = json.loads(said[said.index("{"):said.index("}]}") + 3])
        assert [(s["student"], s["assignment"]) for s in listing["submissions"]] == [("s01", QKV.id)]
        grades = list(csv.DictReader(io.StringIO((course / "out" / "grades.csv").read_text(encoding="utf-8-sig"))))
        assert [r["student"] for r in grades] == ["s01"]
        lms = list(csv.reader(io.StringIO((course / "out" / "moodle-grades.csv").read_text(encoding="utf-8"))))
        assert lms[1][:3] == ["ada@uni.example", "", "Ada Lovelace"]          # the roster's email and name
        assert "仅限教师" in said and "已知错误 no-scale" in said and "参考答案给出" in said, said

        # -- what the three wrote into the course's folder: nothing `git add .` would commit ------------------------
        written = sorted(_files(course) - before)
        assert "service-data/tokens.csv" in written and "service-data/ta-token.txt" in written, written
        assert unignored(written) == [], "the walkthrough writes files git would commit"
    finally:
        _stop(groups)


# -- the administrator's: a PostgreSQL server, JupyterHub on one machine ---------------------------------------------
#: The test's stand-in for sudo (root needs none, and the machine may have none): ``sudo -u ACCOUNT ...`` is runuser,
#: as tests/postgres.py runs the server's tools as root. Nothing else is run through it.
SUDO = 'sudo() { [ "$1" = -u ] || { echo "sudo: only -u ACCOUNT here" >&2; return 64; }; local who=$2; shift 2; ' \
       'runuser -u "$who" -- "$@"; }\n'


@pytest.mark.slow
def test_the_postgresql_server_starts_as_printed(tmp_path):
    """Issue 66, item 7: the lines of docs/admin/service.md (and admin/setup.md) that start a PostgreSQL server on a
    fresh Debian machine, make the service's role and database and reach them through the URL they print, run as
    printed, as root as CI runs (sudo -u postgres: runuser), with only the server's folders and port put in. The
    package is the set-up's (scripts/install-postgres.sh): the test checks it is installed and installs nothing."""
    if os.geteuid() != 0:
        pytest.skip("the lines run the server's tools as the postgres account (sudo -u postgres): as root, as CI runs")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        pytest.fail("Debian's postgresql package is missing: run scripts/setup.sh (scripts/install-postgres.sh)")
    # The server's folder where the postgres account reaches it (not under this test's 0700 tmp_path); its socket
    # there too, and a port of its own: nothing of the machine's own server (if any) is touched.
    folder = Path(tempfile.mkdtemp(prefix="autograder-pg-docs-"))
    owner = pwd.getpwnam("postgres")
    os.chmod(folder, 0o755)
    os.chown(folder, owner.pw_uid, owner.pw_gid)
    data, port = folder / "data", str(free_port())
    course = copy_course(tmp_path / "course")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGRADER_", "JUPYTERHUB_", "PG"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    groups: list[int] = []
    try:
        said = run_block("postgres", course, env, groups, prelude=SUDO, **{
            "sudo apt-get install -y postgresql": "dpkg -s postgresql > /dev/null",
            "/var/lib/postgresql/autograder": str(data), "/var/run/postgresql": str(folder), "5433": port})
        assert "number  role" in said, said                     # serve token --list: connected, no token yet
        from sqlalchemy import create_engine, text

        me = pwd.getpwuid(os.geteuid()).pw_name
        engine = create_engine(f"postgresql+psycopg://{me}@/autograder?host={folder}&port={port}")
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT current_user")).scalar() == me        # peer: the account's role
                assert conn.execute(text("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = "
                                         "'autograder'")).scalar() == me
                assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1   # the tables made
        finally:
            engine.dispose()
    finally:
        _stop(groups)
        pg_ctl = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1]
        subprocess.run(["runuser", "-u", "postgres", "--", str(pg_ctl), "-D", str(data), "-m", "immediate", "-w",
                        "stop"], capture_output=True, timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def hub_config_lines() -> str:
    """The one-machine lines of docs/admin/jupyterhub.md's jupyterhub_config.py, as printed."""
    text = (DOCS / "admin" / "jupyterhub.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- jupyterhub_config: one machine -->\n```python\n(.*?)```", text, re.S)
    assert len(found) == 1, "docs/admin/jupyterhub.md has no one-machine jupyterhub_config.py (or more than one)"
    return found[0]


@pytest.mark.slow
def test_jupyterhub_on_one_machine_starts_as_printed_without_nbgrader_staff_tools_for_students(tmp_path):
    """Issue 66, item 8: docs/admin/jupyterhub.md's Hub on one machine: its jupyterhub_config.py (the one-machine
    lines, then the service's) and its commands, run as printed with only the folders, ports and password put in
    (and the test's admin service added to the config, as tests/service/test_hub.py adds it): the Hub, its proxy and
    the service answer; s01 signs in (a token), her server starts in her home holding the release notebooks, and her
    JupyterLab has nbgrader's staff plugins disabled and no formgrader, the assignment list kept."""
    from hubs import DOC_PLACES, HUB_START_S, PREFIX, PROXY, SETUP, doc_hub_lines, running_hub

    from autograder.authoring.bundle import STAFF_LAB_PLUGINS

    jupyterhub = BIN / "jupyterhub"
    if not jupyterhub.exists() or not os.access(PROXY, os.X_OK):
        pytest.fail(f"JupyterHub or configurable-http-proxy is missing: {SETUP}")
    course = copy_course(tmp_path / "course")
    hub_dir = tmp_path / "hub"
    (hub_dir / "service-home").mkdir(parents=True)
    ports = {name: free_port() for name in ("proxy", "proxy_api", "hub", "service")}
    url = f"http://127.0.0.1:{ports['proxy']}"
    admin, password = secrets.token_hex(16), secrets.token_hex(8)
    machine = put_in("hub", hub_config_lines(), {
        "/srv/course/.hub": str(ROOT / ".hub"), "/srv/course/.venv/bin": str(BIN), "/srv/hub": str(hub_dir),
        "http://127.0.0.1:8000": url, "change-this-password": password})
    service = doc_hub_lines()
    for place, here in zip(DOC_PLACES, (str(course), f"http://127.0.0.1:{ports['service']}",
                                       str(hub_dir / "service.db"), str(hub_dir / "service-home"), url + PREFIX)):
        service = service.replace(place, here)
    test = f"""
# The test's own: ports of its own for the Hub and the proxy's API, an admin service to make tokens and start servers.
c.JupyterHub.hub_port = {ports['hub']}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports['proxy_api']}"
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin!r}}})
c.JupyterHub.load_roles.append({{"name": "test-admin", "scopes": ["admin:users", "admin:servers", "tokens"],
                                "services": ["test-admin"]}})
"""
    config = hub_dir / "jupyterhub_config.py"
    config.write_text(machine + "\n# -- the service's lines (docs/admin/jupyterhub.md) --\n" + service + test,
                      encoding="utf-8")
    script = put_in("hub", walkthrough("hub"), {"/srv/course/.venv/bin": str(BIN), "/srv/course": str(course),
                                                "/srv/hub": str(hub_dir)})
    home = tmp_path / "home"
    home.mkdir()
    with running_hub(jupyterhub, config, hub_dir, url, admin, password, HOME=str(home),
                     argv=["bash", "-c", "set -euo pipefail\n" + script], start_s=HUB_START_S + 300) as hub:
        assert (course / "dist" / "student-jupyter" / "labconfig" / "page_config.json").is_file()
        assert {p.name for p in (hub_dir / "homes" / "s01").glob("*.ipynb")} == {
            f"{a.id}.ipynb" for a in load_course(course / "course.yml").assignments}
        hub.start_server("s01")
        token = {"Authorization": f"token {hub.token_of('s01')}"}
        lab = httpx.get(f"{url}/user/s01/lab", headers=token, timeout=60)
        assert lab.status_code == 200, (lab.status_code, hub.log_tail())
        found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', lab.text, re.S)
        assert found, lab.text[:500]
        disabled = set(json.loads(found.group(1)).get("disabledExtensions") or [])
        assert set(STAFF_LAB_PLUGINS) <= disabled, disabled
        assert "@jupyter/nbgrader:assignment-list" not in disabled, disabled
        formgrader = httpx.get(f"{url}/user/s01/formgrader", headers=token, timeout=60)
        assert formgrader.status_code == 404, (formgrader.status_code, formgrader.text[:300])
        # The service the Hub started takes s01's Hub token as a student's.
        mine = httpx.get(f"{hub.service}api/submissions", headers={"Authorization": token["Authorization"].replace(
            "token ", "Bearer ")}, timeout=30)
        assert mine.status_code == 200 and mine.json()["submissions"] == [], mine.text


@pytest.mark.slow
def test_the_lti_self_test_runs_as_printed(tmp_path):
    """Issue 66, item 9: the self-test of docs/admin/lti.md, run as printed against a running service (its database
    and the service's address put in): every step passes, and it says so."""
    from served import serving
    from autograder.service import db
    from autograder.service.app import create_app

    database = tmp_path / "service.db"
    engine = db.engine_for(str(database))
    db.upgrade(engine)
    app = create_app(engine, load_course())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGRADER_", "JUPYTERHUB_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    groups: list[int] = []
    try:
        with serving(app) as url:
            said = run_block("lti-selftest", ROOT, env, groups, **{
                "postgresql+psycopg://grader@db/grader": str(database), "lti selftest": f"lti selftest --url {url}"})
        assert "lti selftest: 5 of 5 steps passed" in said, said
        assert said.count("  passed  ") == 5, said
    finally:
        _stop(groups)
        app.state.lti.close()
        engine.dispose()
