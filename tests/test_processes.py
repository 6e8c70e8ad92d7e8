"""The Procfile, run as an operator runs it (honcho): the web answers, one worker consumes the polls queue
and another the alerts and actions queues, and everything stops on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.celery import app
from tests.checks import subprocess_database_url

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.django_db(transaction=True)
def test_the_procfile_runs_web_two_workers_on_their_queues_and_beat(tmp_path: Path) -> None:
    honcho = shutil.which("honcho", path=str(Path(sys.executable).parent))
    assert honcho, "honcho is a development dependency (pyproject.toml)"
    port = free_port()
    env = {
        **os.environ, "DEBUG": "1", "DATABASE_URL": subprocess_database_url(), "MORALIS_API_KEY": "",
        "BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1", "POLL_CONCURRENCY": "1", "ALERT_CONCURRENCY": "1",
        "BEAT_SCHEDULE_FILE": str(tmp_path / "beat"), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    child = subprocess.Popen([honcho, "start", "-f", "Procfile"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        queues: dict[str, Any] = {}
        healthy = False
        while time.monotonic() < deadline and not (healthy and len(queues) >= 2):
            assert child.poll() is None, child.communicate()[0][-3000:]
            try:
                healthy = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                healthy = False
            replies = app.control.inspect(timeout=1).active_queues() or {}
            queues = {
                name: sorted(q["name"] for q in found)
                for name, found in replies.items()
                if name.startswith(("polls@", "alerts@"))
            }
            time.sleep(0.5)
        assert healthy, "the web process answered /healthz"
        by_kind = {name.split("@")[0]: found for name, found in queues.items()}
        assert by_kind == {"polls": ["polls"], "alerts": ["actions", "alerts"]}
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
    assert child.returncode is not None
    assert "beat" in out


def test_tasks_are_routed_to_their_queues() -> None:
    route = app.amqp.router.route
    assert route({}, "dashboard.polling.tasks.poll_source")["queue"].name == "polls"
    assert route({}, "dashboard.alerts.tasks.send_message")["queue"].name == "alerts"
    assert route({}, "dashboard.actions.tasks.run_action")["queue"].name == "actions"
    # A worker started without -Q consumes every queue.
    assert {q.name for q in app.conf.task_queues} == {"polls", "alerts", "actions"}


def test_the_web_application_freezes_what_start_up_loaded() -> None:
    """wsgi.py leaves the objects of the loaded application out of later garbage collections (dashboard.heap)."""
    script = (
        "import gc; before = gc.get_freeze_count(); import dashboard.wsgi; "
        "print(before, gc.get_freeze_count(), len(gc.get_objects()))"
    )
    env = {**os.environ, "DEBUG": "1", "DATABASE_URL": subprocess_database_url()}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, frozen, tracked = (int(n) for n in done.stdout.split())
    assert before == 0
    # Tens of thousands of objects frozen (Django, the apps, the URL patterns); few left for the collector.
    assert frozen > 20_000 and tracked < frozen / 10, (frozen, tracked)
