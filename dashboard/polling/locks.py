"""Locks that keep one poll per source running across any number of workers and beats."""

from __future__ import annotations

import logging
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
    """A lock this process holds; `keep()` pushes its expiry out again during long work."""

    def __init__(self, lock: redis.lock.Lock, timeout: float) -> None:
        self._lock = lock
        self._timeout = timeout

    def keep(self) -> bool:
        """Renew the expiry; False when the lock was lost (expired and taken, or Redis unreachable)."""
        try:
            return bool(self._lock.reacquire())
        except (redis.exceptions.LockError, redis.exceptions.RedisError):
            return False


@contextmanager
def exclusive(
    name: str, *, timeout: float, wait: float | None = None, on_wait: Callable[[], None] | None = None
) -> Iterator[HeldLock | None]:
    """Yield a HeldLock when this process got the lock, else None. It expires `timeout` s after the last
    renewal if its holder dies. With `wait`, block up to that many seconds for it, calling `on_wait` first
    (so that a person at a terminal knows why nothing happens)."""
    lock = redis_client().lock(f"lock:{name}", timeout=timeout)
    acquired = lock.acquire(blocking=False)
    if not acquired and wait is not None:
        if on_wait is not None:
            on_wait()
        acquired = lock.acquire(blocking=True, blocking_timeout=wait)
    try:
        yield HeldLock(lock, timeout) if acquired else None
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                # Expired and perhaps taken by another worker; theirs to release.
                pass
            except redis.exceptions.RedisError as exc:
                # Redis went away: the lock expires by itself.
                log.warning("could not release lock %s: %s", name, exc)


def source_lock_name(source_id: int) -> str:
    return f"poll:{source_id}"
