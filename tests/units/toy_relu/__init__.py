"""A toy course-module unit for the tests: it grades a ``relu`` function.

It is installed the way a course's own distribution would be (an entry point of the
``tinytorch_grader.modules`` group, see tests/test_units.py), and it imports nothing of the grader
but its two faces: ``grader.unit`` on the host side, ``grader.harness.probes`` in its probes.
"""

from grader.unit import ModuleUnit

UNIT = ModuleUnit(name="relu", package=__name__, notebook_names=("relu.ipynb",), examples="examples",
                  equivalents="mutants/equivalent.toml")
