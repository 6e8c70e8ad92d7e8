"""The media CDN: owners' `media_collection` URLs point at the simulator, which draws the thumbnails."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from dashboard.simulator.server import RunningSimulator, serve_in_thread
from tests.simulator.conftest import KEY, make_config

BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"


def collections(http: httpx.Client, **params: object) -> list[dict[str, Any]]:
    body = http.get(f"/api/v2/nft/{BAYC}/owners", params={"media_items": "true", **params}).json()
    return [o["media"]["media_collection"] for o in body["result"] if o["media"]["media_collection"]]


def test_media_urls_point_at_the_simulator_and_load_without_a_key(
    sim: RunningSimulator, http: httpx.Client
) -> None:
    found = collections(http, limit=30)
    assert found
    for collection in found:
        assert {size: (c["width"], c["height"]) for size, c in collection.items()} == {
            "low": (100, 100),
            "medium": (250, 250),
            "high": (500, 500),
        }
        for size, c in collection.items():
            assert re.fullmatch(rf"{re.escape(sim.base_url)}/media/[0-9a-f]{{32}}/{size}\.svg", c["url"])
    for c in found[0].values():
        response = httpx.get(c["url"])  # no X-API-Key: it is a CDN
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/svg+xml"
        assert "max-age=" in response.headers["cache-control"]
        assert response.text.startswith("<svg ") and f'width="{c["width"]}"' in response.text


def test_the_picture_is_the_same_every_time_and_differs_between_tokens(http: httpx.Client) -> None:
    found = collections(http, limit=30)
    first = [http.get(c["low"]["url"]).content for c in found[:5]]
    again = [http.get(c["low"]["url"]).content for c in found[:5]]
    assert first == again
    assert len(set(first)) == 5
    # Another simulator with the same seed draws the same picture.
    with serve_in_thread(make_config()) as other:
        url = found[0]["low"]["url"]
        path = url[url.index("/media/") :]
        with httpx.Client(base_url=other.base_url, headers={"X-API-Key": KEY}) as client:
            collections(client, limit=30)
            assert client.get(path).content == first[0]


def test_the_picture_is_labelled_with_the_token_id(http: httpx.Client) -> None:
    body = http.get(f"/api/v2/nft/{BAYC}/owners", params={"media_items": "true", "limit": 30}).json()
    owner = next(o for o in body["result"] if o["media"]["media_collection"])
    svg = http.get(owner["media"]["media_collection"]["medium"]["url"]).text
    assert f">#{owner['token_id']}</text>" in svg


def test_the_host_the_request_came_in_on_is_used(sim: RunningSimulator, http: httpx.Client) -> None:
    port = sim.base_url.rsplit(":", 1)[1]
    found = collections(http, limit=30)
    assert found
    with httpx.Client(base_url=f"http://localhost:{port}", headers={"X-API-Key": KEY}) as local:
        try:
            via_localhost = collections(local, limit=30)
        except httpx.ConnectError:
            pytest.skip("localhost does not reach 127.0.0.1 here")
    assert via_localhost[0]["low"]["url"].startswith(f"http://localhost:{port}/media/")
    # A Host header that is not a host name is not echoed into URLs.
    hostile = http.get(
        f"/api/v2/nft/{BAYC}/owners",
        params={"media_items": "true", "limit": 30},
        headers={"Host": 'evil"><script>'},
    ).json()
    urls = [
        o["media"]["media_collection"]["low"]["url"]
        for o in hostile["result"]
        if o["media"]["media_collection"]
    ]
    assert urls and all(u.startswith(f"{sim.base_url}/media/") for u in urls)


def test_a_configured_public_url_is_used() -> None:
    with serve_in_thread(make_config(public_url="https://sim.example.test/")) as running:
        with httpx.Client(base_url=running.base_url, headers={"X-API-Key": KEY}) as client:
            found = collections(client, limit=30)
    assert found[0]["high"]["url"].startswith("https://sim.example.test/media/")


def test_unknown_paths_sizes_and_tokens_are_404(http: httpx.Client) -> None:
    url = collections(http, limit=30)[0]["low"]["url"]
    path = url[url.index("/media/") :]
    token_path = path.rsplit("/", 1)[0]
    for bad in (
        f"{token_path}/huge.svg",
        f"{token_path}/low.png",
        f"{token_path}/low",
        token_path,
        "/media/",
        "/media/" + "0" * 32 + "/low.svg",  # well-formed, but no such token
        "/media/not-a-hash/low.svg",
        path + "/extra",
    ):
        response = httpx.get(http.base_url.join(bad))
        assert response.status_code == 404, bad
        assert response.headers["content-type"].startswith("application/json")
    assert http.head(path).status_code == 200
    assert http.post(path).status_code == 405


def test_a_token_without_ready_media_has_no_picture(http: httpx.Client) -> None:
    body = http.get(f"/api/v2/nft/{BAYC}/owners", params={"media_items": "true", "limit": 100}).json()
    missing = next(o for o in body["result"] if o["media"]["media_collection"] is None)
    assert http.get(f"/media/{missing['token_hash']}/low.svg").status_code == 404


def test_the_fault_knobs_leave_the_media_alone(sim: RunningSimulator, http: httpx.Client) -> None:
    url = collections(http, limit=30)[0]["low"]["url"]
    sim.world.faults.rate_5xx = 1.0
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.truncate_rate = 1.0
    assert http.get(f"/api/v2/nft/{BAYC}/owners").status_code in (429, 500, 502, 503, 504)
    response = httpx.get(url)
    assert response.status_code == 200 and response.text.endswith("</svg>")
