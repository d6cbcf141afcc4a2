"""``python -m autograder.exports gradescope-run ...``: what Gradescope's run_autograder runs."""
import sys

from autograder.exports.command import main

sys.exit(main())
