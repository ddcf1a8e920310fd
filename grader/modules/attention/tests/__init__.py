"""Module 12's own tests (staff only): run with the grader's suite, or ``pytest grader/modules/attention``."""
