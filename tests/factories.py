"""Factories for the small named cast the tests use."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from portal.accounts.models import Membership, Team


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("correct horse battery")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


def member_of(team: Team, username: str) -> object:
    user = UserFactory(username=username)
    Membership.objects.create(team=team, user=user)
    return user
