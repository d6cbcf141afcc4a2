#!/usr/bin/env bash
# Create .venv and install the kit with every dependency. Idempotent: a second run is quick.
# torch is installed first, pinned to the CPU build 2.13.0, so nothing later pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# The stamp covers the torch build asked for: another TORCH_INDEX_URL or TORCH_VERSION installs again.
stamp=.venv/.installed-$( (cat pyproject.toml constraints.txt constraints-compare50.txt scripts/setup.sh; echo "${TORCH_VERSION:-} ${TORCH_INDEX_URL:-}") | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing into .venv (first time: a minute or two; later runs skip this)"
  .venv/bin/python -m pip install -q --upgrade pip
  echo "setup: PyTorch ${TORCH_VERSION:-2.13.0} (CPU build)"
  # TORCH_INDEX_URL: PyTorch's own index, e.g. https://download.pytorch.org/whl/cu128 for a CUDA build (the
  # README's GPU section); with it, torch is reinstalled from there even where a CPU build is installed.
  .venv/bin/python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}" \
    ${TORCH_INDEX_URL:+--force-reinstall --index-url "$TORCH_INDEX_URL"}
  echo "setup: the kit and its dependencies (nbgrader, JupyterLab, Otter, ...)"
  # Every extra (pyproject.toml's `all`: the service, the Hub, PostgreSQL, Otter, Dask, JupyterLab, the edit loop's
  # tools, the docs), at the versions constraints.txt pins (`make constraints` writes it from a working .venv).
  PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -c constraints.txt -e ".[all]"   # (setuptools' editable-install banner)
  # compare50, a peer of bench/bench_similarity.py, in a venv of its own: every compare50 since 1.2.0 requires
  # attrs<21 and the kit's jsonschema attrs>=22.2 (pyproject.toml's `bench` extra); constraints-compare50.txt pins it.
  echo "setup: compare50 in .venv/compare50 (the similarity benchmark's peer)"
  [ -x .venv/compare50/bin/python ] || .venv/bin/python -m venv .venv/compare50
  PYTHONWARNINGS=ignore .venv/compare50/bin/python -m pip install -q -c constraints-compare50.txt compare50
  .venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
  rm -f .venv/.installed-*
  touch "$stamp"
  echo "setup: done; \`source .venv/bin/activate\` puts \`autograder\` on your PATH"
fi
# A font that draws Chinese (the plots and the class report speak the course's language); SKIP_FONT=1 leaves it out.
bash scripts/install-font.sh
# PostgreSQL's server for the grading service's tests and deployments; SKIP_POSTGRES=1 leaves it out.
bash scripts/install-postgres.sh
# Chromium (Debian's package) and Playwright for the JupyterLab browser test; SKIP_BROWSER=1 leaves them out.
[ -n "${SKIP_BROWSER:-}" ] || bash scripts/install-browser.sh
# JupyterHub's proxy (configurable-http-proxy, from npm into .hub/) for the Hub tests; SKIP_HUB=1 leaves it out.
[ -n "${SKIP_HUB:-}" ] || bash scripts/install-hub.sh
