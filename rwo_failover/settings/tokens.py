"""Bearer token files (the fence webhook's): read at start-up and before each use, never quoted."""

from __future__ import annotations

import re


class TokenError(ValueError):
    """A token file that cannot be sent; the message says what is wrong with it, and never holds its content."""


TOKEN_ALLOWED = "a readable file holding one bearer token on one line"
MAX_TOKEN_BYTES = 16384
_B64TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")  # RFC 6750's b64token: all a Bearer credential may hold


def read_bearer_token(path: str) -> str:
    """The bearer token in the file at `path`; TokenError naming what keeps it from being sent. Read at start-up
    (exit 2) and before each webhook call (a rotated file is picked up; a bad one is a failed fence). No message
    ever quotes the file: whatever it holds may be the token."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOKEN_BYTES + 1)
    except OSError as err:
        raise TokenError(err.strerror or type(err).__name__) from None
    if len(raw) > MAX_TOKEN_BYTES:
        raise TokenError(f"it is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenError("it is not ASCII text") from None
    if not token:
        raise TokenError("it is empty")
    if "\n" in token or "\r" in token:
        raise TokenError("it holds more than one line")
    if not _B64TOKEN.fullmatch(token):
        raise TokenError("it holds a character a bearer token cannot hold (RFC 6750: letters, digits, "
                         "- . _ ~ + / and a trailing =)")
    return token
