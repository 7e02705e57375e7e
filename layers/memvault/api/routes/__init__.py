"""Routes, split by resource; each is a thin adapter onto one service call."""
