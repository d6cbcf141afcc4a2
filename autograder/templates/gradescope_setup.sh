#!/usr/bin/env bash
# setup.sh for Gradescope, written by `autograder export gradescope @ASSIGNMENT@`.
# Gradescope runs it once, as root, while it builds the autograder image from its Ubuntu
# base image (24.04, or any whose python3 is 3.10 or newer). It installs the grader's Python
# packages into a virtual environment of their own; run_autograder grades with that Python.
set -euo pipefail

SOURCE="${AUTOGRADER_ROOT:-/autograder}/source"
VENV="${AUTOGRADER_VENV:-/opt/course-kit-venv}"

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip

# torch first, pinned, and its CPU build: the course is checked against torch==2.13.0, and
# the default PyPI wheel for Linux pulls in gigabytes of CUDA libraries that Gradescope's
# CPU machines cannot use. Installed first so nothing below pulls in another build.
"$VENV/bin/python" -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# Then what the kit's grader imports, at the versions it was exported with. The kit itself
# is not installed: run_autograder runs it from source/ (with its course.yml and solutions/).
"$VENV/bin/python" -m pip install -r "$SOURCE/requirements.txt"

# Fail the image build now, not at the first submission, if anything is missing.
cd "$SOURCE"
PYTHONPATH="$SOURCE" "$VENV/bin/python" -c "
import torch
import autograder.grading, autograder.exports.command, autograder.sandbox.host
assert torch.__version__.split('+')[0] == '2.13.0', torch.__version__
print('course kit ready: torch', torch.__version__)
"
