"""``python -m streams.cli``: the ``gangstate`` command, as the tests and the local process
runners (``streams.dev``) start it in subprocesses."""

import sys

from streams.cli import main

sys.exit(main())
