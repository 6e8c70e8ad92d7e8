"""Stream statuses, stats and delivery logs, read off the attempts the history makes.

A ledger walks every attempt since the streams were created, in time order, and applies the provider's
published rule: each webhook URL has a success rate that starts at 100, loses 1 per failed attempt and
gains 1 per successful one (capped at 100, floored at 0); while it is below 70, the active streams sending
to that URL are put in `error`; a stream 24 h in `error` is `terminated`. The same walk counts the attempts
for the stats. Actions asked for through the API (a status change, a replay, a block re-sent) join the walk
at the moment they were made, so the ledger is a function of the seed, the clock and those requests.

While a stream is not `active` (paused, error, terminated) the provider processes no block for it (contract
§5): a delivery whose first attempt falls then is neither made nor recorded, and a retry falling due then is
not made, which ends that delivery's schedule (a replay is the way back). The walk tells the history what it
left out, and every read of the history first brings the walk up to the time it reads at. In `error` and
`terminated` the simulator also refuses replays and re-sent blocks, and any status change of a terminated
stream. Scripted status changes (scenario.py) join the walk like the ones asked for through the API.
DECISION: bringing a stream back to `active` from `error` restarts its webhook URL's success rate at 100;
otherwise the first attempt after it would put the stream straight back in `error`.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field
from typing import Any

from dashboard.simulator import catalog, configs, entropy, scenario
from dashboard.simulator.history import EVENT_SLOT, BlockEvent, Delivery, HistoryWorld, Incident, Stream, iso
from dashboard.simulator.payloads import build_payload

ERROR_THRESHOLD = 70
TERMINATE_AFTER = 86400.0
IN_ERROR = "Stream is in error state"
TERMINATED = "Stream is terminated"

DESCRIPTIONS = {
    "usdc-transfers": "USDC transfers and approvals of the payment wallets",
    "nft-sales": "Seaport sales of the watched collections",
    "treasury-wallets": "Native transfers of the treasury wallets",
    "uniswap-v2-swaps": "Swaps on the watched Uniswap V2 pairs",
    "bsc-usdt-payments": "USDT payments on BNB Chain",
    "polygon-erc1155-transfers": "ERC-1155 transfers of the shared storefront on Polygon",
    "arbitrum-mints": "Mints of the Arbitrum collections",
    "avax-deposits": "Deposits to the Avalanche hot wallet",
}
@dataclass
class Counts:
    delivered: int = 0
    failed: int = 0
    logs: int = 0
    txs: int = 0
    txs_internal: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "totalWebhooksDelivered": self.delivered,
            "totalWebhooksFailed": self.failed,
            "totalLogsProcessed": self.logs,
            "totalTxsProcessed": self.txs,
            "totalTxsInternalProcessed": self.txs_internal,
        }

    def add(self, other: Counts) -> None:
        self.delivered += other.delivered
        self.failed += other.failed
        self.logs += other.logs
        self.txs += other.txs
        self.txs_internal += other.txs_internal


@dataclass(frozen=True)
class Transition:
    at: float
    stream_id: str
    status: str
    # The URL's success rate at that moment.
    rate: int


@dataclass
class Action:
    at: float
    kind: str  # status | replay | resend
    stream_id: str
    status: str = ""
    delivery: Delivery | None = None
    error: str = ""


@dataclass
class _Ledger:
    origin: float
    t: float
    next_slot: int
    rates: dict[str, int]
    status: dict[str, str]
    message: dict[str, str]
    since: dict[str, float]
    # When the stream last went into `error` (kept once terminated); None while it has not since it was active.
    error_since: dict[str, float | None]
    counts: dict[str, Counts]
    last_attempt: float | None = None
    transitions: list[Transition] = field(default_factory=list)
    # (time, order key, attempt number, item): scheduled attempts and actions still ahead of `t`.
    heap: list[tuple[float, str, int, Any]] = field(default_factory=list)
    # Block events processed whose sizes (logs, txs, internal txs) are not counted yet: counted when the
    # stats are read, so that walking the history never builds every payload.
    unsized: list[tuple[str, BlockEvent]] = field(default_factory=list)
    sizes: dict[tuple[str, float], tuple[int, int, int]] = field(default_factory=dict)


class StreamsWorld:
    def __init__(self, history: HistoryWorld, *, origin: float) -> None:
        self.history = history
        # When the streams were created: stats count from here, and the history begins here.
        self.origin = origin
        self.by_id: dict[str, Stream] = {s.id: s for s in history.streams}
        self._lock = threading.RLock()
        self._actions: list[Action] = []
        self._ledger: _Ledger | None = None
        self._resends: dict[tuple[str, int], int] = {}
        history.settle = self.settle

    def settle(self, now: float) -> None:
        """Bring the walk up to `now` before the history is read at `now` (never back: what the walk left
        out after `now` is not visible at `now` anyway)."""
        with self._lock:
            if self._ledger is None or now > self._ledger.t:
                self._advance(now)

    # -- reading -----------------------------------------------------------------------------------

    def stream(self, stream_id: str) -> Stream | None:
        return self.by_id.get(stream_id.lower())

    def status(self, stream: Stream, now: float) -> tuple[str, str]:
        with self._lock:
            ledger = self._advance(now)
            return ledger.status[stream.id], ledger.message[stream.id]

    def rate(self, url: str, now: float) -> int:
        with self._lock:
            return self._advance(now).rates[url]

    def transitions(self, now: float) -> list[Transition]:
        with self._lock:
            return list(self._advance(now).transitions)

    def counts(self, now: float) -> tuple[dict[str, Counts], float]:
        """Per-stream counts since the streams were created, and when they last changed."""
        with self._lock:
            ledger = self._advance(now)
            self._count_sizes(ledger)
            copies = {sid: Counts(**vars(c)) for sid, c in ledger.counts.items()}
            return copies, ledger.last_attempt if ledger.last_attempt is not None else ledger.origin

    def render(self, stream: Stream, now: float) -> dict[str, Any]:
        with self._lock:
            ledger = self._advance(now)
            status, message = ledger.status[stream.id], ledger.message[stream.id]
            updated = ledger.since[stream.id]
            error_since = ledger.error_since[stream.id]
        return {
            "id": stream.id,
            "webhookUrl": stream.webhook.url,
            "description": DESCRIPTIONS.get(stream.tag, stream.tag),
            "tag": stream.tag,
            # The configuration a block preview's body is built from (its addresses: GET .../address).
            **configs.config(stream),
            "chainIds": [stream.chain.hex_id],
            "demo": False,
            "status": status,
            "statusMessage": message,
            "updatedAt": iso(updated),
            # DECISION (contract §5): as on the newer stream shapes; null unless in error or terminated.
            "isErrorSince": iso(error_since) if error_since is not None and status != "active" else None,
        }

    # -- actions -----------------------------------------------------------------------------------

    def set_status(self, stream: Stream, status: str, now: float) -> str | None:
        """Apply a status change asked for now; the refusal's text when the provider would refuse it."""
        with self._lock:
            ledger = self._advance(now)
            current = ledger.status[stream.id]
            if current == "terminated":
                return "Stream is terminated and cannot be updated"
            self._act(ledger, Action(now, "status", stream.id, status=status))
            if status == "active" and current != "active":
                self._send_test_webhook(ledger, stream, now)
            return None

    def _send_test_webhook(self, ledger: _Ledger, stream: Stream, now: float) -> None:
        """A reactivated stream gets the provider's test webhook at once (contract §4)."""
        n = sum(1 for d in self.history.extras if d.test and d.event.stream.id == stream.id)
        r = entropy.rng(self.history.seed, "test-webhook", stream.id, n)
        event = BlockEvent(key=f"{stream.id}:test:{n}", stream=stream, number=0, ts=now)
        delivery = Delivery(entropy.uuid4(r), now, event, True, test=True, extra=True)
        self.history.add_extra(delivery)
        self._push_delivery(ledger, delivery)
        self._run(ledger, now)

    def replay(self, stream: Stream, delivery: Delivery, now: float) -> str | None:
        """One new attempt of `delivery` now; the refusal's text when the stream cannot send."""
        with self._lock:
            ledger = self._advance(now)
            refused = _refusal(ledger.status[stream.id])
            if refused:
                return refused
            error = self.history.replay(delivery, now)
            self._act(ledger, Action(now, "replay", stream.id, delivery=delivery, error=error))
            return None

    def resend(self, stream: Stream, number: int, now: float) -> Delivery | str:
        """A new delivery of block `number` to `stream`, made now; or the refusal's text."""
        with self._lock:
            ledger = self._advance(now)
            refused = _refusal(ledger.status[stream.id])
            if refused:
                return refused
            n = self._resends.get((stream.id, number), 0)
            self._resends[(stream.id, number)] = n + 1
            event = self._block_event(stream, number)
            r = entropy.rng(self.history.seed, "resend", stream.id, number, n)
            delivery = Delivery(entropy.uuid4(r), now, event, True, extra=True)
            self.history.add_extra(delivery)
            self._act(ledger, Action(now, "resend", stream.id, delivery=delivery))
            return delivery

    def _block_event(self, stream: Stream, number: int) -> BlockEvent:
        """The block as the stream matched it, delivered or not (so a re-send carries what the stream received
        or would have received: what the block preview shows); a block in which it matched nothing gives an
        event with nothing in it."""
        event = self.history.matching_event(stream, number)
        if event is not None:
            return event
        ts = catalog.block_time(stream.chain, number)
        return BlockEvent(key=f"{stream.id}:{number}", stream=stream, number=number, ts=ts, matched=False)

    def receivers_up(self, now: float, stream: Stream | None = None) -> list[Incident]:
        """The simulator's control: the scripted outages under way end now (of one stream's URL, or all)."""
        with self._lock:
            ledger = self._advance(now)
            ended = self.history.receivers_up(now, stream.webhook.url if stream is not None else None)
            if ended:
                # The walk's own copies of the deliveries with attempts still ahead.
                self.history.forget_attempts(item for _, _, _, item in ledger.heap if isinstance(item, Delivery))
            return ended

    def _act(self, ledger: _Ledger, action: Action) -> None:
        self._actions.append(action)
        if action.kind == "resend":
            assert action.delivery is not None
            self._push_delivery(ledger, action.delivery)
        else:
            heapq.heappush(ledger.heap, (action.at, f"~{len(self._actions):08d}", 0, action))
        self._run(ledger, action.at)

    # -- the walk ----------------------------------------------------------------------------------

    def _advance(self, now: float) -> _Ledger:
        ledger = self._ledger
        if ledger is None or now < ledger.t:
            # A clock set back: walk again from the start, with the actions made so far.
            ledger = self._fresh()
            self._ledger = ledger
        self._run(ledger, now)
        return ledger

    def _fresh(self) -> _Ledger:
        self.history.forget_statuses()
        ledger = _Ledger(
            origin=self.origin,
            t=self.origin,
            # The slot before: its confirmed deliveries may fall after the origin.
            next_slot=int(self.origin // EVENT_SLOT) - 1,
            rates={s.webhook.url: 100 for s in self.history.streams},
            status={s.id: "active" for s in self.history.streams},
            message={s.id: "Stream is active" for s in self.history.streams},
            since={s.id: self.origin for s in self.history.streams},
            error_since={s.id: None for s in self.history.streams},
            counts={s.id: Counts() for s in self.history.streams},
        )
        for n, action in enumerate(self._actions, start=1):
            if action.kind != "resend":
                heapq.heappush(ledger.heap, (action.at, f"~{n:08d}", 0, action))
        by_tag = {s.tag: s for s in self.history.streams}
        for n, scripted in enumerate(scenario.STATUSES):
            stream = by_tag.get(scripted.tag)
            if stream is not None:
                at = max(self.origin, self.history.start + scripted.at)
                heapq.heappush(ledger.heap, (at, f"~s{n:03d}", 0, Action(at, "status", stream.id, scripted.status)))
        return ledger

    def _run(self, ledger: _Ledger, until: float) -> None:
        """Apply every attempt and action up to `until`, generating the hour-slots of deliveries as needed.

        Every attempt of a slot's deliveries falls at or after the slot's start, so once the slots before
        `next_slot` are generated, the heap holds every attempt before `next_slot`'s start.
        """
        while True:
            bound = ledger.next_slot * EVENT_SLOT
            heap = ledger.heap
            while heap and heap[0][0] <= until and heap[0][0] < bound:
                at, _, order, item = heapq.heappop(heap)
                self._terminate_due(ledger, at)
                if isinstance(item, Action):
                    self._apply_action(ledger, item)
                else:
                    self._apply_attempt(ledger, item, order, at)
            if bound > until:
                break
            slot = ledger.next_slot
            ledger.next_slot += 1
            for d in self.history.events_in_slot(slot):
                if d.date >= ledger.origin:
                    self._push_delivery(ledger, d)
            for d in self.history.extras:
                if int(d.date // EVENT_SLOT) == slot and d.date >= ledger.origin:
                    self._push_delivery(ledger, d)
        self._terminate_due(ledger, until)
        ledger.t = max(ledger.t, until)

    def _push_delivery(self, ledger: _Ledger, d: Delivery) -> None:
        for n, (at, _) in enumerate(self.history.attempts(d)):
            heapq.heappush(ledger.heap, (at, d.id, n, d))

    def _apply_attempt(self, ledger: _Ledger, d: Delivery, order: int, at: float) -> None:
        if self.history.cancelled(d, at) or self.history.stopped(d, order):
            return
        attempts = self.history.attempts(d)
        if order >= len(attempts) or attempts[order][0] != at:
            # An outage ended early by the control: this retry is no longer due.
            return
        stream = d.event.stream
        if ledger.status[stream.id] != "active" and not (order == 0 and d.extra):
            # Not processed (contract §5): a new block is not recorded; a retry is not made, nor any after it.
            if order == 0:
                self.history.drop(d)
            else:
                self.history.stop(d, order)
            return
        if order == 0 and not d.test:
            # A block is processed once per delivery; retries send what was built.
            ledger.unsized.append((stream.id, d.event))
        self._count(ledger, stream, at, attempts[order][1])

    def _apply_action(self, ledger: _Ledger, action: Action) -> None:
        stream = self.by_id[action.stream_id]
        if action.kind == "replay":
            self._count(ledger, stream, action.at, action.error)
        elif action.kind == "status":
            current = ledger.status[stream.id]
            if current == "terminated" or current == action.status:
                return
            if action.status == "active" and current == "error":
                ledger.rates[stream.webhook.url] = 100
            self._set(ledger, stream, action.status, action.at)

    def _count(self, ledger: _Ledger, stream: Stream, at: float, error: str) -> None:
        counts = ledger.counts[stream.id]
        url = stream.webhook.url
        if error:
            counts.failed += 1
            ledger.rates[url] = max(0, ledger.rates[url] - 1)
        else:
            counts.delivered += 1
            ledger.rates[url] = min(100, ledger.rates[url] + 1)
        ledger.last_attempt = at
        if ledger.rates[url] < ERROR_THRESHOLD:
            for other in self.history.streams:
                if other.webhook.url == url and ledger.status[other.id] == "active":
                    self._set(ledger, other, "error", at)

    def _set(self, ledger: _Ledger, stream: Stream, status: str, at: float) -> None:
        ledger.status[stream.id] = status
        ledger.since[stream.id] = at
        if status == "error":
            ledger.error_since[stream.id] = at
        elif status != "terminated":
            ledger.error_since[stream.id] = None
        ledger.message[stream.id] = _message(status, stream, ledger.rates[stream.webhook.url])
        ledger.transitions.append(Transition(at, stream.id, status, ledger.rates[stream.webhook.url]))

    def _terminate_due(self, ledger: _Ledger, until: float) -> None:
        for stream in self.history.streams:
            if ledger.status[stream.id] == "error" and ledger.since[stream.id] + TERMINATE_AFTER <= until:
                self._set(ledger, stream, "terminated", ledger.since[stream.id] + TERMINATE_AFTER)

    def _count_sizes(self, ledger: _Ledger) -> None:
        """Add the sizes of the blocks processed since the stats were last read."""
        for stream_id, event in ledger.unsized:
            key = (event.key, event.ts)
            sizes = ledger.sizes.get(key)
            if sizes is None:
                # Built here rather than taken from the history's cache, which serves the records being read.
                payload = build_payload(self.history.seed, event)
                sizes = (len(payload["logs"]), len(payload["txs"]), len(payload["txsInternal"]))
                ledger.sizes[key] = sizes
            counts = ledger.counts[stream_id]
            counts.logs += sizes[0]
            counts.txs += sizes[1]
            counts.txs_internal += sizes[2]
        ledger.unsized = []
        # The two deliveries of a block are counted by then, or soon: keep only the newest blocks' sizes.
        newest = ledger.t - 2 * EVENT_SLOT
        ledger.sizes = {k: v for k, v in ledger.sizes.items() if k[1] >= newest}


def _refusal(status: str) -> str:
    """Why a replay or a re-sent block is refused in this status; "" when it is not."""
    if status == "error":
        return IN_ERROR
    if status == "terminated":
        return TERMINATED
    return ""


def _message(status: str, stream: Stream, rate: int) -> str:
    if status == "error":
        return f"Webhook success rate for {stream.webhook.url} fell below {ERROR_THRESHOLD}% ({rate}%)"
    if status == "terminated":
        return "Stream terminated after 24 hours in error state"
    if status == "paused":
        return "Stream paused by the user"
    return "Stream is active"
