from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "evaluation.catalog"
    # The label the app had before it moved here: tables (evaluation_release, ...),
    # migrations and content types keep their names on portals already deployed.
    label = "evaluation"
    verbose_name = "Benchmark catalog"
