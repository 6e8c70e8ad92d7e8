"""A small, real OpenID Connect provider on loopback for the sign-in tests: discovery, JWKS (an RSA key),
/authorize (approves the configured account at once and redirects back with code and state), /token (checks
the code once, the client's secret, the redirect URI and the PKCE verifier; signs an RS256 ID token),
/userinfo and /logout. Its knobs make it misbehave the ways a sign-in must survive."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "stream-dashboard"
CLIENT_SECRET = "provider-issued-client-secret"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Account:
    sub: str = "00u-alice-1"
    preferred_username: str = "alice"
    email: str = "alice@example.com"
    groups: list[str] = field(default_factory=lambda: ["ops"])
    given_name: str = "Alice"
    family_name: str = "Ops"


class Provider:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.account = Account()
        # What the next ID token gets wrong: claims overriding the right ones, another signing key, or an
        # earlier token sent again.
        self.token_overrides: dict[str, Any] = {}
        self.sign_with: Any = None
        self.replay: str | None = None
        self.issued: list[str] = []
        self.codes: dict[str, dict[str, Any]] = {}
        self.logouts: list[dict[str, list[str]]] = []
        self.token_auth_methods = ["client_secret_post", "client_secret_basic"]
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def discovery_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"

    def start(self) -> Provider:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what it answers ---

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "userinfo_endpoint": f"{self.url}/userinfo",
            "jwks_uri": f"{self.url}/jwks",
            "end_session_endpoint": f"{self.url}/logout",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": self.token_auth_methods,
        }

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        return {"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
            "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": _b64(numbers.e.to_bytes(3, "big")),
        }]}

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return 400, {}, b"bad client or response_type"
        code = secrets.token_urlsafe(24)
        self.codes[code] = {
            "redirect_uri": query["redirect_uri"], "nonce": query.get("nonce"),
            "challenge": query.get("code_challenge"), "method": query.get("code_challenge_method"),
            "scope": query.get("scope", ""),
        }
        location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
        return 302, {"Location": location}, b""

    def token(self, form: dict[str, str], basic: tuple[str, str] | None) -> tuple[int, dict[str, Any]]:
        if basic is None and "client_secret_post" not in self.token_auth_methods:
            return 401, {"error": "invalid_client", "error_description": "client_secret_basic only"}
        client_id, client_secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
        if client_id != CLIENT_ID or client_secret != CLIENT_SECRET:
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)  # a code is good once
        if grant is None or form.get("grant_type") != "authorization_code":
            return 400, {"error": "invalid_grant"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        verifier = form.get("code_verifier", "")
        if grant["method"] != "S256" or _b64(hashlib.sha256(verifier.encode()).digest()) != grant["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verifier does not match"}
        now = int(time.time())
        claims = {
            "iss": self.url, "aud": CLIENT_ID, "sub": self.account.sub, "iat": now, "exp": now + 300,
            "nonce": grant["nonce"], "preferred_username": self.account.preferred_username,
            "email": self.account.email, "groups": list(self.account.groups),
            "given_name": self.account.given_name, "family_name": self.account.family_name,
        }
        claims.update(self.token_overrides)
        id_token = jwt.encode(claims, self.sign_with or self.key, algorithm="RS256", headers={"kid": self.kid})
        if self.replay is not None:
            id_token = self.replay
        self.issued.append(id_token)
        return 200, {"access_token": f"at-{self.account.sub}", "token_type": "Bearer", "id_token": id_token,
                     "expires_in": 300}

    def userinfo(self, authorization: str) -> tuple[int, dict[str, Any]]:
        if authorization != f"Bearer at-{self.account.sub}":
            return 401, {"error": "invalid_token"}
        account = self.account
        return 200, {"sub": account.sub, "preferred_username": account.preferred_username, "email": account.email,
                     "groups": list(account.groups)}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/.well-known/openid-configuration":
                    self._send(200, provider.discovery())
                elif parts.path == "/jwks":
                    self._send(200, provider.jwks())
                elif parts.path == "/authorize":
                    status, headers, body = provider.authorize(query)
                    self._send(status, body, headers)
                elif parts.path == "/userinfo":
                    self._send(*provider.userinfo(self.headers.get("Authorization", "")))
                elif parts.path == "/logout":
                    provider.logouts.append(parse_qs(parts.query))
                    target = query.get("post_logout_redirect_uri")
                    self._send(302 if target else 200, b"", {"Location": target} if target else {})
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                if urlsplit(self.path).path != "/token":
                    self._send(404, {"error": "not_found"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                basic = None
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    basic = (user, password)
                self._send(*provider.token(form, basic))

        return Handler
