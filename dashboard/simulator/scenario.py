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
)
STATUSES: tuple[ScriptedStatus, ...] = (ScriptedStatus("polygon-erc1155-transfers", -30 * HOUR, "paused"),)
