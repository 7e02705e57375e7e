"""Every Lambda entry point, one module per function: ``api``, ``direct``, ``authorizer``,
``indexer``, ``purge`` and ``sweeper``. ``functions/<name>/index.py`` imports its
``handler`` from here and holds nothing else.

These modules are the top of the package: they face the Lambda runtime (event shapes,
Powertools' logger, tracer and metrics decorators) and build the composition
(``memvault.wiring``) on first use. Nothing below imports them.
"""
