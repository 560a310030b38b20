"""``python -m prefixsum``: see :mod:`prefixsum.cli.main`."""

import sys

from .cli.main import main

sys.exit(main())
