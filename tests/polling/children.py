"""manage.py commands in a child process on the test database, for tests that interrupt or kill them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dashboard.polling.models import HistoryWalk
from dashboard.sources.models import Source
from tests.checks import subprocess_database_url

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.Popen[str]:
    """A manage.py command in a child process on the test database, its output (both streams) as text."""
    environment = {**os.environ, "DEBUG": "1", "DATABASE_URL": subprocess_database_url(),
                   "MORALIS_API_KEY": "", "PYTHONUNBUFFERED": "1", **env}
    # Ctrl-C as a terminal sends it: a test run started in the background (`make test &`) ignores SIGINT, and a
    # child would inherit that and never see the signal the tests send.
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_walk_pages(source: Source, kind: str, pages: int, child: subprocess.Popen[str]) -> None:
    """Until the child has stored `pages` pages of its walk of `kind` (checkpointed with each page)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        walk = HistoryWalk.objects.filter(source=source, kind=kind).first()
        if walk is not None and walk.pages >= pages:
            return
        if child.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail(f"the {kind} walk did not progress: {child.stdout.read() if child.stdout else ''}")
