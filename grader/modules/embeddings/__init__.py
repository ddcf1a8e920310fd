"""TinyTorch module 11, Embeddings: the grader's own course-module unit.

Both course generations are graded with one rubric: the older (MLSysBook/TinyTorch) and the newer
(cs249r_book, with ``start_pos`` and student-written backward functions). See rubric.toml.
"""

from grader.unit import ModuleUnit

UNIT = ModuleUnit(name="embeddings", package=__name__, number=11, runtime="tinytorch", runtime_version="1.0",
                  equivalents="mutants/equivalent.toml")
