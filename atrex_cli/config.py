"""Where the client finds its server and team token: flags, environment, then the config file.

The config file (TOML, written by `atrex login`) is private to the user: mode 0600 in a
0700 folder, because it holds a token that can submit on the team's behalf.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SERVER = "http://127.0.0.1:8000"


class ConfigError(Exception):
    """The config file exists but cannot be read; the message names it."""


@dataclass(frozen=True)
class ClientConfig:
    server: str
    token: str | None
    token_source: str  # "ATREX_TOKEN", the config file's path, or "" when there is none


def config_path() -> Path:
    """$ATREX_CONFIG, else $XDG_CONFIG_HOME/atrex/config.toml, else ~/.config/atrex/config.toml."""
    explicit = os.environ.get("ATREX_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "atrex" / "config.toml"


def read_config_file(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc})") from None
    return {key: value for key, value in doc.items() if isinstance(value, str)}


def resolve(server_flag: str | None) -> ClientConfig:
    """The server: --server, $ATREX_SERVER, the file, the default. The token: $ATREX_TOKEN,
    then the file."""
    path = config_path()
    stored = read_config_file(path)
    server = server_flag or os.environ.get("ATREX_SERVER") or stored.get("server") or DEFAULT_SERVER
    token = os.environ.get("ATREX_TOKEN")
    if token:
        return ClientConfig(server=server.rstrip("/"), token=token.strip(),
                            token_source="ATREX_TOKEN")
    token = stored.get("token")
    return ClientConfig(server=server.rstrip("/"), token=token or None,
                        token_source=str(path) if token else "")


def write_config(path: Path, values: dict[str, str]) -> None:
    """Write the file with mode 0600 from the start (never world-readable, even briefly)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # TOML basic strings accept JSON's escapes for the characters a URL or token can hold.
    text = "".join(f"{key} = {json.dumps(value)}\n" for key, value in sorted(values.items()))
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an older file may have been created with a wider mode
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
