"""The delivery history of a few simulated streams, as a function of the seed, the clock and the requests made.

Blocks with activity arrive as a Poisson process generated one hour-slot at a time from the seed,
so the same seed gives the same world whatever the clock did before. Each block is delivered
twice per stream (unconfirmed, then confirmed). Whether an attempt fails depends on incidents on
the webhook URL at that moment; a failed delivery is retried on the published schedule, and the
record's state (retries, errorMessage) is read off the attempts that happened before "now".

Which deliveries and attempts are made at all depends on the streams' statuses (contract §5): a block seen
while its stream is not `active` is neither sent nor recorded, and a retry falling due then is not made (the
delivery's schedule stops there). The statuses come from the streams' ledger (streams.py), which walks
every attempt in time order and tells this history what it dropped (`drop`, `stop`); every read first lets
the ledger catch up with the time it reads at (`settle`).

The scenario's completeness scripts (scenario.py) act here, where the deliveries are drawn: a quiet stream's
blocks in its quiet hours are not drawn at all (nothing matched: the block preview answers null), a reload's
blocks are drawn but left out of what is made (`matching_in_slot` keeps them, `events_in_slot` does not), and a
slow period dates a delivery's first attempt minutes after it was due. Every random draw is made whatever the
scripts say, so the other deliveries keep their ids and times.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dashboard.simulator import catalog, entropy, scenario
from dashboard.simulator.payloads import build_payload

# The provider's published retry delays after each failed attempt.
RETRY_DELAYS: tuple[int, ...] = (60, 600, 3600, 7200, 21600, 43200, 86400)

EVENT_SLOT = 3600.0
INCIDENT_SLOT = 6 * 3600.0
# Incidents never last longer than this, so a lookup needs only the last few incident slots.
MAX_INCIDENT = 12 * 3600.0
# Any attempt, even to a healthy URL, fails this often (a blip the first retry usually fixes).
SPORADIC_FAILURE_RATE = 0.012
# A random incident fails this share of its URL's attempts at most: below one half, the URL's success rate
# drifts up through it, so only scripted outages put streams in `error`.
RANDOM_INCIDENT_SHARE = (0.15, 0.4)
GOLDEN = 0.6180339887498949


@dataclass(frozen=True)
class StreamTemplate:
    tag: str
    chain_hex: str
    # What the stream delivers (payloads.build_payload): erc20 transfers and approvals of `token`, sale
    # (Seaport orders), erc1155 transfers, mint (ERC-721 mints), swap (Uniswap V2), native transfers of a
    # watched wallet, or deposits (only the incoming ones).
    kind: str
    weight: float
    url_index: int
    token: str = ""


@dataclass(frozen=True)
class WebhookTemplate:
    url: str
    host: str
    ip: str
    port: int
    timeout_ms: int
    # Chance that an incident starts on this URL in any six-hour slot.
    incident_rate: float
    incident_kinds: tuple[str, ...]


WEBHOOKS: tuple[WebhookTemplate, ...] = (
    WebhookTemplate(
        "https://api.acme-payments.io/webhooks/moralis",
        "api.acme-payments.io",
        "198.51.100.23",
        443,
        10000,
        0.15,
        ("status5xx", "timeout"),
    ),
    WebhookTemplate(
        "https://hooks.example.com/streams/nft-sales",
        "hooks.example.com",
        "203.0.113.40",
        443,
        10000,
        0.2,
        ("status5xx", "dns", "hangup"),
    ),
    WebhookTemplate(
        "https://ingest.treasury-ops.net/moralis/hook",
        "ingest.treasury-ops.net",
        "203.0.113.7",
        443,
        15000,
        0.25,
        ("refused", "status5xx", "reset"),
    ),
    WebhookTemplate(
        "https://nft-indexer.demo-studio.dev/api/moralis",
        "nft-indexer.demo-studio.dev",
        "198.51.100.77",
        443,
        10000,
        0.2,
        ("cert", "status404", "status5xx"),
    ),
    WebhookTemplate(
        "https://swaps.tradebot.example.org/hook?src=moralis",
        "swaps.tradebot.example.org",
        "192.0.2.15",
        8443,
        5000,
        0.3,
        ("timeout", "hangup", "status5xx"),
    ),
)

STREAM_TEMPLATES: tuple[StreamTemplate, ...] = (
    StreamTemplate("usdc-transfers", "0x1", "erc20", 3.0, 0, token="USDC"),
    StreamTemplate("nft-sales", "0x1", "sale", 2.0, 1),
    StreamTemplate("treasury-wallets", "0x89", "native", 1.0, 2),
    StreamTemplate("uniswap-v2-swaps", "0x1", "swap", 2.0, 4),
    StreamTemplate("bsc-usdt-payments", "0x38", "erc20", 1.5, 0, token="USDT"),
    StreamTemplate("polygon-erc1155-transfers", "0x89", "erc1155", 1.0, 3),
    StreamTemplate("arbitrum-mints", "0xa4b1", "mint", 1.0, 3),
    StreamTemplate("avax-deposits", "0xa86a", "deposits", 0.8, 2),
)


@dataclass(frozen=True)
class Stream:
    id: str
    tag: str
    chain: catalog.Chain
    kind: str
    weight: float
    webhook: WebhookTemplate
    token: str = ""


@dataclass(frozen=True)
class Incident:
    url: str
    start: float
    end: float
    kind: str
    # Fixed variable part for the whole incident (a status code), so texts group but still vary by incident.
    status_code: int
    # Share of the attempts that fail; with `per_delivery`, the share of deliveries whose attempts all fail.
    share: float = 1.0
    per_delivery: bool = False


@dataclass(frozen=True, slots=True)
class BlockEvent:
    key: str
    stream: Stream
    number: int
    ts: float
    # False for a block in which nothing matched the stream (a block re-sent on request): an empty payload.
    matched: bool = True


@dataclass(slots=True)
class Delivery:
    id: str
    date: float
    event: BlockEvent
    confirmed: bool
    # (attempt time, error text or "" for success), filled in on first use.
    attempts: tuple[tuple[float, str], ...] | None = None
    # The provider's test webhook after a reactivation: no chain, no block, an empty payload.
    test: bool = False
    # Made on request (a test webhook, a block re-sent) rather than by the chain's activity.
    extra: bool = False


@dataclass
class _Index:
    keys: list[tuple[float, str]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    slots: set[int] = field(default_factory=set)
    by_id: dict[str, Delivery] = field(default_factory=dict)
    # How many dropped deliveries were left out when it was built.
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a delivery as the delivery logs show it: a scheduled one (the first, or a retry) or a
    replay asked for through the API."""

    at: float
    # The attempt's place in the delivery's life: 0..7 for scheduled ones, REPLAY_ORDER + n for replays.
    order: int
    error: str
    # The record's retry count once this attempt was made (a replay leaves it as it was).
    retries: int

    @property
    def replay(self) -> bool:
        return self.order >= REPLAY_ORDER


REPLAY_ORDER = 100


def iso(ts: float) -> str:
    """JavaScript's Date.toISOString(): milliseconds and Z."""
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class HistoryWorld:
    def __init__(
        self,
        *,
        seed: int,
        start: float,
        deliveries_per_minute: float,
        window_days: int,
        streams: int,
        receiver_back_after: float = scenario.RECEIVER_BACK_AFTER,
        sporadic_failure_rate: float = SPORADIC_FAILURE_RATE,
    ) -> None:
        self.seed = seed
        self.sporadic_failure_rate = sporadic_failure_rate
        self.start = start
        self.receiver_back_after = receiver_back_after
        self.deliveries_per_minute = deliveries_per_minute
        self.window_seconds = window_days * 86400.0
        r = entropy.rng(seed, "streams")
        count = max(1, min(streams, len(STREAM_TEMPLATES)))
        self.streams: list[Stream] = [
            Stream(
                id=entropy.uuid4(r),
                tag=t.tag,
                chain=catalog.CHAINS_BY_HEX[t.chain_hex],
                kind=t.kind,
                weight=t.weight,
                webhook=WEBHOOKS[t.url_index],
                token=t.token,
            )
            for t in STREAM_TEMPLATES[:count]
        ]
        self._scripted = self._scripted_incidents()
        self._bursts = [
            (stream, start + b.start, start + b.end, b.every)
            for b in scenario.BURSTS
            for stream in self.streams
            if stream.tag == b.tag
        ]
        by_tag = {stream.tag: stream for stream in self.streams}
        self._reloads = [
            (by_tag[r.tag], start + r.start, start + r.end) for r in scenario.RELOADS if r.tag in by_tag
        ]
        self._slow = [
            (by_tag[p.tag], start + p.start, start + p.end, p.peak) for p in scenario.SLOW if p.tag in by_tag
        ]
        self._quiet = {by_tag[q.tag].id: q for q in scenario.QUIET if q.tag in by_tag}
        self._lock = threading.Lock()
        # Set by the streams' ledger: brings it up to a time before the history is read at that time.
        self.settle: Callable[[float], None] | None = None
        # Deliveries not made because their stream was not active when their block came.
        self._dropped: set[str] = set()
        # Deliveries whose retry schedule stopped (their stream was not active when a retry fell due): how
        # many of their scheduled attempts were made.
        self._stopped: dict[str, int] = {}
        self._index = _Index()
        self._incidents: dict[tuple[str, int], list[Incident]] = {}
        # By block event and its time: two events of one stream can fall in one block, and each has its payload.
        self._payloads: dict[tuple[str, float], dict[str, Any]] = {}
        # Replays asked for through the API, by delivery id: (time, error text or "" for success).
        self._replays: dict[str, list[tuple[float, str]]] = {}
        # Deliveries made on request (a block re-sent) rather than by the scripted chain activity.
        self.extras: list[Delivery] = []

    # -- incidents -------------------------------------------------------------------------------

    def _scripted_incidents(self) -> list[Incident]:
        """The scenario's outages (scenario.py), placed relative to the start."""
        s = self.start
        urls = {w.url for w in (st.webhook for st in self.streams)}
        scripted = [
            Incident(
                WEBHOOKS[o.url_index].url,
                s + o.start,
                s + (o.end if o.end is not None else self.receiver_back_after),
                o.kind,
                o.status_code,
                o.share,
                o.per_delivery,
            )
            for o in scenario.OUTAGES
        ]
        return [i for i in scripted if i.url in urls]

    def receivers_up(self, now: float, url: str | None = None) -> list[Incident]:
        """The simulator's control: end now the scripted outages under way (of one URL, or all); the ended ones.

        Only attempts from `now` on change, so the history already served stays as it was.
        """
        ended: list[Incident] = []
        kept: list[Incident] = []
        for incident in self._scripted:
            if incident.start <= now < incident.end and (url is None or incident.url == url):
                ended.append(incident)
                incident = dataclasses.replace(incident, end=now)
            kept.append(incident)
        if ended:
            self._scripted = kept
            self.forget_attempts(self._index.deliveries)
            self.forget_attempts(self.extras)
        return ended

    @staticmethod
    def forget_attempts(deliveries: Iterable[Delivery]) -> None:
        """Attempts are worked out again on next use (after an incident changed)."""
        for d in deliveries:
            d.attempts = None

    def _random_incidents(self, webhook: WebhookTemplate, slot: int) -> list[Incident]:
        cache_key = (webhook.url, slot)
        cached = self._incidents.get(cache_key)
        if cached is not None:
            return cached
        r = entropy.rng(self.seed, "incident", webhook.url, slot)
        found: list[Incident] = []
        if r.random() < webhook.incident_rate:
            start = slot * INCIDENT_SLOT + r.uniform(0, INCIDENT_SLOT)
            # Mostly short blips, sometimes hours.
            duration = min(MAX_INCIDENT, 600 * r.lognormvariate(1.0, 1.0))
            kind = r.choice(webhook.incident_kinds)
            code = r.choice((500, 502, 502, 503, 504)) if kind == "status5xx" else 404
            share = r.uniform(*RANDOM_INCIDENT_SHARE)
            found.append(Incident(webhook.url, start, start + duration, kind, code, share))
        self._incidents[cache_key] = found
        return found

    def incident_at(self, webhook: WebhookTemplate, ts: float) -> Incident | None:
        for incident in self._scripted:
            if incident.url == webhook.url and incident.start <= ts < incident.end:
                return incident
        slot = int(ts // INCIDENT_SLOT)
        for s in range(slot - int(MAX_INCIDENT // INCIDENT_SLOT), slot + 1):
            for incident in self._random_incidents(webhook, s):
                if incident.start <= ts < incident.end:
                    return incident
        return None

    def incidents_between(self, start: float, end: float) -> list[Incident]:
        """Every incident overlapping [start, end), for tests and for a look at the truth."""
        out: list[Incident] = [i for i in self._scripted if i.start < end and i.end > start]
        seen = {w.url: w for w in (st.webhook for st in self.streams)}
        first = int((start - MAX_INCIDENT) // INCIDENT_SLOT)
        for webhook in seen.values():
            for s in range(first, int(end // INCIDENT_SLOT) + 1):
                out.extend(i for i in self._random_incidents(webhook, s) if i.start < end and i.end > start)
        return sorted(out, key=lambda i: i.start)

    def _failure_text(self, webhook: WebhookTemplate, ts: float, d: Delivery, attempt: int | str) -> str:
        delivery_id = d.id
        incident = self.incident_at(webhook, ts)
        if incident is not None and incident.share < 1.0 and self._share_draw(incident, d, attempt) >= incident.share:
            incident = None
        if incident is not None:
            kind, code = incident.kind, incident.status_code
            if kind == "status5xx" and entropy.unit(delivery_id, attempt, "code") < 0.3:
                # A struggling server does not always fail the same way.
                code = 503 if code != 503 else 502
        elif entropy.unit(self.seed, delivery_id, attempt, "sporadic") < self.sporadic_failure_rate:
            kind = ("timeout", "hangup", "status5xx", "reset")[entropy.digest_int(delivery_id, attempt) % 4]
            code = 502
        else:
            return ""
        return _error_text(webhook, kind, code)

    def _share_draw(self, incident: Incident, d: Delivery, attempt: int | str) -> float:
        """Where an attempt falls in [0, 1) for a partial incident: the failing share lies below its `share`.

        Scheduled attempts of block deliveries follow the golden-ratio sequence over (block, attempt,
        confirmed), so an incident fails very nearly its share of every run of attempts and a scripted slide
        takes the same course whatever the seed; a whole delivery (`per_delivery`) or a replay draws by id.
        """
        offset = entropy.unit(self.seed, incident.url, incident.start, "share")
        if incident.per_delivery:
            return entropy.unit(self.seed, d.id, offset)
        if isinstance(attempt, str) or d.extra:
            return entropy.unit(self.seed, d.id, attempt, offset)
        sequence = d.event.number * 16 + attempt * 2 + int(d.confirmed)
        return (sequence * GOLDEN + offset) % 1.0

    # -- deliveries ------------------------------------------------------------------------------

    def events_in_slot(self, slot: int) -> list[Delivery]:
        """The scheduled deliveries of blocks seen in one hour-slot (fresh objects, oldest block first)."""
        return self._events_in_slot(slot)

    def _events_in_slot(self, slot: int) -> list[Delivery]:
        # A reload's blocks matched, but the provider missed them: nothing is made.
        return [d for d in self.matching_in_slot(slot) if not self.reloading(d.event)]

    def matching_in_slot(self, slot: int) -> list[Delivery]:
        """The deliveries of the blocks the streams matched in one hour-slot, before any was missed: those of
        a reload included, as if the streams had been `active` throughout."""
        r = entropy.rng(self.seed, "events", slot)
        # Two records per block, so blocks arrive at half the record rate.
        rate = self.deliveries_per_minute / 60.0 / 2.0
        out: list[Delivery] = []
        if rate <= 0:
            return out
        weights = [s.weight for s in self.streams]
        t = slot * EVENT_SLOT
        end = t + EVENT_SLOT
        while True:
            t += r.expovariate(rate)
            if t >= end:
                break
            stream = r.choices(self.streams, weights)[0]
            number = catalog.block_at(stream.chain, t)
            drawn: list[Delivery] = []
            # Drawn even in a quiet hour, so that the deliveries after it keep their ids.
            self._deliveries_of(r, stream, number, drawn)
            if not self.quiet(stream, catalog.block_time(stream.chain, number)):
                out.extend(drawn)
        for stream, burst_start, burst_end, every in self._bursts:
            chain = stream.chain
            first = max(catalog.block_at(chain, burst_start), catalog.block_at(chain, slot * EVENT_SLOT)) + 1
            last = min(catalog.block_at(chain, burst_end), catalog.block_at(chain, end))
            for number in range(first + (-first) % every, last + 1, every):
                self._deliveries_of(entropy.rng(self.seed, "burst", stream.id, number), stream, number, out)
        return out

    def _deliveries_of(self, r: random.Random, stream: Stream, number: int, out: list[Delivery]) -> None:
        """A block's two deliveries: the first attempts come 1-5 s after the block (unconfirmed) and 1-5 s
        after its finality (confirmed), later in a slow period."""
        ts = catalog.block_time(stream.chain, number)
        event = BlockEvent(key=f"{stream.id}:{number}", stream=stream, number=number, ts=ts)
        for confirmed, due in ((False, ts), (True, ts + stream.chain.confirm_seconds)):
            delivery_id = entropy.uuid4(r)
            date = due + r.uniform(1.0, 5.0)
            out.append(Delivery(delivery_id, date + self.lag(stream, date, delivery_id), event, confirmed))

    # -- the completeness scripts (scenario.py) ---------------------------------------------------

    def lag(self, stream: Stream, due: float, delivery_id: str) -> float:
        """How late the provider sends a delivery of `stream` due at `due`: 0, or minutes in a slow period,
        rising to the period's peak in its middle and falling back."""
        for slow_stream, start, end, peak in self._slow:
            if slow_stream.id == stream.id and start <= due < end:
                middle = 1.0 - abs(2.0 * (due - start) / (end - start) - 1.0)
                return 60.0 + (peak - 60.0) * middle + 20.0 * entropy.unit(self.seed, delivery_id, "lag")
        return 0.0

    def slow_periods(self) -> list[tuple[Stream, float, float]]:
        """(stream, start, end) of the scripted slow periods: deliveries due then go out late."""
        return [(stream, start, end) for stream, start, end, _ in self._slow]

    def reloading(self, event: BlockEvent) -> bool:
        """Whether `event`'s block was mined during an address reload of its stream (missed by the provider)."""
        return any(
            stream.id == event.stream.id and start <= event.ts < end for stream, start, end in self._reloads
        )

    def reloads(self) -> list[tuple[Stream, float, float]]:
        """(stream, start, end) of the scripted address reloads."""
        return list(self._reloads)

    def quiet(self, stream: Stream, ts: float) -> bool:
        """Whether `stream`'s contract emits nothing at `ts` (a quiet hour)."""
        return any(start <= ts < end for start, end in self.quiet_hours(stream, ts, ts))

    def quiet_hours(self, stream: Stream, since: float, until: float) -> list[tuple[float, float]]:
        """The quiet hours of `stream` overlapping [since, until], oldest first."""
        quiet = self._quiet.get(stream.id)
        if quiet is None:
            return []
        windows = [(self.start + at, self.start + at + quiet.length) for at in quiet.scripted]
        for slot in range(int(since // INCIDENT_SLOT) - 1, int(until // INCIDENT_SLOT) + 1):
            r = entropy.rng(self.seed, "quiet", stream.id, slot)
            if r.random() < quiet.chance:
                start = slot * INCIDENT_SLOT + r.uniform(0, INCIDENT_SLOT - quiet.length)
                windows.append((start, start + quiet.length))
        return sorted(w for w in windows if w[0] <= until and w[1] > since)

    def matching_between(self, since: float, until: float) -> list[Delivery]:
        """The deliveries of every block the streams matched, mined in [since, until] (fresh objects, as
        `matching_in_slot` gives them): what would have been made had every stream been `active`."""
        longest = max((s.chain.block_seconds for s in self.streams), default=0.0)
        first, last = int(since // EVENT_SLOT) - 1, int((until + longest) // EVENT_SLOT)
        return [
            d
            for slot in range(first, last + 1)
            for d in self.matching_in_slot(slot)
            if since <= d.event.ts <= until
        ]

    def matching_event(self, stream: Stream, number: int) -> BlockEvent | None:
        """The event of `stream` in block `number`, if the stream matched anything in it (whatever the stream's
        status and any reload: what it would have received)."""
        ts = catalog.block_time(stream.chain, number)
        for d in self.matching_between(ts, ts):
            if d.event.stream.id == stream.id and d.event.number == number:
                return d.event
        return None

    def _ensure(self, lo_ts: float, hi_ts: float) -> _Index:
        """The sorted index covering [lo_ts, hi_ts]; generates missing hour-slots once."""
        index = self._index
        # Confirmed deliveries land a few minutes after their block, so look one slot back.
        wanted = set(range(int(lo_ts // EVENT_SLOT) - 1, int(hi_ts // EVENT_SLOT) + 1))
        missing = wanted - index.slots
        if not missing and index.dropped == len(self._dropped):
            return index
        with self._lock:
            index = self._index
            missing = wanted - index.slots
            dropped = self._dropped
            if not missing and index.dropped == len(dropped):
                return index
            # Forget slots well past retention so a long-running demo does not grow without bound.
            keep_from = lo_ts - 2 * 86400
            deliveries = [d for d in index.deliveries if d.date >= keep_from]
            for slot in sorted(missing):
                deliveries.extend(self._events_in_slot(slot))
            kept = {d.id for d in deliveries}
            deliveries.extend(
                d for d in self.extras if int(d.date // EVENT_SLOT) in missing and d.id not in kept
            )
            deliveries = [d for d in deliveries if d.id not in dropped]
            deliveries.sort(key=lambda d: (d.date, d.id))
            new = _Index(
                keys=[(d.date, d.id) for d in deliveries],
                deliveries=deliveries,
                slots={s for s in index.slots | missing if (s + 1) * EVENT_SLOT >= keep_from},
                by_id={d.id: d for d in deliveries},
                dropped=len(dropped),
            )
            live = {(d.event.key, d.event.ts) for d in deliveries}
            self._payloads = {k: v for k, v in self._payloads.items() if k in live}
            self._index = new
            return new

    def attempts(self, d: Delivery) -> tuple[tuple[float, str], ...]:
        if d.attempts is None:
            webhook = d.event.stream.webhook
            out: list[tuple[float, str]] = []
            t = d.date
            for attempt in range(len(RETRY_DELAYS) + 1):
                text = self._failure_text(webhook, t, d, attempt)
                out.append((t, text))
                if not text or attempt == len(RETRY_DELAYS):
                    break
                t += RETRY_DELAYS[attempt]
            d.attempts = tuple(out)
        return d.attempts

    def scheduled(self, d: Delivery) -> tuple[tuple[float, str], ...]:
        """The scheduled attempts of `d` that are made: all of them, unless its schedule stopped."""
        made = self._stopped.get(d.id)
        attempts = self.attempts(d)
        return attempts if made is None else attempts[:made]

    # -- what the statuses leave out (told by the streams' ledger) -------------------------------

    def drop(self, d: Delivery) -> None:
        """`d` is not made: its stream was not active when its block came."""
        self._dropped.add(d.id)

    def stop(self, d: Delivery, made: int) -> None:
        """`d`'s schedule stops after its first `made` attempts: its stream was not active for the next."""
        self._stopped[d.id] = made

    def was_dropped(self, delivery_id: str) -> bool:
        """Whether the ledger left this delivery out (its stream was not active when its block came)."""
        return delivery_id in self._dropped

    def stopped(self, d: Delivery, order: int) -> bool:
        made = self._stopped.get(d.id)
        return made is not None and order >= made

    def forget_statuses(self) -> None:
        """The ledger walks again from the start: what it left out is worked out again."""
        with self._lock:
            self._dropped = set()
            self._stopped = {}
            self._index = _Index()

    def _settle(self, now: float) -> None:
        if self.settle is not None:
            self.settle(now)

    def state_at(self, d: Delivery, now: float) -> tuple[int, str]:
        """(retries, errorMessage) as the upstream shows the record at `now`."""
        if d.id not in self._replays:
            done = [a for a in self.scheduled(d) if a[0] <= now]
            return len(done) - 1, done[-1][1]
        made = self.attempts_made(d, now)
        return made[-1].retries, made[-1].error

    def attempts_made(self, d: Delivery, now: float) -> list[Attempt]:
        """Every attempt of `d` up to `now`, in time order: the scheduled ones, less those a successful replay
        made unnecessary, and the replays."""
        replays = [r for r in self._replays.get(d.id, ()) if r[0] <= now]
        delivered_at = next((at for at, error in replays if not error), None)
        made: list[Attempt] = []
        retries = -1
        scheduled = [
            a for a in self.scheduled(d) if a[0] <= now and (delivered_at is None or a[0] < delivered_at)
        ]
        merged = sorted(
            [(at, n, error) for n, (at, error) in enumerate(scheduled)]
            + [(at, REPLAY_ORDER + n, error) for n, (at, error) in enumerate(replays)]
        )
        for at, order, error in merged:
            if order < REPLAY_ORDER:
                retries = order
            made.append(Attempt(at, order, error, max(retries, 0)))
        return made

    def cancelled(self, d: Delivery, at: float) -> bool:
        """Whether a scheduled attempt of `d` at `at` is not made because a replay delivered it before."""
        return any(not error and when <= at for when, error in self._replays.get(d.id, ()))

    def replay(self, d: Delivery, now: float) -> str:
        """One attempt of `d` now, to its stream's webhook URL; its error text, or "" when it succeeded."""
        replays = self._replays.setdefault(d.id, [])
        error = self._failure_text(d.event.stream.webhook, now, d, f"replay{len(replays)}")
        replays.append((now, error))
        return error

    def add_extra(self, d: Delivery) -> None:
        """A delivery made on request; it shows in the history from its date on, like any other."""
        self._ensure(d.date, d.date)
        with self._lock:
            self.extras.append(d)
            index = self._index
            position = bisect.bisect_left(index.keys, (d.date, d.id))
            self._index = _Index(
                keys=[*index.keys[:position], (d.date, d.id), *index.keys[position:]],
                deliveries=[*index.deliveries[:position], d, *index.deliveries[position:]],
                slots=index.slots,
                by_id={**index.by_id, d.id: d},
            )

    def find(self, delivery_id: str, now: float) -> Delivery | None:
        """The delivery with this id among the records visible at `now`."""
        self._settle(now)
        index = self._ensure(now - self.window_seconds, now)
        d = index.by_id.get(delivery_id)
        if d is None or not now - self.window_seconds <= d.date <= now:
            return None
        return d

    def window(self, now: float) -> tuple[_Index, int, int]:
        """The index and the [lo, hi) slice of records visible at `now` (oldest to newest)."""
        self._settle(now)
        index = self._ensure(now - self.window_seconds, now)
        lo = bisect.bisect_left(index.keys, (now - self.window_seconds, ""))
        hi = bisect.bisect_right(index.keys, (now, "\uffff"))
        return index, lo, hi

    def page(
        self, now: float, limit: int, before: tuple[float, str] | None = None
    ) -> tuple[list[Delivery], int, bool]:
        """Up to `limit` records older than `before`, newest first; the window total; whether more remain."""
        index, lo, hi = self.window(now)
        total = hi - lo
        if before is not None:
            hi = min(hi, bisect.bisect_left(index.keys, before))
        start = max(lo, hi - limit)
        return index.deliveries[start:hi][::-1], total, start > lo

    # -- rendering -------------------------------------------------------------------------------

    def render(self, d: Delivery, now: float, *, include_payload: bool) -> dict[str, Any]:
        retries, error = self.state_at(d, now)
        event = d.event
        if d.test:
            return self._render_test(d, retries, error, include_payload=include_payload)
        base = self.payload(event)
        record: dict[str, Any] = {"id": d.id, "date": iso(d.date)}
        if include_payload:
            record["payload"] = {**base, "retries": retries, "confirmed": d.confirmed}
        record["tinyPayload"] = {
            "chainId": event.stream.chain.hex_id,
            "confirmed": d.confirmed,
            "block": str(event.number),
            "records": len(base["logs"]) + len(base["txs"]) + len(base["txsInternal"]),
            "retries": retries,
        }
        record["errorMessage"] = error
        record["webhookUrl"] = event.stream.webhook.url
        record["streamId"] = event.stream.id
        record["tag"] = event.stream.tag
        return record

    def _render_test(self, d: Delivery, retries: int, error: str, *, include_payload: bool) -> dict[str, Any]:
        """DECISION (contract §4): a test webhook's chainId is "" and its block fields are empty."""
        stream = d.event.stream
        record: dict[str, Any] = {"id": d.id, "date": iso(d.date)}
        if include_payload:
            record["payload"] = {
                "block": {"number": "", "hash": "", "timestamp": ""}, "chainId": "", "logs": [], "txs": [],
                "txsInternal": [], "abi": [], "retries": retries, "confirmed": True, "tag": stream.tag,
                "streamId": stream.id,
            }
        record["tinyPayload"] = {"chainId": "", "confirmed": True, "block": "", "records": 0, "retries": retries}
        record["errorMessage"] = error
        record["webhookUrl"] = stream.webhook.url
        record["streamId"] = stream.id
        record["tag"] = stream.tag
        return record

    def payload(self, event: BlockEvent) -> dict[str, Any]:
        cached = self._payloads.get((event.key, event.ts))
        if cached is None:
            cached = build_payload(self.seed, event)
            self._payloads[(event.key, event.ts)] = cached
        return cached

    def records(self, now: float, *, include_payload: bool = False) -> list[dict[str, Any]]:
        index, lo, hi = self.window(now)
        return [self.render(d, now, include_payload=include_payload) for d in index.deliveries[lo:hi][::-1]]


def _error_text(webhook: WebhookTemplate, kind: str, code: int) -> str:
    if kind == "timeout":
        return f"timeout of {webhook.timeout_ms}ms exceeded"
    if kind == "refused":
        return f"connect ECONNREFUSED {webhook.ip}:{webhook.port}"
    if kind == "dns":
        return f"getaddrinfo ENOTFOUND {webhook.host}"
    if kind == "hangup":
        return "socket hang up"
    if kind == "reset":
        return "read ECONNRESET"
    if kind == "cert":
        return "certificate has expired"
    if kind == "status404":
        return "Request failed with status code 404"
    return f"Request failed with status code {code}"
