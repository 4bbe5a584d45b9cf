"""``python -m sa_core.cli``."""

import sys

from sa_core.cli import main

sys.exit(main())
