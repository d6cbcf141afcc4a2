"""The service as an LTI 1.3 Advantage tool: the course inside Canvas and Moodle, grades flowing back by themselves.

- :mod:`.keys`: the tool's own RSA key pair (made once, 0600 beside the database) and its JWKS.
- :mod:`.platforms`: the LMSs registered (``autograder serve lti register``), the LMS courses the service is bound to
  (a launch from any other is refused), their members.
- :mod:`.launch`: OIDC third-party login initiation and the launch's ``id_token``, checked whole before anything
  is stored; the launched user signed in to the pages with the role the LMS gives.
- :mod:`.jwks`: each platform's key set, as last fetched, checked against on every launch.
- :mod:`.deep_linking`: an instructor picks the kit's assignment; exactly one line item per assignment.
- :mod:`.ags`: Assignment and Grade Services: the platform's access token, line items, scores.
- :mod:`.outbox`: every change of a counted score (:mod:`autograder.service.history`) sent once, in order, retried
  with backoff from a table of the same database.
- :mod:`.nrps`: Names and Role Provisioning Services: the LMS course's members into the roster.
- :mod:`.hub_users`: a JupyterHub signing its users in with ltiauthenticator (LTI 1.3): each Hub user linked to their
  LMS identity (the launch's claims the Hub keeps as their ``auth_state``), so their scores go back to the LMS too.
- :mod:`.selftest`: ``serve lti selftest``, the running service checked as an LMS would check it, by a platform of
  its own (:mod:`.selftest_platform`) that leaves no row behind (:mod:`.selftest_rows`).

PyJWT (with ``cryptography``) signs and checks every JWT; :mod:`.jwks` keeps each platform's key set (no key outlives
the set it came in; one bounded fetch at a time, a failure remembered a few seconds); httpx fetches the key sets and
calls the platform's services. No LTI library is used: the ones for Python are framework adapters (Django, Flask) or
unmaintained, and the protocol's checks are a page of code over PyJWT.
"""
