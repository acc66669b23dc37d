"""The client of version 1 of the Pet Store API, generated from its last release
(``contracts/v1.2.0.yaml``): the names ``petstore`` has, for the ``/v1`` base path. Moving to
version 2 is importing ``petstore`` instead (docs/client-python.md, "Versions")."""

from .._generated.v1 import *  # noqa: F403
from .._generated.v1 import __all__ as __all__
