"""The S3 adapters: objects under per-tenant KMS keys (what AWS runs)."""
