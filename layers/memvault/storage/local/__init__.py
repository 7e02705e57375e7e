"""The local file adapters: objects encrypted per tenant under a local master key."""
