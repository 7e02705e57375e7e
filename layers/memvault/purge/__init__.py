"""The purge pipeline: after a delete's tombstone, every copy made physically gone."""
