"""Hand-written mutants (data for scripts/mutants.py); no tests are collected here."""
