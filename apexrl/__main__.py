"""``python -m apexrl`` is the ``apexrl`` command (where the script is not on PATH)."""

import sys

from apexrl.cli import main

sys.exit(main())
