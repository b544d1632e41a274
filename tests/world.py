"""The world most tests stand in: the imported fixture release and a small named cast.

`build_world()` makes it; the `world` fixture of tests/conftest.py hands it to a test. A test
file that needs more (scored submissions, weights, tokens) builds them on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release
from portal.accounts.models import Team
from tests.factories import TeamFactory, UserFactory, member_of
from tests.paths import FIXTURE_RELEASE


def import_fixture_release() -> Release:
    """The project's fixture release (evaluation/releases/atrex-fixture), imported; importing
    it again gives the same release."""
    return release_import(path=FIXTURE_RELEASE).release


@dataclass(frozen=True)
class World:
    release: Release
    h200: HardwareProfile
    red: Team
    blue: Team
    ruby: User  # a member of Red
    bert: User  # a member of Blue
    root: User  # an admin (staff and superuser) in no team


def build_world(*, release: Release | None = None, red_shares_links: bool = False) -> World:
    """`release` (by default the fixture release); teams Red (`red_shares_links`: its members
    may share links) and Blue, one member each; an admin in no team."""
    release = release or import_fixture_release()
    red = TeamFactory(name="Red", share_links_enabled=red_shares_links)
    blue = TeamFactory(name="Blue")
    return World(release=release, h200=HardwareProfile.objects.get(name="H200"), red=red,
                 blue=blue, ruby=member_of(red, "ruby"), bert=member_of(blue, "bert"),
                 root=UserFactory(username="root", is_staff=True, is_superuser=True))


Extended = TypeVar("Extended", bound=World)


def extended(world: World, kind: type[Extended], **extras: Any) -> Extended:
    """`world` with a file's extras: `kind` is a subclass of World adding their fields."""
    return kind(**{f.name: getattr(world, f.name) for f in fields(World)}, **extras)


def signed_in(user: User) -> Client:
    """A test client with `user` signed in (no form: see tests of signing in for that)."""
    client = Client()
    client.force_login(user)
    return client
