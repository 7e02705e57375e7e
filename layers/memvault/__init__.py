"""memvault: governed memory and exact run state for AI agents.

This package is the shared runtime that every Lambda handler imports (shipped as a
layer). Code that only runs on a developer's machine lives in ``memvault_local``.
"""

__version__ = "0.1.0"
