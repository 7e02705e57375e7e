"""``python -m memvault.mcp``: the same server as ``memvault mcp``."""

import sys

from memvault.mcp.cli import main

if __name__ == "__main__":
    sys.exit(main())
