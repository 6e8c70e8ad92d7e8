"""Settings for the stream-delivery dashboard. Every value comes from the environment; see README."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from kombu import Queue

from dashboard.env import (
    ImproperlyConfiguredEnv,
    env_archive_url,
    env_bool,
    env_choice,
    env_email_url,
    env_fernet_keys,
    env_int,
    env_list,
    env_networks,
    env_pairs,
    env_percent,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfiguredEnv("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG-on"
# Fernet keys for secrets stored in the database (API keys, alert channels' URLs and secrets), newest first;
# see dashboard/encryption.py.
ENCRYPTION_KEYS = env_fernet_keys("ENCRYPTION_KEYS")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1"] if DEBUG else [])
SITE_URL = env_url("SITE_URL", "http://localhost:8000")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [SITE_URL])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "dashboard.accounts",
    # In the order data flows: sources -> stored deliveries -> polling -> alerts, pages and lookups.
    "dashboard.sources",
    "dashboard.deliveries",
    "dashboard.polling",
    # Replays and status changes at the provider: rows, their worker and the audit.
    "dashboard.actions",
    # Maintenance windows: when a stream, a tag or everything owes nothing.
    "dashboard.expectations",
    "dashboard.alerts",
    "dashboard.web",
    "dashboard.lookups",
    "dashboard.devtools",
    # /api/v1/ and its tokens: above every app it reads.
    "dashboard.api",
    # Its docs page's Swagger UI from our own static files (the CSP allows no other host).
    "ninja",
    "csp",
    # Failed logins per username and per client address, on the dashboard's login and the admin's alike.
    "axes",
]

MIDDLEWARE = [
    # First: every line logged while a request is served carries its id.
    "dashboard.log_context.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Narrows every read of the request to the streams the user sees (dashboard.visibility).
    "dashboard.deliveries.teams.VisibilityMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a login refused for a lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# AxesBackend first: it refuses a locked-out username or address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # ModelBackend's checks, refusing passwords when LOCAL_LOGIN is off (break-glass accounts excepted).
    "dashboard.accounts.backends.PasswordBackend",
    "dashboard.accounts.oidc.OidcBackend",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.web.context_processors.sync_banner",
                "dashboard.alerts.context_processors.open_incidents",
                "dashboard.replica.replica_notice",
            ],
            # The `iso`, `iso_minutes` and `visible` filters in every template (pages, mails, admin) without
            # a load.
            "builtins": ["dashboard.times", "dashboard.text"],
        },
    },
]

_database_url = env_url(
    "DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/stream_dashboard", schemes=("postgres", "postgresql")
)
DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
# Lets parallel test runs on one server keep apart (e.g. TEST_DATABASE_NAME=test_dashboard_2).
if env_str("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
# An optional streaming replica of that database: the pages marked `@reads_replica` read the stored history from
# it while it is at most REPLICA_MAX_LAG_SECONDS behind; everything else, and every write, uses the primary
# (dashboard/replica.py). Unset: everything reads the primary.
if env_str("DATABASE_REPLICA_URL"):
    _replica_url = env_url("DATABASE_REPLICA_URL", "", schemes=("postgres", "postgresql"))
    DATABASES["replica"] = dj_database_url.parse(_replica_url, conn_max_age=60, conn_health_checks=True)
    # A replica host that is down must not hold a page for long: the page reads the primary instead.
    DATABASES["replica"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
    # Tests create no database on the replica (it is read-only): the alias reads the test database.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["dashboard.replica.ReplicaRouter"]
REPLICA_MAX_LAG_SECONDS = env_int("REPLICA_MAX_LAG_SECONDS", 30, minimum=1, maximum=86400)
# A page read from a replica at least this far behind says so in a banner.
REPLICA_LAG_NOTICE_SECONDS = env_int("REPLICA_LAG_NOTICE_SECONDS", 5, minimum=0, maximum=86400)

REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss", "unix"))
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "dash"),
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# A session ends this long after login (not extended by activity), and with the browser when it closes.
SESSION_COOKIE_AGE = env_int("SESSION_MAX_AGE_SECONDS", 12 * 3600, minimum=300, maximum=90 * 86400)
SESSION_EXPIRE_AT_BROWSER_CLOSE = env_bool("SESSION_EXPIRE_AT_BROWSER_CLOSE", False)
LOGIN_REDIRECT_URL = "web:overview"
LOGOUT_REDIRECT_URL = "/accounts/login/?logged_out=1"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
# Every datetime printed without an explicit format (the admin's lists and read-only fields) is ISO with the
# zone named, like the dashboard pages: dashboard/times.py.
FORMAT_MODULE_PATH = ["dashboard.formats"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
_SERVED_OVER_HTTPS = not DEBUG and SITE_URL.startswith("https://")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _SERVED_OVER_HTTPS)
# gunicorn speaks plain HTTP, so an https SITE_URL means a proxy terminates TLS; its X-Forwarded-Proto is how
# Django tells an https request from a plain one (the proxy must set it, overwriting what a client sent).
if env_bool("SECURE_PROXY_SSL_HEADER", _SERVED_OVER_HTTPS):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _SERVED_OVER_HTTPS)
# Load balancers probe the health endpoints, and Prometheus scrapes, over plain HTTP and follow no redirects.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
# HSTS covers this host only unless asked; other hosts of the domain may still need plain HTTP.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 86400 if _SERVED_OVER_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Content-Security-Policy (django-csp): scripts and styles come only from our static files, never inline.
# Images may come from anywhere on the web: NFT thumbnails on the lookup pages are third-party URLs.
# The HTML part of an alert mail is shown in a frame of its own URL with a policy of its own
# (dashboard/alerts/views.py), since mail HTML needs inline styles.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:", "https:", "http:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "frame-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT failed logins for one username, or from one
# client address, further logins of that username or from that address are refused, even with the right
# password, for LOGIN_LOCKOUT_MINUTES, with the page templates/registration/locked_out.html and HTTP 429.
# A successful login clears the username's failures. Staff lift a lockout earlier in the admin
# (Axes → Access attempts) or with `manage.py axes_reset_username USERNAME` / `axes_reset_ip ADDRESS`.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1, maximum=1000)
# The API (/api/v1/): calls per minute per token (a session counts as its user), answered 429 with
# Retry-After beyond; the longest a token may be made to last.
API_RATE_PER_MINUTE = env_int("API_RATE_PER_MINUTE", 120, minimum=1, maximum=100_000)
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365, minimum=1, maximum=3650)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1, maximum=7 * 24 * 60))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# Behind PROXY_COUNT proxies that append to X-Forwarded-For, the client address is the entry that many
# places from the right; with none, the connection's own address.
PROXY_COUNT = env_int("PROXY_COUNT", 0, minimum=0, maximum=5)
AXES_CLIENT_IP_CALLABLE = "dashboard.client_address.client_address"

# Sign-in with the company's identity provider (OpenID Connect, mozilla-django-oidc; dashboard/accounts/oidc.py):
# on when OIDC_DISCOVERY_URL is set. The client secret comes from the environment only and is never stored.
OIDC_DISCOVERY_URL = env_url("OIDC_DISCOVERY_URL", "") if env_str("OIDC_DISCOVERY_URL") else ""
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
if OIDC_DISCOVERY_URL and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfiguredEnv("OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set with OIDC_DISCOVERY_URL")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME") or "your identity provider"
OIDC_RP_SCOPES = env_str("OIDC_SCOPES") or "openid email profile groups"
if "openid" not in OIDC_RP_SCOPES.split():
    raise ImproperlyConfiguredEnv("OIDC_SCOPES must include openid")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM") or "groups"
# group=Role pairs; the role names are checked against the roles when the accounts app starts.
OIDC_ROLE_MAP = env_pairs("OIDC_ROLE_MAP")
# group=Team name pairs: a sign-in puts the user in exactly the mapped teams (teams added by hand are kept),
# making a team that does not exist yet.
OIDC_TEAM_MAP = env_pairs("OIDC_TEAM_MAP")
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
# Kept in the session for the provider's logout (id_token_hint).
OIDC_STORE_ID_TOKEN = True
OIDC_TIMEOUT = 10
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
BREAK_GLASS_USERS = env_list("BREAK_GLASS_USERS", [])
if not LOCAL_LOGIN and not OIDC_DISCOVERY_URL:
    raise ImproperlyConfiguredEnv("LOCAL_LOGIN=0 needs OIDC_DISCOVERY_URL: nobody could log in otherwise")
if OIDC_DISCOVERY_URL:
    # Logging out POSTs a form that redirects to the provider's end-session endpoint: allow its origin.
    _oidc_origin = "{0.scheme}://{0.netloc}".format(urlsplit(OIDC_DISCOVERY_URL))
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(_oidc_origin)

# Upstream (Moralis). Defaults are the real provider; the demo points them at the simulator.
MORALIS_API_KEY = env_str("MORALIS_API_KEY")
MORALIS_STREAMS_BASE_URL = env_url("MORALIS_STREAMS_BASE_URL", "https://api.moralis-streams.com")
MORALIS_EVM_BASE_URL = env_url("MORALIS_EVM_BASE_URL", "https://deep-index.moralis.io")
MORALIS_APTOS_MAINNET_BASE_URL = env_url("MORALIS_APTOS_MAINNET_BASE_URL", "https://mainnet-aptos-api.moralis.io")
MORALIS_APTOS_TESTNET_BASE_URL = env_url("MORALIS_APTOS_TESTNET_BASE_URL", "https://testnet-aptos-api.moralis.io")
UPSTREAM_CONNECT_TIMEOUT = env_int("UPSTREAM_CONNECT_TIMEOUT", 5, minimum=1, maximum=60)
UPSTREAM_READ_TIMEOUT = env_int("UPSTREAM_READ_TIMEOUT", 30, minimum=1, maximum=600)
UPSTREAM_MAX_RETRIES = env_int("UPSTREAM_MAX_RETRIES", 4, minimum=0, maximum=10)

# Ingestion
POLL_INTERVAL_SECONDS = env_int("POLL_INTERVAL_SECONDS", 15, minimum=1, maximum=3600)
HISTORY_PAGE_SIZE = env_int("HISTORY_PAGE_SIZE", 100, minimum=1, maximum=100)
HISTORY_RETENTION_DAYS = env_int("HISTORY_RETENTION_DAYS", 90, minimum=8)
# Hourly rollups outlive the deliveries they count, so long-range charts keep working.
ROLLUP_RETENTION_DAYS = env_int("ROLLUP_RETENTION_DAYS", 400, minimum=HISTORY_RETENTION_DAYS)
RETENTION_BATCH_SIZE = env_int("RETENTION_BATCH_SIZE", 5000, minimum=100, maximum=100_000)
# Cold history (deliveries/archive.py): each expired day is exported to Parquet here, and re-read and checked
# against the database, before retention may delete it. Empty: no archive, retention deletes as before.
ARCHIVE_URL = env_archive_url("ARCHIVE_URL")
# An S3-compatible store's address (http://127.0.0.1:9000); empty: AWS S3 itself.
ARCHIVE_S3_ENDPOINT = env_url("ARCHIVE_S3_ENDPOINT", "") if env_str("ARCHIVE_S3_ENDPOINT") else ""
ARCHIVE_S3_REGION = env_str("ARCHIVE_S3_REGION", "us-east-1")
# How long the deliveries list and the admin may spend counting a filter's matches before they show the
# planner's estimate instead (a rare value spread over the whole table).
COUNT_BUDGET_MS = env_int("COUNT_BUDGET_MS", 50, minimum=1, maximum=10_000)
# The provider's last attempt at a failed delivery comes 45 h 11 min after its first (1 min, 10 min, 1 h, 2 h,
# 6 h, 12 h and 24 h apart; deliveries/schedule.py): that window, with room for a late revisit, is re-read in full
# every REVISIT_INTERVAL_SECONDS so that records changed in place are updated up to their final state.
RETRY_WINDOW_HOURS = env_int("RETRY_WINDOW_HOURS", 46, minimum=1, maximum=24 * 7)
REVISIT_INTERVAL_SECONDS = env_int("REVISIT_INTERVAL_SECONDS", 300, minimum=10, maximum=86400)
# A poll spends at most this long on the revisit; an unfinished revisit continues at the next poll, after its
# head walk, so new records wait at most about a poll interval plus this while a long window is re-read.
REVISIT_SLICE_SECONDS = env_int("REVISIT_SLICE_SECONDS", 30, minimum=1, maximum=3600)
# How long past a chain's usual finality a block's confirmed delivery may lag before it counts as missing.
CONFIRMATION_GRACE_SECONDS = env_int("CONFIRMATION_GRACE_SECONDS", 600, minimum=0, maximum=86400)
# The provider's stream list (status, message) and stats are read with the poll, at most this often.
STREAM_SYNC_SECONDS = env_int("STREAM_SYNC_SECONDS", 60, minimum=1, maximum=86400)
# The poll, backfill, retention and action locks are leases renewed by their holder's heartbeat every third
# of this: a dead holder's lock frees this long after it died, a live one keeps it for as long as it works.
LOCK_LEASE_SECONDS = env_int("LOCK_LEASE_SECONDS", 30, minimum=3, maximum=3600)

# Actions at the provider (replays, stream status changes, re-sent blocks). Off: a read-only installation,
# with no buttons and every action URL answering 403.
PROVIDER_WRITES = env_bool("PROVIDER_WRITES", True)
# The most deliveries one bulk replay may target; a filter matching more is refused with a message.
REPLAY_MAX_DELIVERIES = env_int("REPLAY_MAX_DELIVERIES", 1000, minimum=1, maximum=100_000)
# A prepared action must be confirmed within this many minutes, else it is prepared again.
ACTION_CONFIRM_MINUTES = env_int("ACTION_CONFIRM_MINUTES", 30, minimum=1, maximum=1440)
# Finding a window's missing blocks previews each of its blocks once (the block preview costs like a history
# page): one scan may cost at most BLOCK_PREVIEW_PER_REQUEST previews, and all scans together at most
# BLOCK_PREVIEW_PER_DAY per UTC day; a scan that meets the day's limit waits for the next day.
BLOCK_PREVIEW_PER_REQUEST = env_int("BLOCK_PREVIEW_PER_REQUEST", 20_000, minimum=1, maximum=1_000_000)
BLOCK_PREVIEW_PER_DAY = env_int("BLOCK_PREVIEW_PER_DAY", 50_000, minimum=1, maximum=10_000_000)
# The completeness audit (actions/audit.py): blocks previewed per active EVM stream per day, at random among the
# previous day's final blocks, counted against BLOCK_PREVIEW_PER_DAY; 0 turns it off.
COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY = env_int(
    "COMPLETENESS_AUDIT_BLOCKS_PER_STREAM_PER_DAY", 6, minimum=0, maximum=10_000
)

# Mail. EMAIL_URL (smtp://, submission://, smtps://) wins over the separate EMAIL_* variables.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
_email = env_email_url("EMAIL_URL")
EMAIL_HOST = str(_email.get("EMAIL_HOST") or env_str("EMAIL_HOST", "localhost"))
EMAIL_PORT = int(str(_email.get("EMAIL_PORT") or env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)))
EMAIL_HOST_USER = str(_email.get("EMAIL_HOST_USER") if _email else env_str("EMAIL_HOST_USER"))
EMAIL_HOST_PASSWORD = str(_email.get("EMAIL_HOST_PASSWORD") if _email else env_str("EMAIL_HOST_PASSWORD"))
EMAIL_USE_TLS = bool(_email.get("EMAIL_USE_TLS") if _email else env_bool("EMAIL_USE_TLS", False))
EMAIL_USE_SSL = bool(_email.get("EMAIL_USE_SSL") if _email else env_bool("EMAIL_USE_SSL", False))
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfiguredEnv("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be on")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 20, minimum=1, maximum=300)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Stream Dashboard <alerts@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# Alerts
ALERT_EMAILS = env_list("ALERT_EMAILS", [])
# The team that owns every stream no team claims (by id or tag pattern); empty: such streams are seen only by
# the roles that see every stream.
DEFAULT_TEAM = env_str("DEFAULT_TEAM")
ALERT_MAX_MAILS_PER_HOUR = env_int("ALERT_MAX_MAILS_PER_HOUR", 30, minimum=1)
ALERT_SWEEP_SECONDS = env_int("ALERT_SWEEP_SECONDS", 30, minimum=5, maximum=3600)
# Quiet streams: a stream's expected deliveries per hour of the week, learned from this many weeks of its hourly
# rollups; no verdict before it has QUIET_MIN_HISTORY_DAYS of history, or where fewer than QUIET_MIN_EXPECTED
# deliveries were expected in the window.
QUIET_BASELINE_WEEKS = env_int("QUIET_BASELINE_WEEKS", 4, minimum=1, maximum=12)
QUIET_MIN_HISTORY_DAYS = env_int("QUIET_MIN_HISTORY_DAYS", 14, minimum=1, maximum=84)
QUIET_MIN_EXPECTED = env_int("QUIET_MIN_EXPECTED", 5, minimum=1)
# Service level objectives, every stream's unless it has its own (`expectations.StreamObjective`, in the admin):
# the share of deliveries delivered (`first_attempt`: on the first attempt; `eventually`: at all, a delivery still
# retrying counting against it until it is delivered), and the share of unconfirmed deliveries whose processing
# latency is at most SLO_LATENCY_SECONDS; each over the last SLO_WINDOW_DAYS days.
SLO_DELIVERY = env_choice("SLO_DELIVERY", "eventually", ("eventually", "first_attempt"))
SLO_DELIVERY_TARGET = env_percent("SLO_DELIVERY_TARGET", 99.9)
SLO_LATENCY_SECONDS = env_int("SLO_LATENCY_SECONDS", 60, minimum=1, maximum=3600)
SLO_LATENCY_TARGET = env_percent("SLO_LATENCY_TARGET", 99.0)
SLO_WINDOW_DAYS = env_int("SLO_WINDOW_DAYS", 30, minimum=1, maximum=90)

# Prometheus metrics at /metrics: a scrape must carry `Authorization: Bearer <METRICS_TOKEN>` or come from
# one of METRICS_ALLOWED_NETWORKS; anything else is refused (403). Processes share counters through the
# directory in the PROMETHEUS_MULTIPROC_DIR environment variable (read by prometheus-client itself).
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_NETWORKS = env_networks("METRICS_ALLOWED_NETWORKS")

# Celery: a broker is always configured; tests run tasks eagerly only where they say so.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240, minimum=10)
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 60
# A poll stops taking new pages this long into a task; its checkpoint carries on in the next run.
POLL_TIME_BUDGET_SECONDS = max(5, CELERY_TASK_SOFT_TIME_LIMIT - 40)
# With late acks, a task still running when the broker connection drops is redelivered: stop it then.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# Workers log through LOGGING (LOG_FORMAT), with the task id on each line, rather than Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Three queues, so that work of one kind never waits behind another: `polls` (polling, stream sync,
# retention), `alerts` (evaluation and mail) and `actions` (writes to the provider). A worker started without
# -Q consumes all three; on several hosts each can have workers of its own (`-Q polls`, `-Q alerts,actions`),
# so a mail storm or a long bulk replay never delays polling.
CELERY_TASK_QUEUES = (Queue("polls"), Queue("alerts"), Queue("actions"))
CELERY_TASK_DEFAULT_QUEUE = "polls"
CELERY_TASK_ROUTES = {
    "dashboard.polling.tasks.*": {"queue": "polls"},
    "dashboard.alerts.tasks.*": {"queue": "alerts"},
    "dashboard.actions.tasks.*": {"queue": "actions"},
}
CELERY_BEAT_SCHEDULE = {
    "poll-history-head": {
        "task": "dashboard.polling.tasks.poll_all_sources",
        "schedule": float(POLL_INTERVAL_SECONDS),
        "options": {"expires": float(POLL_INTERVAL_SECONDS)},
    },
    "enforce-retention": {
        "task": "dashboard.polling.tasks.enforce_retention",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Time-based alert conditions (staleness, grace periods, digests) and mails whose task was lost.
    "sweep-alerts": {
        "task": "dashboard.alerts.tasks.sweep_alerts",
        "schedule": float(ALERT_SWEEP_SECONDS),
        "options": {"expires": float(ALERT_SWEEP_SECONDS)},
    },
    # The day's completeness audits, made at the first run after the previous day's blocks are final; the runs
    # after it find them made.
    "audit-completeness": {
        "task": "dashboard.actions.tasks.audit_completeness",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}

# `text` (default) or `json`: one JSON object a line, with the request id (web) and the task id (workers).
LOG_FORMAT = env_str("LOG_FORMAT", "text").lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfiguredEnv(f"LOG_FORMAT must be text or json, got {LOG_FORMAT[:20]!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "dashboard.log_context.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(task_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
        # Apprise's own messages can quote a channel's URL or token; dashboard.alerts.channels captures
        # them per send, scrubs the secrets and records them on the delivery row instead.
        "apprise": {"level": "WARNING", "handlers": [], "propagate": False},
    },
}
