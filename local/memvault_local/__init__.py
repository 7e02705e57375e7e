"""Local mode: memvault on one machine with no AWS account (never shipped to Lambda)."""
