"""``python -m memvault_client.mcp``: the same server as ``memvault mcp``."""

import sys

from memvault_client.mcp.cli import main

if __name__ == "__main__":
    sys.exit(main())
