"""The Ed25519 key pair behind credentials: the coordinator signs with the private key, sources verify
with the public key and cannot mint.

Made once, on the coordinator's first need, in the data folder (0700, made so if it was there):

| file                  | holds                                  | mode                        |
|-----------------------|----------------------------------------|-----------------------------|
| `signing-ed25519.key` | the private key (PKCS#8 PEM)           | 0600, refused if wider      |
| `signing-ed25519.pub` | the public key (SubjectPublicKeyInfo PEM) | 0600, refused if others may write |

Of several processes making the pair at once exactly one private key wins: each publishes its own
whole (``traces.private_files.publish_file``: a 0600 draft, hard-linked to the name) and a loser
reads the winner's. The public file is derived from the private key, so every writer writes the same
bytes. Light to import (no mcp SDK).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from traces.private_files import (
    private_folder,
    publish_file,
    read_private_file,
    read_protected_file,
)

__all__ = [
    "PRIVATE_KEY_FILE",
    "PUBLIC_KEY_FILE",
    "ensure_key_pair",
    "load_private_pem",
    "load_public_pem",
    "private_pem",
    "public_pem",
    "read_public_key",
]

PRIVATE_KEY_FILE = "signing-ed25519.key"
PUBLIC_KEY_FILE = "signing-ed25519.pub"


def private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def public_pem(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def load_private_pem(text: str, origin: str) -> Ed25519PrivateKey:
    """The private key in ``text``; ``origin`` (a file or a variable) names it in the error, never its content."""
    try:
        key = serialization.load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{origin} must hold an unencrypted Ed25519 private key in PEM (PKCS#8)")
    return key


def load_public_pem(text: str, origin: str) -> Ed25519PublicKey:
    """The public key in ``text``; ``origin`` names it in the error."""
    try:
        key = serialization.load_pem_public_key(text.encode())
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{origin} must hold an Ed25519 public key in PEM (SubjectPublicKeyInfo)")
    return key


def ensure_key_pair(data_dir: Path) -> Ed25519PrivateKey:
    """The data folder's private key, the pair made first if there is none (the coordinator's side only)."""
    folder = private_folder(data_dir, contents=True)  # 0700 (and what is in it) even if it was there
    private_path = folder / PRIVATE_KEY_FILE
    if not private_path.exists():
        # Whoever links first wins; the others' drafts are dropped and they read the winner's key.
        publish_file(private_path, private_pem(Ed25519PrivateKey.generate()), replace=False)
    key = load_private_pem(read_private_file(private_path), str(private_path))
    public_path = folder / PUBLIC_KEY_FILE
    expected = public_pem(key)
    try:
        current = read_protected_file(public_path)
    except (FileNotFoundError, ValueError):
        current = None  # missing, or open to others' writes: made again below, whole
    if current != expected.strip():
        publish_file(public_path, expected, replace=True)  # 0600 as all in the data folder, though not secret
    return key


def read_public_key(data_dir: Path) -> Ed25519PublicKey | None:
    """The data folder's public key, or None when no coordinator has made the pair yet."""
    path = data_dir / PUBLIC_KEY_FILE
    try:
        text = read_protected_file(path)
    except FileNotFoundError:
        return None
    return load_public_pem(text, str(path))
