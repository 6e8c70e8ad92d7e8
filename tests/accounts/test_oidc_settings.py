"""The identity provider's settings are read from the environment and fail loudly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dashboard.env import ImproperlyConfiguredEnv, env_pairs
from tests.test_settings import ROOT, run_check

PROVIDER = {
    "OIDC_DISCOVERY_URL": "https://sso.example.com/.well-known/openid-configuration",
    "OIDC_CLIENT_ID": "dashboard",
    "OIDC_CLIENT_SECRET": "s3cret-from-the-provider",
}


def test_the_role_map_reads_group_role_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    # A group name may hold "=" (an LDAP-style name): the role is what follows the last one.
    monkeypatch.setenv("OIDC_ROLE_MAP", " ops-admins=Staff, ops = Viewers,cn=auditors=Viewers ")
    assert env_pairs("OIDC_ROLE_MAP") == {"ops-admins": "Staff", "ops": "Viewers", "cn=auditors": "Viewers"}
    monkeypatch.setenv("OIDC_ROLE_MAP", "ops-admins")
    with pytest.raises(ImproperlyConfiguredEnv, match="OIDC_ROLE_MAP must list name=value pairs"):
        env_pairs("OIDC_ROLE_MAP")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"LOCAL_LOGIN": "0"}, "LOCAL_LOGIN=0 needs OIDC_DISCOVERY_URL"),
        ({**PROVIDER, "OIDC_CLIENT_SECRET": ""}, "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set"),
        ({**PROVIDER, "OIDC_DISCOVERY_URL": "sso.example.com"}, "OIDC_DISCOVERY_URL must be a URL"),
        ({**PROVIDER, "OIDC_SCOPES": "email profile"}, "OIDC_SCOPES must include openid"),
        ({**PROVIDER, "OIDC_ROLE_MAP": "ops=Admins"}, "OIDC_ROLE_MAP names unknown roles Admins"),
    ],
)
def test_bad_provider_settings_stop_the_process(overrides: dict[str, str], expected: str) -> None:
    result = run_check(**overrides)
    assert result.returncode == 2, result.stderr
    assert f"Configuration error: {expected}" in result.stderr
    assert "s3cret-from-the-provider" not in result.stderr


def test_good_provider_settings_pass() -> None:
    result = run_check(**PROVIDER, OIDC_ROLE_MAP="ops-admins=Staff,ops=Viewers", LOCAL_LOGIN="0",
                       BREAK_GLASS_USERS="breakglass")
    assert result.returncode == 0, result.stderr


def test_a_configured_provider_may_receive_the_logout_form() -> None:
    # Logging out POSTs a form that ends in a redirect to the provider: Chromium holds that redirect to
    # form-action (tests/browser/test_oidc_sign_in.py signs out through it).
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"SECRET_KEY": "x" * 50, **PROVIDER})
    result = subprocess.run(
        [sys.executable, "-c", "from dashboard import settings; "
         "print(settings.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'])"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.stdout.strip() == "[\"'self'\", 'https://sso.example.com']", result.stderr
