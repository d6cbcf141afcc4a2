"""The service's routes, one router per resource: the API's submissions, signing in, the student's page, the
instructor's dashboard, its downloads (the Hub's sign-in is :meth:`autograder.service.hub.Hub.router`)."""
