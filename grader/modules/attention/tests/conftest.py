"""The grader's fixtures for a unit's tests: an isolated cache, no standing module, one session."""

from grader.unittesting import grader_environment, grading_session  # noqa: F401
