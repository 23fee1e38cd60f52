"""Errors a user can cause: the CLI prints them as one line on stderr and exits non-zero."""

#: The longest reason `one_line` keeps.
REASON_LIMIT = 300


class UserError(Exception):
    """Bad input (unknown id, bad value, missing or corrupt file). Message is one line."""


class TrainingDiverged(UserError):
    """A loss became NaN or infinite (PPO's, TransE's): training stops before the weights are
    touched."""


def one_line(err: BaseException, limit: int = REASON_LIMIT) -> str:
    """An exception's message as one line: every line of it joined (so a reason on the second
    line is kept), whitespace collapsed, cut at `limit` characters; its type name if empty."""
    text = " ".join(str(err).split())
    if not text:
        return type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
