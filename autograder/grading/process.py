"""What every trusted grading process sets up: ``autograder grade``, a service worker, an explain job.

One math thread before numpy and torch load (:data:`GRADER_ENV`), torch on the trusted side
(:func:`trusted_torch`), the modules it will need imported beside the sandbox template's start
(:func:`import_lazy_modules`), and SIGTERM read as Ctrl-C (:func:`sigterm_interrupts`).
"""
from __future__ import annotations

import importlib
import os
import signal
import threading
from typing import Any

from autograder.course.notebook import skip_unused_schema_formats


#: Set before numpy and torch load in the grader: one thread for their math, as torch.set_num_threads(1)
#: below. The trusted side's tensors are small, and numpy's OpenBLAS would otherwise start a thread pool
#: at import, which makes forking the grader's lanes (ForkedLanes) unsafe.
GRADER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def prepare_grader_process() -> None:
    """What every grading process (``grade``, a service worker) sets before numpy and torch load: one
    math thread (GRADER_ENV; :func:`one_torch_thread` once torch is in), notebook schemas it never reads skipped."""
    for key, value in GRADER_ENV.items():
        os.environ.setdefault(key, value)
    skip_unused_schema_formats()


def trusted_torch(device: str) -> None:
    """torch on the trusted side: one thread per grading thread (its tensors are small; two service workers
    with two torch threads each on two cores halved their speed), and no TF32 on CUDA (references in full
    float32, as the tolerances assume)."""
    import torch

    torch.set_num_threads(1)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


#: Modules the trusted side needs later, each a tenth of a second or more: none now (report.html's charts are
#: SVG drawn by autograder.reports.charts; matplotlib's import, 0.4 s, ran beside the first submission's
#: grading and slowed it by as much, each of its round trips waiting for the import thread to let go of the
#: GIL). Reading notebooks needs neither nbformat, only for an nbformat 3 one, nor IPython's input
#: transformer, 0.7 s, only for a cell with magics: see autograder.course.notebook.
LAZY_IMPORTS: tuple[str, ...] = ()
#: Imported too when more than one submission is to be graded: sympy (0.5 s), which the first
#: nn.MultiheadAttention call with a key_padding_mask pulls in through torch._check_with. Then it is
#: imported once, while the sandbox template starts, not once per lane process in the grading loop;
#: a cold start of one submission imports it only if that submission needs it.
BATCH_IMPORTS = ("torch.fx.experimental.symbolic_shapes",)


def import_lazy_modules(batch: bool = False) -> threading.Thread:
    """Import LAZY_IMPORTS in a thread while the sandbox template starts: this process would only wait
    for the template then, and the template's imports take one core of two. Grading does not wait for
    the thread: a module it needs first waits for the thread's import of it (Python's module locks)."""
    def work() -> None:
        for name in LAZY_IMPORTS + (BATCH_IMPORTS if batch else ()):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - torch internals move; this only saves time
                pass

    thread = threading.Thread(target=work, name="lazy-imports", daemon=True)
    thread.start()
    return thread


def sigterm_interrupts() -> None:
    """SIGTERM (a scheduler's kill) stops like Ctrl-C: finished results are already on disk."""
    if threading.current_thread() is threading.main_thread():
        def handler(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt()

        signal.signal(signal.SIGTERM, handler)
