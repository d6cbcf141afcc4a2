"""Everything that runs next to student code: in the sandbox worker, in a student's kernel (self-check) and
in-process for validate.

* :mod:`~autograder.inside.template` and :mod:`~autograder.inside.worker`: the sandbox's untrusted side, a
  template process that imported torch and friends and forks one worker per submission, which runs the cells
  and answers calls (the template warms a worker's path up once, :mod:`~autograder.inside.warm_up`, and makes
  each worker's memory cgroup, :mod:`~autograder.inside.worker_memory`); :mod:`~autograder.inside.cage` is
  what a forked worker enters before any student code runs, :mod:`~autograder.inside.memcg` its memory
  cgroup, :mod:`~autograder.inside.protocol` what crosses between the worker and the grader (imported by both
  sides).
* :mod:`~autograder.inside.probes` runs one call into student code and describes what came back, its
  :mod:`~autograder.inside.guards` watching for the calls :mod:`~autograder.inside.forbidden` names;
  :mod:`~autograder.inside.plain` is the plain data a call's arguments and results become;
  :mod:`~autograder.inside.proxies` the stand-ins' proxies; :mod:`~autograder.inside.namespace` the neutral
  namespace a notebook's cells execute in.

Nothing here holds a reference solution, a hidden check or a secret, and nothing here imports the grader's
side (:mod:`autograder.sandbox`, the catalog, grading, the service) or the course's configuration: only
:mod:`autograder.core` (import-linter's layers hold it). Every byte that comes back from here is hostile to
the grader.
"""
