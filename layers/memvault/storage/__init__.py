"""Data access: DynamoDB table definitions, key layout and the stores built on them."""
