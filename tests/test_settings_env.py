"""Typed environment helpers fail loudly on bad values."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_int, env_list, env_str


def test_values_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "yes")
    monkeypatch.setenv("X_INT", "42")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_bool("X_BOOL", False) is True
    assert env_int("X_INT", 0) == 42
    assert env_list("X_LIST", []) == ["a", "b", "c"]
    assert env_str("X_MISSING", "d") == "d"


@pytest.mark.parametrize(("name", "value", "reader"), [
    ("X_BOOL", "maybe", lambda: env_bool("X_BOOL", False)),
    ("X_INT", "4k", lambda: env_int("X_INT", 0)),
    ("X_INT", "-1", lambda: env_int("X_INT", 0, minimum=0)),
])
def test_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                      reader: object) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        reader()  # type: ignore[operator]


def test_a_required_variable_without_default_fails() -> None:
    with pytest.raises(ImproperlyConfigured, match="X_REQUIRED_NOT_SET is required"):
        env_str("X_REQUIRED_NOT_SET")
