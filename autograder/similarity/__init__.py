"""The similarity report (issue 69): ``autograder similarity``, pairs of notebooks that share what honest work
does not (rare code once the reference's approach is subtracted, unusual identifiers, comments and messages, rare
phrases of written answers, submissions minutes apart), as evidence for a conversation, never a finding.

How a pair is scored is :mod:`autograder.similarity.scoring`'s docstring; the code is compared after
:mod:`autograder.similarity.normalize` and :mod:`autograder.similarity.fragments`, and nothing of a submission is
ever run (read with :mod:`ast`)."""
