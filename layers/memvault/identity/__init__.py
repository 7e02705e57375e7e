"""Verified identity: tokens in, an ``AccessContext`` out. Nothing else creates one."""
