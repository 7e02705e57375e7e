"""The CDK app that deploys memvault (``cdk synth`` / ``cdk deploy``, see cdk.json)."""
