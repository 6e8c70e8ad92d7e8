"""The media CDN: generated thumbnails behind the owners' `media_collection` URLs.

The provider's media URLs point at its CDN; the simulator's point at itself, so the demo shows real
pictures with no internet. Each picture is a small SVG drawn from the token hash alone (the same token
always gets the same picture) and labelled with the token id. Like a CDN it needs no API key, and the
fault knobs (which are about the API) leave it alone.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from dashboard.simulator.responses import Response

SIZES = {"low": 100, "medium": 250, "high": 500}
PREFIX = "/media/"
PATH = re.compile(r"^/media/([0-9a-f]{32})/(low|medium|high)\.svg\Z")
CONTENT_TYPE = "image/svg+xml"
CACHE_CONTROL = "public, max-age=86400, immutable"


def collection(base_url: str, token_hash: str) -> dict[str, Any]:
    """`media_collection` in the contract's shape, with URLs on this simulator."""
    base = f"{base_url.rstrip('/')}/media/{token_hash}"
    return {size: {"width": px, "height": px, "url": f"{base}/{size}.svg"} for size, px in SIZES.items()}


def answer(token_hash: str, size: str, token_id: int) -> Response:
    return Response(
        200,
        picture(token_hash, token_id, SIZES[size]),
        {
            "Content-Type": CONTENT_TYPE,
            "Cache-Control": CACHE_CONTROL,
            "X-Content-Type-Options": "nosniff",
        },
    )


def _label(token_id: int) -> str:
    text = str(token_id)
    # 256-bit ids (domain-name collections) would not fit: keep both ends.
    return f"#{text}" if len(text) <= 9 else f"#{text[:4]}…{text[-4:]}"


def picture(token_hash: str, token_id: int, px: int) -> bytes:
    """An SVG of `px` × `px`: a two-colour gradient, a few translucent shapes and the token id."""
    b = hashlib.sha256(token_hash.encode()).digest()
    hue = b[0] * 360 // 256
    hue2 = (hue + 40 + b[1] % 100) % 360
    shapes = []
    for i in range(4):
        x, y, r = 10 + b[2 + 3 * i] % 80, 8 + b[3 + 3 * i] % 60, 8 + b[4 + 3 * i] % 22
        fill = f"hsla({(hue + 180 + 30 * i) % 360},80%,75%,0.55)"
        if b[14 + i] % 3 == 0:
            shapes.append(
                f'<rect x="{x - r}" y="{y - r}" width="{2 * r}" height="{2 * r}" rx="4" '
                f'transform="rotate({b[18 + i] % 90} {x} {y})" fill="{fill}"/>'
            )
        else:
            shapes.append(f'<circle cx="{x}" cy="{y}" r="{r}" fill="{fill}"/>')
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{px}" height="{px}" viewBox="0 0 100 100">'
        '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">'
        f'<stop offset="0" stop-color="hsl({hue},65%,55%)"/>'
        f'<stop offset="1" stop-color="hsl({hue2},60%,35%)"/>'
        "</linearGradient></defs>"
        '<rect width="100" height="100" fill="url(#g)"/>'
        + "".join(shapes)
        + '<rect x="8" y="76" width="84" height="17" rx="8.5" fill="rgba(0,0,0,0.45)"/>'
        '<text x="50" y="88.5" font-family="sans-serif" font-size="11" font-weight="bold" '
        f'fill="#fff" text-anchor="middle">{_label(token_id)}</text></svg>'
    )
    return svg.encode()
