from autograder.cli import entry

entry()
