"""Which streams each team owns, and so which a user sees: the claims of `accounts.Team` (stream ids, tag
patterns, DEFAULT_TEAM for the rest) matched against the stream rows. The one place that answers "whose is
this stream" — for what a viewer sees (`visibility_for`, put in place for each request by
`VisibilityMiddleware`) and for where an incident's messages go (`teams_of_stream`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from dashboard.accounts.access import is_staff_member
from dashboard.accounts.models import Team
from dashboard.accounts.roles import VIEW_ALL_STREAMS, VIEW_DASHBOARD
from dashboard.deliveries.models import Stream
from dashboard.visibility import EVERYTHING, NOTHING, Visibility, viewing


@dataclass(frozen=True)
class StreamRow:
    stream_id: str
    tag: str
    urls: frozenset[str]


def _stream_rows() -> list[StreamRow]:
    with viewing(EVERYTHING):
        rows = Stream.objects.values_list("stream_id", "tag", "webhook_urls", "provider_webhook_url")
        found: dict[str, StreamRow] = {}
        for stream_id, tag, urls, provider_url in rows:
            previous = found.get(stream_id)
            all_urls = frozenset(u for u in [*(urls or []), provider_url] if u)
            if previous is not None:
                all_urls |= previous.urls
            found[stream_id] = StreamRow(stream_id, tag, all_urls)
    return list(found.values())


def claims(team: Team, stream: StreamRow) -> bool:
    """Whether the team claims the stream itself, by id or by a pattern on its tag."""
    return stream.stream_id in team.stream_ids or any(
        fnmatchcase(stream.tag, pattern) for pattern in team.tag_patterns if pattern
    )


def owned_streams(teams: Iterable[Team]) -> dict[int, list[StreamRow]]:
    """Each team's streams (by team id): those it claims, and for the DEFAULT_TEAM those no team claims."""
    wanted = list(teams)
    if not wanted:
        return {}
    streams = _stream_rows()
    known = {s.stream_id for s in streams}
    owned: dict[int, list[StreamRow]] = {}
    default_wanted = any(team.name == settings.DEFAULT_TEAM for team in wanted)
    unclaimed: list[StreamRow] = []
    if default_wanted:
        every_team = list(Team.objects.all())
        unclaimed = [s for s in streams if not any(claims(team, s) for team in every_team)]
    for team in wanted:
        mine = [s for s in streams if claims(team, s)]
        # A stream id claimed before any delivery of it was stored: seen (empty) until its rows come.
        mine += [StreamRow(sid, "", frozenset()) for sid in team.stream_ids if sid and sid not in known]
        if team.name == settings.DEFAULT_TEAM:
            mine += unclaimed
        owned[team.pk] = mine
    return owned


def visibility_of_streams(streams: Iterable[StreamRow]) -> Visibility:
    rows = list(streams)
    return Visibility(
        frozenset(s.stream_id for s in rows),
        tags=frozenset(s.tag for s in rows),
        urls=frozenset(u for s in rows for u in s.urls),
    )


def sees_every_stream(user: Any) -> bool:
    """Staff (who run the admin, where every stream is) and the roles granted "view all streams" (Viewers)."""
    return is_staff_member(user) or bool(user.is_authenticated and user.is_active and user.has_perm(VIEW_ALL_STREAMS))


def visibility_for(user: Any) -> Visibility:
    """What `user` sees: every stream (staff, Viewers), their teams' streams (Team members), nothing (anonymous,
    no role, inactive)."""
    if not (user.is_authenticated and user.is_active and user.has_perm(VIEW_DASHBOARD)):
        return NOTHING
    if sees_every_stream(user):
        return EVERYTHING
    teams = list(Team.objects.filter(memberships__user=user))
    owned = owned_streams(teams)
    return visibility_of_streams(s for rows in owned.values() for s in rows)


def teams_of_stream(stream_id: str) -> list[Team]:
    """The teams that own the stream (several may claim it); the DEFAULT_TEAM when none does."""
    teams = list(Team.objects.all())
    owned = owned_streams(teams)
    return [team for team in teams if any(s.stream_id == stream_id for s in owned[team.pk])]


class VisibilityMiddleware:
    """Puts the signed-in user's `Visibility` in place for the request (after AuthenticationMiddleware). The
    API's token check narrows it again to the token's user."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with viewing(visibility_for(request.user)):
            return self.get_response(request)
