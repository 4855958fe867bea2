"""``python -m partition_lab.cli``: the command line, as the ``partition-lab`` script runs it."""

import sys

from . import main

sys.exit(main())
