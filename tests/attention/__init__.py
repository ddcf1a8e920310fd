"""Module 12 (Attention) fixtures: the catalog of bug and style notebooks in grader/modules/attention/examples/."""
