"""The benchmark catalog, the web tier's Django app: releases, operators, shapes, their hidden
files, hardware profiles; importing a release (`importing.py`), reading the public part
(`selectors.py`), its pages and API. Its label stays "evaluation", the app's name before it
had a folder of its own: the tables, migrations and content types of deployed portals are
named by it."""
