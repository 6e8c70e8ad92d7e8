"""The address of the client a request came from: for login throttling and the metrics allow-list.

With no proxy in front (`PROXY_COUNT=0`) it is the connection's own address. Behind proxies that each
append the address they were connected from to `X-Forwarded-For` (nginx's
`$proxy_add_x_forwarded_for`, most load balancers), the client is the entry `PROXY_COUNT` places from
the right: what lies further left was sent by the client itself and may be forged. Imports no app.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = str(request.META.get("REMOTE_ADDR") or "")
    count = settings.PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    forwarded = [part for part in forwarded if part]
    # The last proxy's own connection is REMOTE_ADDR; it appended the address of the hop before it.
    if len(forwarded) < count:
        return remote
    return forwarded[-count]
