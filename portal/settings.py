"""Settings from the environment, with an embedded default that needs no server.

No environment: SQLite in var/, Celery over kombu's filesystem transport in var/broker/
(a real worker process, no broker server). Production and CI: DATABASE_URL (PostgreSQL)
and CELERY_BROKER_URL (Redis or RabbitMQ).
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from evaluation.protocol import FILESYSTEM_BROKER, TASK_SETTINGS, broker_settings
from portal.env import env_bool, env_int, env_list, env_str
from portal.var_files import private_var

# Django's generic classes (ModelAdmin[Release], ...) subscriptable at run time, as the type
# checker (mypy with django-stubs) reads them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ATREX_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", True)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me-for-any-deployment-0123456789"
SECRET_KEY = env_str("DJANGO_SECRET_KEY", _DEV_SECRET if DEBUG else None)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])

# Outside development the portal is served over HTTPS only (`manage.py check --deploy` is
# clean). Behind a TLS-terminating proxy, set DJANGO_SECURE_PROXY_SSL_HEADER=1.
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 3600)  # raise once HTTPS is proven
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", True)
    if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "portal.accounts",
    "portal.audit",
    "evaluation.catalog",
    "submissions",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.BodySizeLimitMiddleware",  # 413 before anything reads the body
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.accounts.viewer.ViewerMiddleware",  # request.viewer: who is asking, once
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.PlainNotFoundMiddleware",  # no URL list on 404 pages, even with DEBUG
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.accounts.context_processors.user_team",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"), conn_max_age=60)
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The embedded default: var/ holds every team's source and results; its owner's alone.
    private_var(VAR_DIR, database=Path(DATABASES["default"]["NAME"])
                if Path(DATABASES["default"]["NAME"]).parent == VAR_DIR else None)
    # A file, not memory, for the test database: a real worker process must see it too.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_portal.sqlite3")}
    # IMMEDIATE: a transaction takes the write lock when it begins, so concurrent quota checks
    # queue up instead of failing with "database is locked" on a lock upgrade.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # collectstatic fills it in production
WHITENOISE_USE_FINDERS = DEBUG  # serve static/ directly while developing
LOGIN_URL = "/accounts/login/"
# Who may make an account (portal/accounts/signup.py): "open" (anyone: a user and a team of
# their own, or a team's invite code), "approval" (the same, signed in only once an admin
# activates the account), "invite" (only with a team's invite code). `make run` sets open.
ATREX_SIGNUP = env_str("ATREX_SIGNUP", "approval")
if ATREX_SIGNUP not in ("open", "approval", "invite"):
    raise ImproperlyConfigured("ATREX_SIGNUP must be open, approval or invite")
LOGIN_REDIRECT_URL = "/team/"
LOGOUT_REDIRECT_URL = "/"

_CACHE_URL = env_str("CACHE_URL", "")
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                      "LOCATION": _CACHE_URL} if _CACHE_URL else
          {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.auth.TeamTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Anyone may ask (views decide who sees what; AllowAny also tells the schema that
    # credentials are optional), but a read-only team token may only read
    # (portal/accounts/auth.py); views ask for more where an action needs it.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny",
                                   "portal.accounts.auth.TokenScopePermission"],
    "EXCEPTION_HANDLER": "portal.api_errors.exception_handler",
    # Requests a minute per scope, counted in the cache above (portal/throttles.py). At 0 every
    # request of the scope is refused; a negative number has no meaning, so start-up stops.
    "DEFAULT_THROTTLE_RATES": {
        "login": f"{env_int('ATREX_LOGIN_LIMIT', 10, minimum=0)}/min",  # per client address
        # invalid API tokens per client address
        "token": f"{env_int('ATREX_TOKEN_FAILURE_LIMIT', 20, minimum=0)}/min",
        "upload": f"{env_int('ATREX_UPLOAD_LIMIT', 30, minimum=0)}/min",  # per team
        "signup": f"{env_int('ATREX_SIGNUP_LIMIT', 5, minimum=0)}/min",  # per client address
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Atrex Portal API",
    "VERSION": "0.1.0",
    # Swagger UI served from our own static files (the sidecar package), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,  # the schema endpoint is not part of the API it describes
    "COMPONENT_SPLIT_REQUEST": True,  # request bodies as sent: uploads are binary files
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "portal.api_schema.add_token_errors"],
    # Jobs and submissions both have a "status"; their enums get names of their own.
    "ENUM_NAME_OVERRIDES": {"JobStatusEnum": "submissions.models.EvaluationJob.Status",
                            "SubmissionStatusEnum": "submissions.api.SUBMISSION_STATUSES",
                            "JobModeEnum": "submissions.models.EvaluationJob.Mode",
                            "SubmissionModeEnum": "submissions.models.Submission.Mode"},
}

# Celery: filesystem transport by default (folders in var/broker), Redis/RabbitMQ by URL;
# the same broker and task settings as the GPU workers' own app (evaluation/protocol.py).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", FILESYSTEM_BROKER)
_broker = broker_settings(CELERY_BROKER_URL, VAR_DIR / "broker", visibility_timeout_s=env_int(
    "ATREX_BROKER_VISIBILITY_TIMEOUT", 3600, minimum=1))
# Only the brokers that need a transport or its options get them; None and {} are Celery's
# own defaults.
CELERY_BROKER_TRANSPORT = _broker.get("broker_transport")
CELERY_BROKER_TRANSPORT_OPTIONS = _broker.get("broker_transport_options", {})
CELERY_TASK_ACKS_LATE = TASK_SETTINGS["task_acks_late"]
CELERY_TASK_REJECT_ON_WORKER_LOST = TASK_SETTINGS["task_reject_on_worker_lost"]
CELERY_WORKER_PREFETCH_MULTIPLIER = TASK_SETTINGS["worker_prefetch_multiplier"]
CELERY_TASK_SERIALIZER = TASK_SETTINGS["task_serializer"]
CELERY_ACCEPT_CONTENT = TASK_SETTINGS["accept_content"]

# The sweeper (docs/operations.md): a running job whose worker has not reported for
# ATREX_JOB_STALE_SECONDS (a running job's worker sends a heartbeat every
# ATREX_JOB_HEARTBEAT_SECONDS, whatever the shape) is run again as a new attempt, up to
# ATREX_JOB_MAX_ATTEMPTS attempts, then failed with a reason the team can read.
ATREX_JOB_HEARTBEAT_SECONDS = env_int("ATREX_JOB_HEARTBEAT_SECONDS", 30, minimum=1)
ATREX_JOB_STALE_SECONDS = env_int("ATREX_JOB_STALE_SECONDS", 300, minimum=1)
if ATREX_JOB_STALE_SECONDS < 3 * ATREX_JOB_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("ATREX_JOB_STALE_SECONDS must be at least three heartbeats "
                               f"(3 x ATREX_JOB_HEARTBEAT_SECONDS = "
                               f"{3 * ATREX_JOB_HEARTBEAT_SECONDS})")
ATREX_JOB_MAX_ATTEMPTS = env_int("ATREX_JOB_MAX_ATTEMPTS", 3, minimum=1)
ATREX_SWEEP_INTERVAL_SECONDS = env_int("ATREX_SWEEP_INTERVAL_SECONDS", 60, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "sweep-stale-jobs": {
        "task": "submissions.sweep_jobs",
        "schedule": float(ATREX_SWEEP_INTERVAL_SECONDS),
        # Web side (needs the database); a sweep nobody ran in time is dropped, not piled up.
        "options": {"queue": "results", "expires": float(ATREX_SWEEP_INTERVAL_SECONDS)},
    },
}

# Which shapes jobs evaluate and scores count. Unset: the release's scored tier (every shape
# but the dev tier, `dev-*`). CPU-only deployments (the embedded default, CI) set `dev-*`:
# real sizes take hours in Triton's interpreter. Any other glob over shape ids works too.
ATREX_SHAPE_FILTER = env_str("ATREX_SHAPE_FILTER", "")
# A team's ncu profiles a day (submissions/ncu.py): each holds a GPU for seconds to minutes.
ATREX_NCU_PROFILES_PER_DAY = env_int("ATREX_NCU_PROFILES_PER_DAY", 5, minimum=0)

# Upload limits (issue 3 §4); configurable per deployment.
ATREX_UPLOAD_MAX_FILE_BYTES = env_int("ATREX_UPLOAD_MAX_FILE_BYTES", 1024 * 1024, minimum=1)
ATREX_UPLOAD_MAX_FILES = env_int("ATREX_UPLOAD_MAX_FILES", 64, minimum=1)
# The longest a long poll (GET /api/submissions/ID/?wait=S) holds a web thread, seconds.
ATREX_LONG_POLL_MAX_SECONDS = env_int("ATREX_LONG_POLL_MAX_SECONDS", 60, minimum=0)
ATREX_UPLOAD_MAX_TOTAL_BYTES = env_int("ATREX_UPLOAD_MAX_TOTAL_BYTES", 8 * 1024 * 1024, minimum=1)

# Links the portal sends out (a team's webhook carries them): the address teams reach it at.
ATREX_PUBLIC_URL = env_str("ATREX_PUBLIC_URL", "http://127.0.0.1:8000")
# Teams' webhooks (submissions/webhooks.py): a short timeout, retries with a doubling delay,
# and no call to a loopback, link-local or private address unless this is set (the SSRF
# guard: those addresses are where the portal's own services live).
ATREX_WEBHOOK_ALLOW_PRIVATE = env_bool("ATREX_WEBHOOK_ALLOW_PRIVATE", False)
ATREX_WEBHOOK_TIMEOUT_SECONDS = env_int("ATREX_WEBHOOK_TIMEOUT_SECONDS", 5, minimum=1)
ATREX_WEBHOOK_RETRIES = env_int("ATREX_WEBHOOK_RETRIES", 5, minimum=0)
ATREX_WEBHOOK_RETRY_BASE_SECONDS = env_int("ATREX_WEBHOOK_RETRY_BASE_SECONDS", 10, minimum=0)
