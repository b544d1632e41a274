"""The catalog app lives in evaluation/catalog/ under the label it had before it moved: a
deployed portal's tables, migrations and content types are named by that label."""

from __future__ import annotations

from django.apps import apps

from evaluation.catalog.models import HardwareProfile, Release, Shape


def test_the_catalog_app_keeps_the_label_its_tables_and_migrations_are_named_by() -> None:
    config = apps.get_app_config("evaluation")
    assert config.name == "evaluation.catalog" and config.verbose_name == "Benchmark catalog"
    assert [m._meta.db_table for m in (Release, Shape, HardwareProfile)] == [
        "evaluation_release", "evaluation_shape", "evaluation_hardwareprofile"]
    assert config.path.endswith("evaluation/catalog")
