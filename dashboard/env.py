"""Typed readers for settings that come from environment variables.

Every reader fails loudly with the variable's name and what was wrong, so a bad value stops
the process at start instead of surfacing later as an odd failure.
"""

from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network, ip_network
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured


class ImproperlyConfiguredEnv(ImproperlyConfigured):
    """A settings variable is missing or malformed."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        value = default
    else:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfiguredEnv(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfiguredEnv(f"{name} must be at most {maximum}, got {value}")
    return value


def env_percent(name: str, default: float) -> float:
    """A percentage strictly between 0 and 100 (an objective such as 99.9)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be a percentage such as 99.9, got {raw!r}") from None
    if not 0 < value < 100:
        raise ImproperlyConfiguredEnv(f"{name} must be above 0 and below 100, got {raw!r}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default) or default
    if value not in choices:
        raise ImproperlyConfiguredEnv(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_pairs(name: str) -> dict[str, str]:
    """Comma-separated `key=value` pairs (`ops-admins=Staff,ops=Viewers`); a key may itself hold `=`."""
    pairs: dict[str, str] = {}
    for item in env_list(name, []):
        key, sep, value = item.rpartition("=")
        if not sep or not key.strip() or not value.strip():
            raise ImproperlyConfiguredEnv(f"{name} must list name=value pairs separated by commas, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def env_networks(name: str) -> list[IPv4Network | IPv6Network]:
    """A comma-separated list of networks in CIDR notation (a bare address is a network of one)."""
    networks: list[IPv4Network | IPv6Network] = []
    for item in env_list(name, []):
        try:
            networks.append(ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfiguredEnv(f"{name} must list networks such as 10.0.0.0/8, got {item!r}") from None
    return networks


def env_fernet_keys(name: str) -> list[str]:
    """Comma-separated Fernet keys (the first encrypts, all decrypt, so a key can be rotated in)."""
    from cryptography.fernet import Fernet

    keys = env_list(name, [])
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            # Never echo a key, not even a malformed one.
            raise ImproperlyConfiguredEnv(
                f"{name}: key {position} is not a Fernet key (32 url-safe base64-encoded bytes; "
                "make one with: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
            ) from None
    return keys


def env_url(name: str, default: str, *, schemes: tuple[str, ...] = ("http", "https")) -> str:
    raw = env_str(name, default)
    parts = urlsplit(raw)
    if parts.scheme not in schemes or not parts.netloc:
        allowed = " or ".join(f"{s}://" for s in schemes)
        # The value may carry credentials: name the variable, not its content.
        raise ImproperlyConfiguredEnv(f"{name} must be a URL starting with {allowed} and naming a host")
    return raw.rstrip("/")


def env_archive_url(name: str) -> str:
    """Where expired deliveries are archived: empty (no archive), `file:///absolute/path` or
    `s3://bucket/prefix`. Credentials never go in it (S3's come from the environment)."""
    raw = env_str(name)
    if not raw:
        return ""
    parts = urlsplit(raw)
    if "@" in parts.netloc:
        # The value may carry a secret: name the variable, not its content.
        raise ImproperlyConfiguredEnv(f"{name} must not carry credentials (S3 keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
    if parts.scheme == "file" and not parts.netloc and parts.path.startswith("/") and parts.path != "/":
        return raw.rstrip("/")
    if parts.scheme == "s3" and parts.netloc:
        return raw.rstrip("/")
    raise ImproperlyConfiguredEnv(f"{name} must be file:///absolute/path or s3://bucket/prefix, got {raw!r}")


# Scheme: (EMAIL_USE_TLS, EMAIL_USE_SSL).
_EMAIL_SCHEMES = {
    "smtp": (False, False),
    "submission": (True, False),
    "smtp+tls": (True, False),
    "smtps": (False, True),
}


def env_email_url(name: str) -> dict[str, object]:
    """EMAIL_HOST, EMAIL_PORT, credentials and TLS flags from one URL such as smtp://user:pass@host:587.

    smtp:// is plain (port 25), submission:// and smtp+tls:// use STARTTLS (587), smtps:// implicit TLS
    (465). An empty variable gives an empty dict, so the separate EMAIL_* variables apply.
    """
    from urllib.parse import unquote

    raw = env_str(name)
    if not raw:
        return {}
    parts = urlsplit(raw)
    if parts.scheme not in _EMAIL_SCHEMES or not parts.hostname:
        allowed = ", ".join(f"{s}://" for s in _EMAIL_SCHEMES)
        # The value may carry a password: name the variable, not its content.
        raise ImproperlyConfiguredEnv(f"{name} must be a URL starting with {allowed} and naming a host")
    use_tls, use_ssl = _EMAIL_SCHEMES[parts.scheme]
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} has a port that is not a number") from None
    return {
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": port or (465 if use_ssl else 587 if use_tls else 25),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": use_tls,
        "EMAIL_USE_SSL": use_ssl,
    }
