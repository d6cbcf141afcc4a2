"""The tool's own RSA key pair: made once, kept 0600 beside the database (its folder 0700), its public half served
as a JWKS (``/lti/jwks.json``) for the platforms to check what the tool signs (its client assertions for access
tokens, its deep-linking responses). A secret derived from the private key signs what the tool hands itself through
a browser (the login's state and nonce, the deep-linking request it keeps in a form)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy.engine import Engine

from autograder.service.db import private_folder

KEY_FILE = "lti-private-key.pem"


def folder_for(engine: Engine, course_root: Path) -> Path:
    """Where the key is kept: beside a SQLite database, else in the course's service-data/ folder."""
    if engine.dialect.name == "sqlite" and engine.url.database and engine.url.database != ":memory:":
        return Path(engine.url.database).resolve().parent
    return private_folder(course_root / "service-data")


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class ToolKey:
    """The key pair of the tool: ``private`` (a PEM for PyJWT), ``kid`` (its RFC 7638 thumbprint) and ``jwks``."""

    def __init__(self, pem: bytes):
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("the LTI key is not an RSA key")
        self.private: Any = key
        numbers = key.public_key().public_numbers()
        public = {"e": _b64(numbers.e), "kty": "RSA", "n": _b64(numbers.n)}
        thumb = hashlib.sha256(json.dumps(public, separators=(",", ":"), sort_keys=True).encode()).digest()
        self.kid = base64.urlsafe_b64encode(thumb).rstrip(b"=").decode()
        self.jwks: dict[str, Any] = {"keys": [{**public, "alg": "RS256", "use": "sig", "kid": self.kid}]}
        self.secret = hmac.new(pem, b"autograder lti state", hashlib.sha256).digest()

    def sign(self, claims: dict[str, Any]) -> str:
        """``claims`` as a JWT signed with the tool's key (RS256, its kid in the header)."""
        import jwt  # noqa: PLC0415 - loads cryptography's backends

        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": self.kid})

    def mac(self, text: str) -> str:
        """A keyed digest of ``text`` (hex)."""
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()


def load_or_make(folder: Path) -> ToolKey:
    """The tool's key from ``folder``, made there (2048-bit RSA, 0600) the first time."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)     # (an existing folder keeps its mode)
    path = folder / KEY_FILE
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:         # another process made it meanwhile: theirs is the key
            pass
        else:
            with os.fdopen(fd, "wb") as file:
                file.write(pem)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    return ToolKey(path.read_bytes())
