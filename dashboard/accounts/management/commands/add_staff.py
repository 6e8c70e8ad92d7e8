"""`manage.py add_staff USERNAME EMAIL [--password P]`: a login for the admin (sources, alert rules)."""

from __future__ import annotations

from dashboard.accounts.management.commands import add_viewer
from dashboard.accounts.roles import STAFF


class Command(add_viewer.Command):
    help = (
        "Create a staff member: reads the dashboard and uses the admin (sources, alert rules, incidents), "
        "without superuser rights. Asks for the password unless --password is given."
    )
    role = STAFF
