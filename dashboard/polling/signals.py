"""What polling tells the apps above it, without importing them.

`failures_stored` is sent after a poll stored deliveries that are failing and were not before (new failed
rows, rows that went from delivered to failing). The alerts app connects to it (see its AppConfig) to
evaluate the rules at once instead of at the next sweep.
"""

from __future__ import annotations

from django.dispatch import Signal

# sender: the Source class; kwargs: source (the Source), count (int).
failures_stored = Signal()

# sender: the Source class; kwargs: source (the Source), changed (list of (stream id, old, new status)).
# Sent when a stream sync found a stream whose status at the provider changed.
stream_status_changed = Signal()
