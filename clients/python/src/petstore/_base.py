"""What every call shares, sync and async: sending as the contract says, retrying when that is
safe, reading answers into results and errors, paging. No code here is per operation: the
generated methods (``_generated/v<major>/methods.py``) describe each call and hand it here."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypedDict, TypeVar

import httpx
from pydantic import BaseModel

from ._errors import PetstoreError, PetstoreNetworkError, reported_code
from ._http import next_link, query_string, retry_after_seconds

T = TypeVar("T")
E = TypeVar("E", str, "str | None")


class NotGiven:
    """The value of a parameter left out: nothing is sent for it (``None`` would be a value)."""

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()


@dataclass(frozen=True)
class Operation:
    """What the client must know to send an operation and send it again (generated per operation)."""

    name: str
    method: str
    path: str
    #: Every code its Error bodies may carry (``x-error-codes``).
    error_codes: frozenset[str]
    request_media_type: str | None = None
    #: Each array query parameter, and whether it is exploded (``id=1&id=2``) or not (``id=1,2``).
    arrays: Mapping[str, bool] = field(default_factory=dict)
    #: Safe to send again when no answer came: idempotent by its method, or a create taking an Idempotency-Key.
    safe_to_resend: bool = False
    #: It takes an ``Idempotency-Key``: one is made per call and reused by its retries.
    idempotency_key: bool = False
    #: A list that pages: the query parameter holding the next page's position.
    cursor: str | None = None
    #: A list answering an envelope: the property of its items (its next cursor's is ``envelope_next``);
    #: None for a list answering an array, whose next page is its ``Link: rel="next"``.
    envelope_items: str | None = None
    envelope_next: str | None = None
    #: Its errors are problem details (RFC 9457, ``application/problem+json``): their words are ``detail``.
    problem: bool = False


class RequestOptions(TypedDict, total=False):
    """What may change per call."""

    #: Attempts, the first included.
    attempts: int
    #: How long one attempt may take, in seconds.
    timeout: float


@dataclass(frozen=True)
class Retry:
    """A retry about to be made: why, and how long it waits first."""

    operation: str
    #: The attempt that failed (1 for the first).
    attempt: int
    delay: float
    failure: PetstoreError[str] | PetstoreNetworkError


@dataclass(frozen=True)
class Settings:
    attempts: int = 4
    backoff: float = 0.25
    max_delay: float = 60.0
    timeout: float = 30.0


@dataclass(frozen=True)
class Result(Generic[T, E]):
    """An answer that succeeded. ``E`` is ``str`` where the contract says every success carries an
    ``ETag``, ``str | None`` where only some do."""

    data: T
    status: int
    #: Its ``ETag``, to send back as ``if_match``.
    etag: E
    #: True when it replays the answer to an earlier request with the same ``Idempotency-Key``.
    replayed: bool
    #: Its ``X-Request-Id``, to quote when asking about it.
    request_id: str | None
    headers: httpx.Headers


@dataclass(frozen=True)
class Call:
    """One call, as a generated method describes it."""

    operation: Operation
    path: Mapping[str, object]
    query: Mapping[str, object]
    headers: Mapping[str, object]
    body: BaseModel | None
    options: RequestOptions | None


def _given(values: Mapping[str, object], call: Operation) -> dict[str, object]:
    """The parameters given: those left out dropped; one given as None refused before sending."""
    given = {name: value for name, value in values.items() if not isinstance(value, NotGiven)}
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise TypeError(
            f"{call.name}: {', '.join(missing)} is None; give it a value or leave it out "
            "(a precondition left out would make a conditional write unconditional)"
        )
    return given


def _delay_before(
    attempt: int, operation: Operation, failure: PetstoreError[str] | PetstoreNetworkError, settings: Settings
) -> float | None:
    """How long to wait before trying again after ``failure``; None when it must not be retried."""
    status = failure.status if isinstance(failure, PetstoreError) else None
    # 429 and 503 say the request was not served; other 5xx and no answer leave it unknown.
    retryable = status in (429, 503) or ((status is None or status >= 500) and operation.safe_to_resend)
    if not retryable:
        return None
    asked = failure.retry_after if isinstance(failure, PetstoreError) else None
    backoff = random.random() * settings.backoff * 2 ** (attempt - 1)
    return min(backoff if asked is None else asked, settings.max_delay)


def _error_of(operation: Operation, response: httpx.Response) -> PetstoreError[str]:
    try:
        body = response.json()
    except ValueError:
        body = None
    fields: Mapping[str, object] = body if isinstance(body, dict) else {}


    def text(name: str) -> str | None:
        value = fields.get(name)
        return value if isinstance(value, str) else None

    raw_code = text("code") or ""
    # Read as the operation's contract says its errors are: problem details, or an Error.
    message = text("detail" if operation.problem else "message")
    return PetstoreError(
        operation=operation.name,
        status=response.status_code,
        code=reported_code(raw_code, operation.error_codes),
        raw_code=raw_code,
        message=message if message is not None else response.reason_phrase,
        request_id=response.headers.get("x-request-id"),
        retry_after=retry_after_seconds(response.headers.get("retry-after")),
        etag=response.headers.get("etag"),
        type=text("type") if operation.problem else None,
        title=text("title") if operation.problem else None,
    )


def _result(response: httpx.Response, parse: Callable[[Any], T]) -> Result[T, str | None]:
    data = parse(response.json() if response.content else None)
    return Result(
        data=data,
        status=response.status_code,
        etag=response.headers.get("etag"),
        replayed=response.headers.get("idempotent-replayed") == "true",
        request_id=response.headers.get("x-request-id"),
        headers=response.headers,
    )


def with_etag(result: Result[T, str | None]) -> Result[T, str]:
    """A result of an operation whose every success carries an ``ETag``, typed so."""
    if result.etag is None:
        raise TypeError("the answer carried no ETag, which the contract says it always does")
    return Result(result.data, result.status, result.etag, result.replayed, result.request_id, result.headers)


class _Transport:
    """What the sync and async clients share: the settings, and building each request."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        attempts: int,
        backoff: float,
        max_delay: float,
        timeout: float,
        on_retry: Callable[[Retry], object] | None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._settings = Settings(attempts=attempts, backoff=backoff, max_delay=max_delay, timeout=timeout)
        self._on_retry = on_retry

    def _prepare(self, call: Call) -> tuple[httpx.Request, int, float]:
        operation = call.operation
        headers = {name: str(value) for name, value in _given(call.headers, operation).items()}
        if operation.idempotency_key and not any(name.lower() == "idempotency-key" for name in headers):
            # One key for the call, so that its retries are answered with what the first attempt did.
            headers["Idempotency-Key"] = str(uuid.uuid4())
        headers["Authorization"] = f"Bearer {self._api_key}"
        path = operation.path
        for name, value in _given(call.path, operation).items():
            path = path.replace(f"{{{name}}}", httpx.URL(str(value)).raw_path.decode("ascii").replace("/", "%2F"))
        query = query_string(_given(call.query, operation), operation.arrays)
        content: bytes | None = None
        if call.body is not None and operation.request_media_type is not None:
            # Only the fields set are sent: a merge patch changes what it names, and nothing else.
            content = call.body.model_dump_json(exclude_unset=True, by_alias=True).encode()
            headers["Content-Type"] = operation.request_media_type
        url = f"{self._base_url}{path}{'?' + query if query else ''}"
        request = httpx.Request(operation.method, url, headers=headers, content=content)
        options = call.options or {}
        return request, options.get("attempts", self._settings.attempts), options.get("timeout", self._settings.timeout)

    def _failure_of(self, call: Call, response: httpx.Response) -> PetstoreError[str]:
        return _error_of(call.operation, response)

    def _retry(self, call: Call, attempt: int, attempts: int, failure: PetstoreError[str] | PetstoreNetworkError) -> float:
        """The wait before the next attempt; raises ``failure`` when there is none."""
        delay = _delay_before(attempt, call.operation, failure, self._settings) if attempt < attempts else None
        if delay is None:
            raise failure
        if self._on_retry is not None:
            self._on_retry(Retry(call.operation.name, attempt, delay, failure))
        return delay


def _timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds)


class SyncBase(_Transport):
    """The sync client's sending; its methods are generated (``_generated/v<major>/methods.py``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        attempts: int = 4,
        backoff: float = 0.25,
        max_delay: float = 60.0,
        timeout: float = 30.0,
        http_client: httpx.Client | None = None,
        on_retry: Callable[[Retry], object] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            attempts=attempts,
            backoff=backoff,
            max_delay=max_delay,
            timeout=timeout,
            on_retry=on_retry,
        )
        self._http = http_client if http_client is not None else httpx.Client()

    def close(self) -> None:
        self._http.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, call: Call, parse: Callable[[Any], T]) -> Result[T, str | None]:
        request, attempts, timeout = self._prepare(call)
        for attempt in range(1, attempts + 1):
            failure: PetstoreError[str] | PetstoreNetworkError
            try:
                request.extensions["timeout"] = _timeout(timeout).as_dict()
                response = self._http.send(request)
                response.read()
            except httpx.TransportError as error:
                failure = PetstoreNetworkError(call.operation.name, error)
                failure.__cause__ = error
            else:
                if response.is_success:
                    return _result(response, parse)
                failure = self._failure_of(call, response)
            time.sleep(self._retry(call, attempt, attempts, failure))
        raise AssertionError("unreachable")

    def _page(self, call: Call, parse: Callable[[Any], list[T]]) -> Page[T]:
        items, next_cursor = _paged(call, self._send(call, _raw), parse, self._base_url)
        return Page(items, next_cursor, lambda cursor: self._page(_at(call, cursor), parse))


class AsyncBase(_Transport):
    """The async client's sending; its methods are generated (``_generated/v<major>/methods.py``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        attempts: int = 4,
        backoff: float = 0.25,
        max_delay: float = 60.0,
        timeout: float = 30.0,
        http_client: httpx.AsyncClient | None = None,
        on_retry: Callable[[Retry], object] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            attempts=attempts,
            backoff=backoff,
            max_delay=max_delay,
            timeout=timeout,
            on_retry=on_retry,
        )
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(self, call: Call, parse: Callable[[Any], T]) -> Result[T, str | None]:
        request, attempts, timeout = self._prepare(call)
        for attempt in range(1, attempts + 1):
            failure: PetstoreError[str] | PetstoreNetworkError
            try:
                request.extensions["timeout"] = _timeout(timeout).as_dict()
                response = await self._http.send(request)
                await response.aread()
            except httpx.TransportError as error:
                failure = PetstoreNetworkError(call.operation.name, error)
                failure.__cause__ = error
            else:
                if response.is_success:
                    return _result(response, parse)
                failure = self._failure_of(call, response)
            await asyncio.sleep(self._retry(call, attempt, attempts, failure))
        raise AssertionError("unreachable")

    def _pager(self, call: Call, parse: Callable[[Any], list[T]]) -> AsyncPager[T]:
        async def first() -> AsyncPage[T]:
            items, next_cursor = _paged(call, await self._send(call, _raw), parse, self._base_url)
            return AsyncPage(items, next_cursor, lambda cursor: self._pager(_at(call, cursor), parse).first())

        return AsyncPager(first)


def _raw(body: Any) -> Any:
    return body


def _paged(
    call: Call, result: Result[Any, str | None], parse: Callable[[Any], list[T]], base_url: str
) -> tuple[Result[list[T], str | None], str | None]:
    """A page's items, parsed, and the next page's cursor (None on the last), as the operation's
    contract pages it: from its envelope, or from its array and ``Link: rel="next"``."""
    operation = call.operation
    if operation.envelope_items is not None and operation.envelope_next is not None:
        body: Mapping[str, Any] = result.data if isinstance(result.data, dict) else {}
        cursor = body.get(operation.envelope_next)
        return replace(result, data=parse(body.get(operation.envelope_items))), cursor if isinstance(
            cursor, str
        ) else None
    return replace(result, data=parse(result.data)), _link_cursor(call, result, base_url)


def _link_cursor(call: Call, result: Result[Any, str | None], base_url: str) -> str | None:
    link = next_link(result.headers.get("link"))
    if link is None or call.operation.cursor is None:
        return None
    values = httpx.URL(base_url).join(link).params.get_list(call.operation.cursor)
    return values[0] if values else None


def _at(call: Call, cursor: str) -> Call:
    """The same call, at the page ``cursor`` names (its filters kept)."""
    assert call.operation.cursor is not None
    return replace(call, query={**call.query, call.operation.cursor: cursor})


class Page(Generic[T]):
    """One page of a list: its ``items``, the cursor of the next (``next_cursor``, None on the
    last), and what every result has. Iterating it yields every item of this page and the pages
    after it, fetching each as it is reached."""

    def __init__(self, result: Result[list[T], str | None], next_cursor: str | None, fetch: Callable[[str], Page[T]]):
        self.items: list[T] = result.data
        self.data: list[T] = result.data
        self.status = result.status
        #: Present only where the contract says (a ``list_pets`` page holding exactly one animal).
        self.etag: str | None = result.etag
        self.replayed = result.replayed
        self.request_id = result.request_id
        self.headers = result.headers
        self.next_cursor = next_cursor
        self._fetch = fetch

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def next_page(self) -> Page[T] | None:
        """The following page, or None on the last."""
        return None if self.next_cursor is None else self._fetch(self.next_cursor)

    def iter_pages(self) -> Iterator[Page[T]]:
        page: Page[T] | None = self
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[T]:
        for page in self.iter_pages():
            yield from page.items


class AsyncPage(Generic[T]):
    """One page of a list, of the async client: as ``Page``, ``async for`` yields every item of
    this page and the pages after it."""

    def __init__(
        self,
        result: Result[list[T], str | None],
        next_cursor: str | None,
        fetch: Callable[[str], Awaitable[AsyncPage[T]]],
    ):
        self.items: list[T] = result.data
        self.data: list[T] = result.data
        self.status = result.status
        self.etag: str | None = result.etag
        self.replayed = result.replayed
        self.request_id = result.request_id
        self.headers = result.headers
        self.next_cursor = next_cursor
        self._fetch = fetch

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    async def next_page(self) -> AsyncPage[T] | None:
        return None if self.next_cursor is None else await self._fetch(self.next_cursor)

    async def iter_pages(self) -> AsyncIterator[AsyncPage[T]]:
        page: AsyncPage[T] | None = self
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.iter_pages():
            for item in page.items:
                yield item


class AsyncPager(Generic[T]):
    """What an async list method returns: ``await`` it for the first page, or ``async for`` over
    it for every item of every page."""

    def __init__(self, first: Callable[[], Awaitable[AsyncPage[T]]]):
        self.first = first

    def __await__(self) -> Generator[Any, None, AsyncPage[T]]:
        return self.first().__await__()

    async def __aiter__(self) -> AsyncIterator[T]:
        page = await self.first()
        async for item in page:
            yield item
