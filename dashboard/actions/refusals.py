"""A refusal of the provider in words that match the stream's status as the last stream sync read it.

The provider answers "Stream is in error state" for a stream it has terminated too; a terminated stream cannot be
reactivated, so telling the user to reactivate it, or that it is in error, misleads."""

from __future__ import annotations

from dashboard.deliveries.models import Stream


def refusal(stream_id: str, message: str) -> str:
    """The provider's refusal of an action on this stream, named after its status when that is terminated."""
    if "error state" not in message.lower():
        return message
    status = Stream.objects.filter(stream_id=stream_id).values_list("provider_status", flat=True).first()
    if status != "terminated":
        return message
    return (
        f"The stream is terminated at the provider (it answered “{message}”): a terminated stream cannot be "
        "reactivated, only recreated."
    )
