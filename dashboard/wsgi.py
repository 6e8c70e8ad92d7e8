from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from dashboard.heap import freeze_loaded_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
application = get_wsgi_application()
freeze_loaded_objects()
