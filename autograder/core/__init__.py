"""The bottom layer: what every part of the kit may use, importing nothing of the kit itself.

Exceptions (:mod:`~autograder.core.errors`), the bilingual messages (:mod:`~autograder.core.messages`), text
bounds (:mod:`~autograder.core.text`), atomic writes (:mod:`~autograder.core.atomic`), deterministic zips
(:mod:`~autograder.core.zips`), the bounded Python parser (:mod:`~autograder.core.pyast`), lazy package
exports (:mod:`~autograder.core.lazy`), timers (:mod:`~autograder.core.stopwatch`), points in hundredths
(:mod:`~autograder.core.points`), compact JSON (:mod:`~autograder.core.compact_json`) and the kit's version
(:mod:`~autograder.core.version`). Each is small and trusted on both sides of the sandbox; import-linter holds
this package below every other.
"""
