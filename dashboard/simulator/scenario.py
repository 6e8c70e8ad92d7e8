"""The scripted world around the scenario's start S: what each stream tells of the product's story.

Everything else (the chain activity, the random incidents, the sporadic failures) is drawn from the seed;
these scripts are placed relative to S (`--scenario-start`, else the start), so a demo shows them at once:

- `usdc-transfers`, `bsc-usdt-payments` (one receiver): active. Its upstream proxy flaps from S-25 min to
  S+15 min (a third of the attempts answer 502): failures that the retries deliver, not enough to put the
  streams in `error`.
- `nft-sales`: active. From S-5 d to S-2.5 d its receiver rejected large payloads (413) for good: a few of
  those days' deliveries used up all their retries.
- `treasury-wallets` (and `avax-deposits`, same receiver): its receiver is down (connection refused) from
  S-10 h; the provider's rule puts the stream in `error` hours before S, after which nothing is sent or
  recorded. The receiver comes back at S + `receiver_back_after` (4 min by default) or when the
  simulator's control asks (`POST /simulator/receivers/up`); the stream stays in `error` until someone
  reactivates it, and then its failed deliveries can be replayed.
- `uniswap-v2-swaps`: active and sliding. A swap rush (about 5 records a minute from S-10 min to S+60 min)
  meets a slow receiver from S to S+40 min (about three attempts in five time out): its URL's success rate
  falls from 100 over the first minutes and crosses 70 some ten to twenty minutes in, when the provider
  puts the stream in `error`.
- `polygon-erc1155-transfers`: paused by its owner at S-30 h; nothing is recorded while it is paused.
- `arbitrum-mints` (with seven streams or more): its receiver's certificate expired from S-28 h to S-20 h
  (a mint at S-28 h); the stream went into `error` and was `terminated` 24 h later, some 4 h before S. Nothing is recorded
  after that.

Completeness (contract §5): what arrives late, what never arrives, and what was never there.

- `uniswap-v2-swaps`, an address reload: at S-6 min its owner adds a pair (the USDC/USDT pool, no swaps on it
  yet); the provider's reload lasts two minutes, and the rush's blocks mined then (one in two, about five) are
  neither sent nor recorded while the stream stays `active`. The block preview still answers them.
- `nft-sales`, a slow period: a drop's sales (one block in eight from S-3 min to S+10 min) meet a provider that
  lags: deliveries due from S+1 min to S+9 min go out minutes late (up to about 7 min at S+5 min), the
  latency spike.
- `bsc-usdt-payments`, quiet hours: its contract emits nothing from S-50 min to S+10 min, and for an hour now
  and then (drawn from the seed, about one six-hour stretch in four). Not an outage: the stream is `active`,
  there is simply nothing to send, and the block preview answers null for those blocks.
- `treasury-wallets`, an outage with missing blocks: every block it matched since the provider put it in
  `error` (some 9 h before S) was neither sent nor recorded; the preview answers them, `block-to-webhook`
  brings one back.
- Dense and sparse streams: the streams share the chain activity by weight (`usdc-transfers` most, then
  `nft-sales` and `uniswap-v2-swaps`; `bsc-usdt-payments`, `avax-deposits` a few blocks a day at the default
  rate), and the bursts make a stream dense for a while (the swap rush matches one block in two).

Random incidents fail only a share of attempts (below one half), so they never take a URL below 70 on their
own: a stream leaves `active` only where a script says so, or by the user's hand.
"""

from __future__ import annotations

from dataclasses import dataclass

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
# When the receiver that is down at the start comes back, by default.
RECEIVER_BACK_AFTER = 4 * MINUTE


@dataclass(frozen=True)
class Outage:
    """A scripted incident on the webhook URL `WEBHOOKS[url_index]`, in seconds from S."""

    url_index: int
    start: float
    # None: until the receiver comes back (S + receiver_back_after, or the control).
    end: float | None
    kind: str
    status_code: int = 0
    # Share of attempts that fail; with `per_delivery`, the share of deliveries whose every attempt fails.
    share: float = 1.0
    per_delivery: bool = False


@dataclass(frozen=True)
class Burst:
    """Extra chain activity of one stream: one block in `every` of its chain from `start` to `end` (from S)."""

    tag: str
    start: float
    end: float
    every: int


@dataclass(frozen=True)
class Reload:
    """An address reload of one stream from `start` to `end` (from S): its matching blocks mined then are missed
    (neither sent nor recorded) while it stays `active`. `added` is the address its owner added."""

    tag: str
    start: float
    end: float
    added: str


@dataclass(frozen=True)
class SlowPeriod:
    """The provider lags on one stream: a delivery whose first attempt was due from `start` to `end` (from S)
    goes out late, by up to `peak` seconds in the middle of the period."""

    tag: str
    start: float
    end: float
    peak: float


@dataclass(frozen=True)
class Quiet:
    """A stream whose contract goes quiet: nothing to match for an hour from each of `scripted` (from S), and
    for an hour in a six-hour stretch with chance `chance` (drawn from the seed)."""

    tag: str
    scripted: tuple[float, ...]
    chance: float
    length: float = HOUR


@dataclass(frozen=True)
class ScriptedStatus:
    """A status change of one stream at S + `at`, as its owner (or the provider) made it."""

    tag: str
    at: float
    status: str


OUTAGES: tuple[Outage, ...] = (
    Outage(0, -25 * MINUTE, 15 * MINUTE, "status5xx", 502, share=0.33),
    Outage(1, -5 * DAY, -2.5 * DAY, "status4xx", 413, share=0.08, per_delivery=True),
    Outage(2, -10 * HOUR, None, "refused"),
    Outage(4, 0.0, 40 * MINUTE, "timeout", share=0.62),
    Outage(3, -28 * HOUR, -20 * HOUR, "cert"),
)
BURSTS: tuple[Burst, ...] = (
    # The treasury's hourly sweep while its receiver is down: enough failures for the provider's rule at any
    # rate of chain activity.
    Burst("treasury-wallets", -10 * HOUR, -9 * HOUR, 30),
    Burst("uniswap-v2-swaps", -10 * MINUTE, 60 * MINUTE, 2),
    # A mint while the certificate had expired: the failures that put the stream in `error`.
    Burst("arbitrum-mints", -28 * HOUR, -27 * HOUR, 230),
    # A drop's sales while the provider lags on them (SLOW below).
    Burst("nft-sales", -3 * MINUTE, 10 * MINUTE, 8),
)
# A pair with no swaps yet (the USDC/USDT pool): adding it starts the reload.
ADDED_PAIR = "0x3041cbd36888becc7bbcbc0045e3b1f144466f5f"
RELOADS: tuple[Reload, ...] = (Reload("uniswap-v2-swaps", -6 * MINUTE, -4 * MINUTE, ADDED_PAIR),)
SLOW: tuple[SlowPeriod, ...] = (SlowPeriod("nft-sales", 1 * MINUTE, 9 * MINUTE, 7 * MINUTE),)
QUIET: tuple[Quiet, ...] = (Quiet("bsc-usdt-payments", (-50 * MINUTE,), 0.25),)
STATUSES: tuple[ScriptedStatus, ...] = (ScriptedStatus("polygon-erc1155-transfers", -30 * HOUR, "paused"),)
