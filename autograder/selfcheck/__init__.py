"""Self-check: the public checks, in the student's own kernel or on a saved notebook.

``check("2.4")`` in a notebook finds the student's function in the notebook's
namespace, runs the exercise's public checks in-process (this is the student's
own code on the student's own machine, so no sandbox) and shows one line per
check: HTML in JupyterLab, text in a terminal. A known mistake is named from the
fingerprints the build stored (:mod:`autograder.catalog.fingerprints`): neither the
reference solutions nor the mistakes' code ship with self-check.

Two rules come from nbgrader, which may execute these notebooks: ``check`` never
writes to stderr (a cell that does scores 0) and never raises for anything the
student did. ``autograder check NOTEBOOK.ipynb`` runs the same checks on a saved
notebook from a terminal and exits 0 only when everything passes.

Heavy imports (torch, the catalog) wait for the first call, so
``from autograder import check`` and ``autograder --help`` stay instant.

The package: :mod:`~autograder.selfcheck.kernel` (``check()`` and ``check(..., score=True)`` in the
student's kernel), :mod:`~autograder.selfcheck.results` (what a self-check returns),
:mod:`~autograder.selfcheck.exercises` (which exercises it runs), :mod:`~autograder.selfcheck.public_checks`
(running them), :mod:`~autograder.selfcheck.render` (text, HTML, a table) and
:mod:`~autograder.selfcheck.command` (``autograder check NOTEBOOK``, the students' command: its parent
:mod:`~autograder.selfcheck.parent`, its child :mod:`~autograder.selfcheck.child`, the notebook's cells
:mod:`~autograder.selfcheck.execute`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.core.lazy import lazy_exports

if TYPE_CHECKING:   # the names this package offers (`X as X`: offered, for type checkers too); each loads its
    # module on first use (autograder.core.lazy)
    from autograder.selfcheck.kernel import (PublicScore as PublicScore, check as check, score as score,
                                             self_check as self_check)
    from autograder.selfcheck.results import (LANGUAGES as LANGUAGES, Note as Note,
                                              SelfCheckResult as SelfCheckResult, Text as Text)
    from autograder.selfcheck.exercises import guess_assignment as guess_assignment, resolve as resolve
    from autograder.selfcheck.public_checks import run_public as run_public
    from autograder.selfcheck.render import (print_table as print_table, render_html as render_html,
                                             render_text as render_text)
    from autograder.selfcheck.command import add_arguments as add_arguments, main as main, run as run
    from autograder.selfcheck.parent import STARTUP_SECONDS as STARTUP_SECONDS, supervise as supervise
    from autograder.selfcheck.execute import execute_notebook as execute_notebook

__getattr__ = lazy_exports(__name__, __file__)
