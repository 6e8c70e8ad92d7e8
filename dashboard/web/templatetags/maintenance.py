"""Maintenance windows on the pages they affect: the stream page's banner and the Streams page's marks, read with
one query of the windows (`expectations.maintenance.Maintenance`)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from dashboard.deliveries.models import Stream
from dashboard.expectations.maintenance import Maintenance, Occurrence, Target

register = template.Library()


@register.inclusion_tag("web/_maintenance_banner.html")
def maintenance_banner(stream: Stream) -> dict[str, Any]:
    covering = Maintenance.at(timezone.now()).covering(Target(stream.stream_id, stream.tag))
    return {"covering": sorted(covering, key=lambda o: o.end)}


@register.simple_tag
def streams_in_maintenance(entries: Any) -> dict[str, Occurrence]:
    """Of the Streams page's entries, the streams in maintenance now (stream id → the occurrence ending last)."""
    maintenance = Maintenance.at(timezone.now())
    if not maintenance.active:
        return {}
    ids = [entry["stats"].key for entry in entries]
    rows = Stream.objects.filter(stream_id__in=ids).values_list("stream_id", "tag")
    tags = dict(rows)
    return maintenance.streams_covered((stream_id, tags.get(stream_id, "")) for stream_id in ids)
