"""The errors of a call: an answer that is not a success, or no answer at all."""

from __future__ import annotations

from collections.abc import Collection
from typing import Generic, Literal, TypeVar

#: The code an error reports when the server answered one this version of the contract does not list.
UnknownCode = Literal["unknown"]

CodeT = TypeVar("CodeT", bound=str, covariant=True)


class PetstoreError(Exception, Generic[CodeT]):
    """The API answered with an error: its body (an ``Error``, or a problem's details), and what its
    headers said.

    ``code`` is one of the codes the contract lists for the operation (a ``Literal`` union:
    ``is_petstore_error(error, "get_pet")`` narrows it, and a type checker refuses a comparison
    with a misspelt code), or ``"unknown"`` for a code a later version added; ``raw_code`` holds
    the code as sent.
    """

    def __init__(
        self,
        *,
        operation: str,
        status: int,
        code: CodeT | UnknownCode,
        raw_code: str,
        message: str,
        request_id: str | None,
        retry_after: float | None,
        etag: str | None,
        type: str | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__(f"{operation}: {status} {raw_code or '(no code)'}: {message}")
        #: The operation called, by its method's name (``get_pet``).
        self.operation = operation
        self.status = status
        self.code: CodeT | UnknownCode = code
        #: The code the answer carried, as sent (``""`` when it carried none).
        self.raw_code = raw_code
        #: The answer's own words: an ``Error``'s ``message``, a problem's ``detail``.
        self.message = message
        #: A problem's type URI, for a version whose errors are problem details (RFC 9457); None otherwise.
        self.type = type
        #: A problem's title, the same for every problem of its type; None where errors are not problems.
        self.title = title
        #: The answer's ``X-Request-Id``: quote it when asking about the call.
        self.request_id = request_id
        #: Seconds to wait before retrying (``Retry-After``), when the answer said.
        self.retry_after = retry_after
        #: On a ``412``, the resource's current ``ETag``, when the answer carries it.
        self.etag = etag


def reported_code(code: str, listed: Collection[str]) -> str:
    """``code`` when the operation lists it; ``"unknown"`` otherwise."""
    return code if code in listed else "unknown"


class PetstoreNetworkError(Exception):
    """No answer came: the connection failed, was cut, or an attempt outlasted its timeout.

    ``__cause__`` is the ``httpx`` error that says why.
    """

    def __init__(self, operation: str, cause: BaseException) -> None:
        super().__init__(f"{operation}: no answer: {cause!r}")
        self.operation = operation
