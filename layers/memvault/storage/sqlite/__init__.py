"""The SQLite adapters: the embedded default of local mode (one file, WAL)."""
