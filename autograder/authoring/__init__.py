"""The instructor's tools for a course: ``autograder build`` (release/, solutions/, the student bundle from
source/), ``autograder validate`` (the catalog proven against the known mistakes) and its ``--mutants``
(against every small change of the references)."""
