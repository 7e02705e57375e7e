"""Domain models: identifiers, access context, memory commands and records."""
