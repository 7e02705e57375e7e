"""Plain records of the domain types, shared by both storage adapters and the change feed:
``memory`` (memory versions and deletion jobs) and ``traces`` (the trace store's records).
Each adapter adds its own keys; neither holds a copy of these field lists."""
