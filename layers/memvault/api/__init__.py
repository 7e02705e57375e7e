"""The HTTP API (API.md) on Powertools' REST resolver: routes, identity, error mapping."""
