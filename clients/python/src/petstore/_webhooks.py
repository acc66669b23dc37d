"""Standard Webhooks deliveries, verified and typed (https://www.standardwebhooks.com)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

#: Which check a delivery failed, in the order they are made (see ``unwrap``).
WebhookCheck = Literal["size", "timestamp", "secret", "signature", "payload"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_TOLERANCE_SECONDS = 300
_SECRET_PREFIX = "whsec_"


class ReceivedEvent(BaseModel):
    """What every event ``unwrap`` returns has: its ``id``."""

    id: str = Field(default="", exclude=True)
    """The delivery's ``webhook-id``: the same on every attempt to deliver it, so deduplicate by it."""


EventT = TypeVar("EventT", bound=ReceivedEvent)


class PetstoreWebhookError(Exception):
    """The delivery is not one to act on; ``check`` says why. The only error ``unwrap`` raises."""

    def __init__(self, check: WebhookCheck, message: str) -> None:
        super().__init__(message)
        self.check: WebhookCheck = check


def _key_of(secret: object, index: int) -> bytes:
    error = PetstoreWebhookError("secret", f"secret {index + 1} is not a whsec_ base64 key")
    if not isinstance(secret, str):
        raise error
    try:
        key = base64.b64decode(secret.removeprefix(_SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise error from None
    if not key:
        raise error
    return key


def _signatures(header: str) -> list[bytes]:
    passed: list[bytes] = []
    for entry in header.split(" "):
        version, _, signature = entry.partition(",")
        if version != "v1" or not signature:
            continue
        try:
            passed.append(base64.b64decode(signature, validate=True))
        except (binascii.Error, ValueError):
            continue
    return passed


def verified(
    events: TypeAdapter[EventT],
    body: bytes | str,
    headers: Mapping[str, str],
    secrets: Sequence[str],
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: Callable[[], float] = time.time,
) -> EventT:
    """A delivery, verified and typed by ``events`` (a version's); raises ``PetstoreWebhookError`` for anything else.

    Checks, in this order: the body's size against ``max_body_bytes`` (default 1 MiB; before any
    signature is computed: ``size``); ``webhook-timestamp`` within ``tolerance_seconds`` of now
    (``timestamp``); each secret a ``whsec_`` base64 key (``secret``); a ``v1`` signature of
    ``webhook-signature`` matching one of ``secrets`` (the new and the previous one during a
    rotation), compared in constant time, over the body's exact bytes (``signature``); then the
    payload, UTF-8 JSON (a leading byte order mark allowed) of an event the contract declares
    (``payload``). Pass the body exactly as received: its bytes, or the string they decode to.

    Returns the event, one of the version's ``Event`` union, narrowed by its ``type``, with its ``id``
    (``webhook-id``: the same on every attempt to deliver it, so deduplicate by it).
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str)):
        raise PetstoreWebhookError("payload", "the body is neither bytes nor a string")
    if len(body) > max_body_bytes:
        raise PetstoreWebhookError("size", f"the body is over {max_body_bytes} bytes")
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    if len(raw) > max_body_bytes:
        raise PetstoreWebhookError("size", f"the body is over {max_body_bytes} bytes")

    flat = {str(name).lower(): str(value) for name, value in headers.items()} if isinstance(headers, Mapping) else {}
    timestamp = flat.get("webhook-timestamp", "")
    if not timestamp.isascii() or not timestamp.isdigit():
        raise PetstoreWebhookError("timestamp", "webhook-timestamp is missing or not a number of seconds")
    if abs(now() - int(timestamp)) > tolerance_seconds:
        raise PetstoreWebhookError("timestamp", f"webhook-timestamp is more than {tolerance_seconds} s from now")

    keys = [_key_of(secret, index) for index, secret in enumerate(secrets)]
    webhook_id = flat.get("webhook-id")
    signature = flat.get("webhook-signature")
    if webhook_id is None or signature is None:
        raise PetstoreWebhookError("signature", "webhook-id or webhook-signature is missing")
    content = f"{webhook_id}.{timestamp}.".encode() + raw
    expected = [hmac.new(key, content, hashlib.sha256).digest() for key in keys]
    passed = _signatures(signature)
    if not any(hmac.compare_digest(mac, given) for mac in expected for given in passed):
        raise PetstoreWebhookError("signature", "the webhook signature matches none of the secrets")

    try:
        payload = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        raise PetstoreWebhookError("payload", "the body is not UTF-8 JSON") from None
    if not isinstance(payload, dict) or "id" in payload:
        raise PetstoreWebhookError("payload", "the body is not an event the contract declares")
    try:
        event = events.validate_python(payload)
    except ValidationError as error:
        raise PetstoreWebhookError("payload", f"the payload is not the contract's: {error}") from None
    event.id = webhook_id
    return event
