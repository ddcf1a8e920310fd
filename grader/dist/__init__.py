"""Staff tools that make the two distributions from this one source tree (docs/COURSE_SETUP.md).

    python -m grader.dist refresh [--check]     # the public checks' shipped expected outputs
    python -m grader.dist student --out DIR     # the student wheel (tinytorch-grader-student)
    python -m grader.dist staff --out DIR       # the staff wheel (tinytorch-grader)

Not part of the student package.
"""
