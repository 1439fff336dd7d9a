#!/usr/bin/env python3
"""rwo-failover: release ReadWriteOnce volumes held by pods on nodes that are proven down.

Runs one pass and exits with a code that tells the truth; see README.md.
"""

import sys

from rwo_failover.run.cli import main

if __name__ == "__main__":
    sys.exit(main())
