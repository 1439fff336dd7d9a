"""`python -m rwo_failover`: the same as reconcile.py."""

import sys

from .run.cli import main

sys.exit(main())
