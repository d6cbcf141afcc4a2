"""Commands that span layers or stand above them.

``grade`` (:mod:`~autograder.commands.grade`) grades a batch, then writes the LMS files and, for an nbgrader
course, its gradebook (:mod:`autograder.exports`); ``course`` (:mod:`~autograder.commands.course`) checks
course.yml and the folders it names, and shows the course. The other commands live in the package of the layer
they use (``build`` and ``validate`` in authoring, ``check`` in selfcheck, ``serve`` in service).
"""
