"""Hidden checks: autograder only, never shipped in the student bundle."""
