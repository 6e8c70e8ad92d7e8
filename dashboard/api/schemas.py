"""The API's answers, typed so the OpenAPI document describes them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ninja import Field, Schema
from pydantic import ConfigDict


class Page(Schema):
    next_cursor: str | None = None
    next: str | None = None


class DeliveryOut(Schema):
    id: uuid.UUID
    date: datetime
    stream_id: str
    tag: str
    webhook_url: str
    chain_id: str
    confirmed: bool | None
    block_number: int | None
    records: int
    retries: int
    status: str
    error_message: str
    error_group_id: int | None
    is_test: bool


class DeliveryPage(Page):
    items: list[DeliveryOut]


class DecodedArg(Schema):
    name: str
    type: str
    value: Any


class DecodedEvent(Schema):
    log_index: Any = None
    transaction_hash: str = ""
    address: str = ""
    event: str | None
    args: list[DecodedArg]
    problem: str = ""


class AttemptOut(Schema):
    at: datetime
    origin: str
    retries: int | None
    succeeded: bool | None
    error: str
    exact: bool


class DeliveryDetail(DeliveryOut):
    block_time: datetime | None
    latency_ms: int | None
    payload: Any
    decoded_events: list[DecodedEvent]
    attempts: list[AttemptOut]
    logs_read: bool
    logs_error: str


class PercentilesOut(Schema):
    count: int
    p50: float | None
    p95: float | None
    p99: float | None


class HealthOut(Schema):
    webhook_url: str
    state: str
    rate: int
    lowest: int
    trend_per_hour: float
    hours_to_error: float | None


class BudgetOut(Schema):
    since: datetime
    until: datetime
    delivery_target: float
    delivery_budget_left: float | None
    latency_budget_left: float | None
    least_left: float | None


class StreamOut(Schema):
    stream_id: str
    tag: str
    webhook_urls: list[str]
    chains: list[str]
    last_delivery: datetime | None
    provider_status: str
    provider_status_since: datetime | None
    deliveries_24h: int
    failing_24h: int
    retried_24h: int
    success_rate_24h: float | None
    health: HealthOut | None
    latency_p95_24h: float | None
    budget: BudgetOut | None


class StreamList(Page):
    items: list[StreamOut]


class StreamDetail(Schema):
    stream_id: str
    tag: str
    webhook_urls: list[str]
    chain_ids: list[str]
    provider_status: str
    provider_status_message: str
    provider_status_since: datetime | None
    health: HealthOut | None
    url_health: list[HealthOut]
    stored: dict[str, int]
    latency: dict[str, PercentilesOut]
    budget: BudgetOut | None


class ErrorGroupOut(Schema):
    id: int
    template: str
    first_seen: datetime
    last_seen: datetime
    delivery_count: int


class ErrorGroupInWindow(ErrorGroupOut):
    failures: int
    streams: list[str]
    tags: list[str]
    webhook_urls: list[str]


class ErrorGroupPage(Page):
    items: list[ErrorGroupInWindow]


class IncidentOut(Schema):
    id: int
    rule: str
    summary: str
    target_kind: str
    target_key: str
    stream_id: str
    webhook_url: str
    opened_at: datetime
    resolved_at: datetime | None
    resolved_by: str
    acknowledged_at: datetime | None
    acknowledged_by: str
    # The staff member's user name, or null.
    assignee: str | None
    snoozed_until: datetime | None


class IncidentPage(Page):
    items: list[IncidentOut]


class IncidentEventOut(Schema):
    kind: str
    actor: str
    text: str
    created_at: datetime


class IncidentDetail(IncidentOut):
    details: dict[str, Any]
    events: list[IncidentEventOut]


class NoteIn(Schema):
    text: str


class AssignIn(Schema):
    """A staff member's user name, or null to unassign (the incident page's choice)."""

    assignee: str | None


class SnoozeIn(Schema):
    """How long to leave the incident out of digests: 60, 240, 1440 or 10080 minutes (the incident page's
    choices), or null to end a snooze."""

    minutes: int | None


class ChangeOut(Schema):
    changed: bool
    incident: IncidentDetail


class ReplayIn(Schema):
    """The deliveries list's filters, by name, as in its URL (`{"status": "failing", "range": "24h"}`)."""

    filters: dict[str, str]


class ReplayItemOut(Schema):
    delivery_id: uuid.UUID | None
    stream_id: str
    state: str
    delivered: bool | None
    answer: str
    sent_at: datetime | None
    answered_at: datetime | None


class ActionOut(Schema):
    id: int
    kind: str
    state: str
    scope: str
    filters: str
    stream_id: str
    requested_by: str
    created_at: datetime
    confirm_before: datetime | None
    confirmed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    target_count: int
    done: int
    counts: dict[str, int]
    answer: str
    items: list[ReplayItemOut]


class ActionChangeOut(Schema):
    changed: bool
    action: ActionOut


class StatusIn(Schema):
    """`active` (reactivate) or `paused` (pause)."""

    status: str


class StatusDraftOut(ActionChangeOut):
    # Where the status the draft starts from was read: the provider just now, or the last sync.
    status_read: str


class TimelineBucketOut(Schema):
    start: datetime
    end: datetime
    delivered: int
    failed: int


class TimelineOut(Schema):
    start: datetime
    end: datetime
    step_seconds: int
    zone: str
    from_rollups: bool
    delivered: int
    failed: int
    success_rate: float | None
    clamped: str
    buckets: list[TimelineBucketOut]


class LatencyPairOut(Schema):
    unconfirmed: PercentilesOut
    confirmed: PercentilesOut


class LatencyBucketOut(LatencyPairOut):
    start: datetime


class LatencyByChainOut(LatencyPairOut):
    chain_id: str


class LatencyOut(LatencyPairOut):
    start: datetime | None
    end: datetime | None
    step_seconds: int
    exact: bool
    clamped: str
    over_time: list[LatencyBucketOut]
    by_chain: list[LatencyByChainOut]
    slowest_unconfirmed: str
    slowest_confirmed: str


class RetryRowOut(Schema):
    key: str
    label: str
    total: int
    delivered: int
    retrying: int
    failed: int
    retried: int
    by_retries: list[int]
    delivered_after: list[int]
    first_try_percent: float | None
    eventually_percent: float | None
    median_seconds_to_success: int | None


class RetryStatsOut(Page):
    by: str
    start: datetime | None
    end: datetime | None
    overall: RetryRowOut
    items: list[RetryRowOut]


class ObjectiveOut(Schema):
    delivery: str
    delivery_target: float
    latency_seconds: int
    latency_target: float
    own: bool


class MeasureOut(Schema):
    target: float
    total: float
    bad: float
    good_percent: float | None
    budget_left: float | None
    burn_rate: float | None


class BudgetDetailOut(Schema):
    since: datetime
    until: datetime
    left_out_hours: int
    delivery: MeasureOut
    latency: MeasureOut
    least_left: float | None


class BurnOut(Schema):
    name: str
    long_seconds: int
    short_seconds: int
    factor: float
    holds: bool
    delivery_burns: bool
    latency_burns: bool
    delivery: list[MeasureOut]
    latency: list[MeasureOut]


class ObjectivesOut(Schema):
    stream_id: str
    objective: ObjectiveOut
    budget: BudgetDetailOut | None
    burns: list[BurnOut]


class ScanOut(Schema):
    id: int
    state: str
    requested_by: str
    created_at: datetime
    confirmed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    planned: int
    previewed: int
    matched: int
    percent: int
    message: str


class WindowOut(Schema):
    id: int
    stream_id: str
    kind: str
    label: str
    start: datetime
    end: datetime | None
    marked_by: str
    created_at: datetime
    latest_scan: ScanOut | None


class WindowPage(Page):
    items: list[WindowOut]
    audit_skipped: str


class ScanChainOut(Schema):
    chain_id: str
    first_block: int
    last_block: int
    next_block: int
    blocks: int
    placed_by: str


class ChainRangeOut(Schema):
    chain_id: str
    first: int
    last: int
    blocks: int
    placed_by: str


class MissingBlockOut(Schema):
    chain_id: str
    block_number: int
    records: int
    block_time: datetime | None
    previewed_at: datetime | None


class MissingBlockPage(Page):
    scan_id: int | None
    count: int
    items: list[MissingBlockOut]


class StillMissingOut(Schema):
    chain_id: str
    block_number: int
    state: str


class RecoveryOut(Schema):
    asked: int
    recovered: int
    complete: bool
    still_missing: list[StillMissingOut]


class WindowDetail(WindowOut):
    scans: list[ScanOut]
    chains: list[ScanChainOut]
    planned_ranges: list[ChainRangeOut]
    placing_error: str
    missing_count: int
    missing: list[MissingBlockOut]
    resends: list[int]
    recovery: RecoveryOut | None


class ActionRowOut(Schema):
    id: int
    kind: str
    state: str
    scope: str
    stream_id: str
    requested_by: str
    created_at: datetime
    confirmed_at: datetime | None
    finished_at: datetime | None
    target_count: int
    answer: str


class ActionPage(Page):
    items: list[ActionRowOut]


class ChannelRef(Schema):
    id: int
    name: str


class AlertRuleOut(Schema):
    id: int
    name: str
    enabled: bool
    scope: str
    scope_value: str
    condition: str
    condition_text: str
    window_minutes: int
    threshold_percent: int
    min_deliveries: int
    latency_seconds: int
    quiet_probability: float
    consecutive_failures: int
    stale_minutes: int
    recipients: str
    grace_minutes: int
    cooldown_minutes: int
    digest: str
    muted_until: datetime | None
    channels: list[ChannelRef]
    created_at: datetime


class AlertRulePage(Page):
    items: list[AlertRuleOut]


class AlertRuleIn(Schema):
    """An alert rule's fields as the admin's form has them; on create a field left out takes its default, on
    update it is left as it is. `channels` are channel ids."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    enabled: bool | None = None
    scope: str | None = None
    scope_value: str | None = None
    condition: str | None = None
    window_minutes: int | None = None
    threshold_percent: int | None = None
    min_deliveries: int | None = None
    latency_seconds: int | None = None
    quiet_probability: float | None = None
    consecutive_failures: int | None = None
    stale_minutes: int | None = None
    recipients: str | None = None
    grace_minutes: int | None = None
    cooldown_minutes: int | None = None
    digest: str | None = None
    muted_until: datetime | None = None
    channels: list[int] | None = None


class ChannelOut(Schema):
    """A channel without its URL or secret: only whether each is stored, and the URL's scheme and host."""

    id: int
    name: str
    kind: str
    enabled: bool
    url_hint: str
    url_stored: bool
    secret_stored: bool
    created_at: datetime
    last_attempt_at: datetime | None
    last_attempt_ok: bool | None
    last_attempt_result: str


class ChannelPage(Page):
    items: list[ChannelOut]



class ChannelIn(Schema):
    """`url` and `secret` are write-only: stored encrypted, never answered; on update, left out keeps them."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    kind: str | None = None
    enabled: bool | None = None
    url: str | None = Field(None, json_schema_extra={"writeOnly": True})
    secret: str | None = Field(None, json_schema_extra={"writeOnly": True})


class ChannelTestOut(Schema):
    message_id: int
    status: str
    channel: ChannelOut


class MaintenanceWindowOut(Schema):
    id: int
    name: str
    scope: str
    scope_value: str
    starts_at: datetime | None
    ends_at: datetime | None
    cron: str
    duration_minutes: int | None
    time_zone: str
    schedule: str
    reason: str
    created_by: str
    created_at: datetime


class MaintenanceWindowPage(Page):
    items: list[MaintenanceWindowOut]


class MaintenanceWindowIn(Schema):
    """One-off (`starts_at`, `ends_at`) or recurring (`cron`, `duration_minutes`, `time_zone`); a field left out
    takes its default."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    scope: str | None = None
    scope_value: str | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    cron: str | None = None
    duration_minutes: int | None = None
    time_zone: str | None = None
    reason: str | None = None
