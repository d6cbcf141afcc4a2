"""The kit's version (pyproject.toml's ``version``): ``autograder.__version__`` and every ``--version`` read it
here, so that no module of the kit imports the package's own ``__init__`` (which imports the self-check)."""
from __future__ import annotations

__version__ = "0.1.0"
