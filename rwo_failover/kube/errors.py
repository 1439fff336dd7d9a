"""What an API call can end in, short of an answer: the errors every layer above catches, and the rules
that say which of them a retry may cure."""

from __future__ import annotations

import json

import urllib3
from kubernetes.client.exceptions import ApiException


class ApiError(Exception):
    """A call that did not succeed; `transient` ones were retried until the bound."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(ApiError):
    """RBAC denied a verb; the message names it."""


class WriteStopped(ApiError):
    """A write attempt not sent because the write guard named a reason (a stop signal, lost leadership).

    `unanswered` is True when an earlier attempt of the same call was sent and got no answer: it may have
    landed."""

    def __init__(self, reason: str, attempts: int, unanswered: bool) -> None:
        super().__init__(reason)
        self.attempts, self.unanswered = attempts, unanswered


class AnswerTooLarge(ApiError):
    """An answer longer than its cap (a list page: MAX_PAGE_BYTES): left unread, so it costs no memory."""


class OddAnswer(ValueError):
    """A complete JSON answer that is not an object (a proxy's, a broken server's): no API call answers with
    one, so it is judged like a body that cannot be parsed, and retried."""


# What leaves an attempt without a usable answer: a reset, a timeout, a body cut short or of another shape, or
# bytes that are not UTF-8 (a proxy's: JSON is UTF-8, and json.loads and msgspec both raise UnicodeDecodeError).
NO_ANSWER = (urllib3.exceptions.HTTPError, json.JSONDecodeError, ConnectionError, OddAnswer, UnicodeDecodeError)


class Unavailable(ApiError):
    """The API server did not answer usefully within the attempts or the deadline.

    `answered` is False when no status came back at all (a reset, a timeout, a cut body): for a
    write, that means it may have landed.
    """

    def __init__(self, message: str, status: int = 0, answered: bool = True) -> None:
        super().__init__(message, status)
        self.answered = answered


def is_transient(err: BaseException) -> bool:
    if isinstance(err, ApiException):
        return err.status == 429 or 500 <= (err.status or 0) <= 599
    return isinstance(err, NO_ANSWER)


def describe(err: BaseException) -> str:
    if isinstance(err, ApiException):
        return f"HTTP {err.status} {err.reason or ''}".strip()
    return f"{type(err).__name__}: {err}"


def message_of(err: ApiException) -> str:
    try:
        return json.loads(err.body or "{}").get("message") or describe(err)
    except (ValueError, AttributeError):
        return describe(err)
