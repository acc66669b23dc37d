"""A typed client of the Pet Store API, version 2, generated from its contract (``openapi.yaml``).

``Petstore`` (sync) and ``AsyncPetstore`` (async): one method per operation, named by its
``operationId`` in snake_case; pages that iterate every item; retries that are safe by the
contract; ETags and ``modify``; typed error codes; verified, typed webhooks (``unwrap``).
Version 1 of the API has its own client, ``petstore.v1``, with the same names.
"""

from ._generated.v2 import *  # noqa: F403
from ._generated.v2 import __all__ as __all__
