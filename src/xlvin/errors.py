"""Errors a user can cause: the CLI prints them as one line on stderr and exits non-zero."""


class UserError(Exception):
    """Bad input (unknown id, bad value, missing or corrupt file). Message is one line."""
