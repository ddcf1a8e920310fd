"""Module 12 (Attention) fixtures: the catalog of bug and style notebooks in submissions/12_attention/."""
