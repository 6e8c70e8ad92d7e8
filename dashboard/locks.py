"""Redis locks as leases: one poll per source, one run per provider action, one sender per outbound message.

A lock is a lease: it expires `LOCK_LEASE_SECONDS` after its last renewal, and a heartbeat thread of the
holder renews it every third of that while the holder's work runs. A holder that dies (SIGKILL, the hard
time limit, a lost machine) stops renewing with it, so the next poll gets the lock within one lease; a live
holder keeps it however long its work takes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

import redis
from django.conf import settings

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def redis_client() -> redis.Redis:
    """The Redis connection the locks use (also what the health check pings)."""
    # Short socket timeouts: a Redis that went away fails this run quickly instead of hanging it; the
    # client reconnects by itself on the next command once Redis is back.
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=5, socket_timeout=10, health_check_interval=30
    )


class HeldLock:
    """A lock this process holds, renewed by a heartbeat thread until `_stop()`."""

    def __init__(self, lock: redis.lock.Lock, name: str, lease: float) -> None:
        self._lock = lock
        self._name = name
        self._lease = lease
        self._stopped = threading.Event()
        self._lost = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name=f"lock-heartbeat {name}", daemon=True)
        self._heartbeat.start()

    @property
    def lost(self) -> bool:
        """True once a renewal found the lock gone (it expired, e.g. while Redis was unreachable)."""
        return self._lost.is_set()

    def keep(self) -> bool:
        """Renew the lease now; False when the lock was lost (expired and taken, or Redis unreachable)."""
        if self.lost:
            return False
        try:
            return bool(self._lock.reacquire())
        except redis.exceptions.LockError:
            self._lost.set()
            return False
        except redis.exceptions.RedisError:
            return False

    def _beat(self) -> None:
        # Three renewals per lease: one missed beat (a slow Redis) does not let the lease run out.
        while not self._stopped.wait(self._lease / 3):
            try:
                self._lock.reacquire()
            except redis.exceptions.LockError:
                self._lost.set()
                log.warning("lock %s expired while held: another process may take it", self._name)
                return
            except redis.exceptions.RedisError as exc:
                # Redis is away; the next beat tries again, and the lease covers a short outage.
                log.warning("could not renew lock %s: %s", self._name, exc)

    def _stop(self) -> None:
        self._stopped.set()
        self._heartbeat.join()


@contextmanager
def exclusive(
    name: str, *, lease: float | None = None, wait: float | None = None, on_wait: Callable[[], None] | None = None
) -> Iterator[HeldLock | None]:
    """Yield a HeldLock when this process got the lock, else None. The lock is renewed while the block runs
    and expires `lease` seconds (default `LOCK_LEASE_SECONDS`) after its holder dies. With `wait`, block up
    to that many seconds for it, calling `on_wait` first (so that a person at a terminal knows why nothing
    happens)."""
    lease = float(lease if lease is not None else settings.LOCK_LEASE_SECONDS)
    # Not thread-local: the heartbeat thread renews the token the caller's thread acquired.
    lock = redis_client().lock(f"lock:{name}", timeout=lease, thread_local=False)
    acquired = lock.acquire(blocking=False)
    if not acquired and wait is not None:
        if on_wait is not None:
            on_wait()
        acquired = lock.acquire(blocking=True, blocking_timeout=wait)
    held = HeldLock(lock, name, lease) if acquired else None
    try:
        yield held
    finally:
        if held is not None:
            held._stop()
            try:
                lock.release()
            except redis.exceptions.LockError:
                # Expired and perhaps taken by another worker; theirs to release.
                pass
            except redis.exceptions.RedisError as exc:
                # Redis went away: the lock expires by itself.
                log.warning("could not release lock %s: %s", name, exc)


def is_held(name: str) -> bool:
    """Somebody holds the lock now (a live holder renews it; a dead one's lapses within its lease)."""
    return bool(redis_client().exists(f"lock:{name}"))

