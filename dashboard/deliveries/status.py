"""A delivery's status, derived from what the upstream record says of its latest attempt."""

from __future__ import annotations

from django.db import models

from dashboard.deliveries.schedule import MAX_RETRIES


class DeliveryStatus(models.TextChoices):
    DELIVERED = "delivered", "Delivered"
    RETRYING = "retrying", "Retrying"
    FAILED = "failed", "Failed"


# Every status but delivered; the "failing" filter of every page.
FAILING_STATUSES = (DeliveryStatus.RETRYING, DeliveryStatus.FAILED)


def delivery_status(error_message: str, retries: int) -> DeliveryStatus:
    """Delivered when the latest attempt succeeded; failed once the retry schedule is used up."""
    if not error_message:
        return DeliveryStatus.DELIVERED
    if retries >= MAX_RETRIES:
        return DeliveryStatus.FAILED
    return DeliveryStatus.RETRYING
