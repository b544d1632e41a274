import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()
# What is loaded by now (Django, the apps, their modules and settings) lives as long as the
# process: kept out of the collector's sight, a full collection no longer walks it. An
# uncached board builds some 1,000 rows, and a full collection that fell inside the request
# walked the whole heap: 65-90 ms of a 100 ms request, the boards' p95 (issue 42;
# benchmarks/board_benchmark.py imports this module to measure what the server does).
gc.freeze()
