"""The product's own error pages: 403, 404 and 500 in the page layout, under the pages' CSP.

The API answers its errors in JSON before these are reached (config.middleware)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template import loader
from django.views import defaults

from config.csp import with_csp

page_not_found = with_csp(defaults.page_not_found)
permission_denied = with_csp(defaults.permission_denied)


@with_csp
def server_error(request: HttpRequest) -> HttpResponse:
    # Django's own 500 view renders without the request: the page's style would lose its CSP nonce.
    try:
        return HttpResponseServerError(loader.render_to_string("500.html", request=request))
    except Exception:  # a broken template or database must not hide the error being reported
        return HttpResponseServerError("Server error. Try again in a moment.", content_type="text/plain")
