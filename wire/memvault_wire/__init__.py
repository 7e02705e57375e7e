"""memvault's wire models, shared by the server and its clients (pydantic only).

Every model is declared with ``defer_build=True``: a Lambda cold start builds only the
validators it uses.
"""

__version__ = "0.1.0"
