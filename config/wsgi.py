import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_wsgi_application()

# Import every view now rather than on the first request, then move everything loaded so far out
# of the garbage collector's sight: these objects live as long as the process, and with them in
# the oldest generation each full collection stalled a request for ~40 ms every few dozen
# searches (measured on rag.search; docs/benchmarks.md).
get_resolver().url_patterns  # noqa: B018 (the property imports every view module)
gc.collect()
gc.freeze()
