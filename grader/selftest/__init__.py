"""Self-tests of the grader: mutation testing of its checks (``grader selftest --mutants``).

``operators`` finds the places to mutate in one parsed function, ``mutate`` turns the correct
sources (the reference solution, the golden notebooks) into mutants with stable ids, and
``mutants`` grades them and reports the kill rate, the survivors and the reviewed equivalents.
"""
