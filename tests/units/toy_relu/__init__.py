"""A toy course-module unit for the tests: it grades a ``relu`` function.

It is installed the way a course's own distribution would be (an entry point of the
``tinytorch_grader.modules`` group, see tests/test_units.py), and it uses nothing of the grader
but the unit interface: ModuleUnit, the probe interface and the judge's Cause.
"""

from grader.modules import ModuleUnit

UNIT = ModuleUnit(name="relu", package=__name__, notebook_names=("relu.ipynb",))
