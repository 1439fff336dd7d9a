"""URL settings (FENCE_WEBHOOK_URL, PUSHGATEWAY_URL): checked, used and shown through one parser, urllib.parse.

A regex that checked them while urlsplit shaped what was sent and shown let the two disagree: a password
holding ? or # ends urlsplit's authority early, so the "host" became user:pass, the password was echoed in
the exit-2 message or read as a port (InvalidURL on every run, part of it on stderr). Now a URL is accepted
only when urlsplit reads it as written: an @ may appear once, as the end of user:password@, and ? # / @ in a
user or password must be percent-encoded. What is shown is urlsplit's reading without the userinfo, and a text
that does not read that way is never shown at all.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

NOT_SHOWN = "(a URL with an @ that is not plainly user:password@host; not shown)"
ENCODE = "percent-encode ? # / @ in a user or password (%3F %23 %2F %40)"


def _userinfo_only(url: str, netloc: str) -> bool:
    """True when the text's only @ (if any) ends the userinfo of the authority urlsplit found."""
    return url.count("@") == (1 if "@" in netloc else 0)


def check_url(text: str, schemes: tuple[str, ...], userinfo_ok: bool) -> str:
    """`text` stripped, when it is a URL of one of `schemes` that urlsplit reads as written; ValueError saying
    what is wrong otherwise, never quoting any part of it."""
    value = text.strip()
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("it holds whitespace or a control character")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ValueError("it cannot be parsed as a URL") from None
    if not _userinfo_only(value, parts.netloc):
        raise ValueError(f"it holds an @ that is not the end of user:password@; {ENCODE}")
    if parts.scheme not in schemes or not value.startswith(f"{parts.scheme}://"):
        raise ValueError(f"it does not start with {' or '.join(s + '://' for s in schemes)}")
    if "@" in parts.netloc and not userinfo_ok:
        raise ValueError("it holds user:password@")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked for it
    except ValueError:
        raise ValueError("its port is not a number in [0, 65535]") from None
    if not parts.hostname:
        raise ValueError("it names no host")
    return value


def without_userinfo(url: str) -> str:
    """The URL as it may be logged or shown: any user:password@ dropped; NOT_SHOWN when urlsplit cannot tell
    the userinfo apart (a rejected setting, or a Location header a fencer sent)."""
    if "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return NOT_SHOWN
    if not _userinfo_only(url, parts.netloc):
        return NOT_SHOWN
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
