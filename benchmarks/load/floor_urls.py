"""One empty view behind the production middleware: the floor of any Django view answering a POSTed body.

Served only by ``benchmarks/load`` (``DJANGO_SETTINGS_MODULE=benchmarks.load.floor_settings``), so the floor and
the verbs it is compared with go through the same gunicorn configuration, middleware and body reading.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def empty(request: HttpRequest) -> HttpResponse:
    request.read()  # the body is read (and so transferred) like a verb's, then ignored
    return HttpResponse(b"{}", content_type="application/json")


urlpatterns = [path("floor/", empty)]
