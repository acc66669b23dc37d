"""What every version's clients share beside their methods: the helpers that work across them. Each
version's ``Petstore`` and ``AsyncPetstore`` (generated, ``_generated/v<major>/methods.py``) are
these with one method per operation of its contract."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from ._errors import PetstoreError
from ._base import AsyncBase, SyncBase

W = TypeVar("W")


class Versioned(Protocol):
    """A read that may carry an ``ETag``: a result, or a page."""

    @property
    def etag(self) -> str | None: ...


R = TypeVar("R", bound=Versioned)


def _etag_of(current: Versioned) -> str:
    if current.etag is None:
        raise TypeError("modify: the read answered no ETag to send as if_match")
    return current.etag


def _changed(error: Exception) -> bool:
    return isinstance(error, PetstoreError) and error.status == 412


class SyncClient(SyncBase):
    """A client of the Pet Store API: ``Petstore(base_url, api_key)``, one method per operation.

    ``base_url`` includes the version path (``http://127.0.0.1:3000/v2``; ``/v1`` for ``petstore.v1``); ``api_key`` is sent as
    ``Authorization: Bearer``. ``attempts`` (default 4, the first included), ``backoff`` (the
    first wait, in seconds, when an answer names none: doubled each retry, with full jitter),
    ``max_delay`` (the longest wait, 60 s), ``timeout`` (one attempt's limit, 30 s);
    ``http_client`` an ``httpx.Client`` of your own (its ``event_hooks`` see every request and
    response); ``on_retry`` called with each ``Retry`` before it waits.
    """

    def modify(self, read: Callable[[], R], write: Callable[[R, str], W], *, attempts: int | None = None) -> W:
        """Read, change, write: ``write`` gets the read and its ``ETag`` to send as ``if_match``;
        when the write finds the resource changed since (``412``), reads and writes again."""
        limit = attempts if attempts is not None else self._settings.attempts
        for attempt in range(1, limit + 1):
            current = read()
            try:
                return write(current, _etag_of(current))
            except PetstoreError as error:
                if not _changed(error) or attempt >= limit:
                    raise
        raise AssertionError("unreachable")


class AsyncClient(AsyncBase):
    """The async client: the same methods as ``Petstore``, each awaited (a list that pages returns
    a pager: ``await`` it for the first page, ``async for`` over it for every item)."""

    async def modify(
        self,
        read: Callable[[], Awaitable[R]],
        write: Callable[[R, str], Awaitable[W]],
        *,
        attempts: int | None = None,
    ) -> W:
        """As ``Petstore.modify``, awaiting ``read`` and ``write``."""
        limit = attempts if attempts is not None else self._settings.attempts
        for attempt in range(1, limit + 1):
            current = await read()
            try:
                return await write(current, _etag_of(current))
            except PetstoreError as error:
                if not _changed(error) or attempt >= limit:
                    raise
        raise AssertionError("unreachable")
