"""``python -m bayesfair``: the command line (:mod:`bayesfair.workflow.cli`)."""

import sys

from bayesfair.workflow.cli import main

sys.exit(main())
