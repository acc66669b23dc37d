"""A typed client of the Pet Store API, generated from its contract (``openapi.yaml``).

``Petstore`` (sync) and ``AsyncPetstore`` (async): one method per operation, named by its
``operationId`` in snake_case; pages that iterate every item; retries that are safe by the
contract; ETags and ``modify``; typed error codes; verified, typed webhooks (``unwrap``).
"""

from ._base import NOT_GIVEN, AsyncPage, AsyncPager, NotGiven, Page, RequestOptions, Result, Retry
from ._client import AsyncPetstore, Petstore
from ._errors import PetstoreError, PetstoreNetworkError, UnknownCode
from ._generated.models import *  # noqa: F403
from ._generated.models import Event, ReceivedEvent
from ._generated.operations import TRANSITIONS, can_move, is_petstore_error
from ._webhooks import PetstoreWebhookError, WebhookCheck, unwrap

__all__ = [
    "NOT_GIVEN",
    "TRANSITIONS",
    "AsyncPage",
    "AsyncPager",
    "AsyncPetstore",
    "Event",
    "NotGiven",
    "Page",
    "Petstore",
    "PetstoreError",
    "PetstoreNetworkError",
    "PetstoreWebhookError",
    "ReceivedEvent",
    "RequestOptions",
    "Result",
    "Retry",
    "UnknownCode",
    "WebhookCheck",
    "can_move",
    "is_petstore_error",
    "unwrap",
]
