"""A chapter's source notebook run in this process, for the tests that check its prose against its numbers.
:func:`run_chapter` executes the code cells of source/NAME/NAME.ipynb in order (the self-check and hidden-test cells
left out, plots closed rather than shown, torch's thread count put back) and gives their namespace and the chapter's
markdown; the evidence tests of tests/curriculum/ assert that each number the prose quotes is what the cells computed.
:data:`ROOT` is the repository (the course's source/ is under it).
"""
from __future__ import annotations

from pathlib import Path

import nbformat

#: The repository: the course's source/, release/ and solutions/ are under it.
ROOT = Path(__file__).resolve().parent.parent


def run_chapter(assignment: str) -> tuple[dict, str]:
    """Execute the source notebook's code cells in order; return its namespace and all markdown."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    nb = nbformat.read(ROOT / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    namespace: dict = {}
    threads = torch.get_num_threads()
    show = plt.show
    plt.show = lambda *a, **k: plt.close("all")
    try:
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type != "code" or grade_id.endswith(("_check", "_tests")):
                continue
            code = cell.source.replace("from autograder import check", "")
            exec(compile(code, f"{assignment}:{grade_id}", "exec"), namespace)
    finally:
        plt.show = show
        plt.close("all")
        torch.set_num_threads(threads)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return namespace, markdown
