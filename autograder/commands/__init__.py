"""Commands that span layers: each grades and then writes what sits above grading.

``grade`` (:mod:`~autograder.commands.grade`) grades a batch, then writes the LMS files and, for an nbgrader
course, its gradebook (:mod:`autograder.exports`). The other commands live in the package of the layer they
use (``build`` and ``validate`` in authoring, ``check`` in selfcheck, ``serve`` in service).
"""
