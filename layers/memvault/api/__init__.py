"""The HTTP API (docs/api.md) on Powertools' REST resolver: routes, identity, error mapping."""
