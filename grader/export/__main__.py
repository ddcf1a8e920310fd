"""``python -m grader.export ...``: the ``grader export`` command, usable before it is wired into ``grader``."""

import sys

from .cli import main

sys.exit(main(["export", *sys.argv[1:]]))
