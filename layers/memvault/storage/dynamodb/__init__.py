"""The DynamoDB adapters: what AWS runs (conditional writes, transactions, Streams)."""
