"""Interpreter handlers (being written)."""
HANDLERS: dict = {}
