"""The simulator's clock: real time scaled by a speed factor, and explicitly steppable."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


class SimClock:
    """Simulated now = anchor + (real elapsed) × speed + explicit advances. Thread-safe."""

    def __init__(
        self,
        start: datetime | None = None,
        speed: float = 1.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._anchor = (start or datetime.now(UTC)).timestamp()
        self._anchor_real = monotonic()
        self._speed = speed

    def timestamp(self) -> float:
        with self._lock:
            return self._anchor + (self._monotonic() - self._anchor_real) * self._speed

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp(), UTC)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._anchor += seconds

    def set(self, when: datetime) -> None:
        with self._lock:
            self._anchor = when.timestamp()
            self._anchor_real = self._monotonic()

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        if value < 0:
            raise ValueError("speed must be >= 0")
        # Re-anchor so the change applies from now on and time never jumps.
        now = self.timestamp()
        with self._lock:
            self._anchor = now
            self._anchor_real = self._monotonic()
            self._speed = value
