from django.http import HttpRequest, JsonResponse
from django.urls import URLPattern, path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from api import views
from api.v1 import api, head_served_as_get


@csrf_exempt  # read-only; an API client has no CSRF token, and a POST gets the JSON 405
@require_safe
def schema(request: HttpRequest) -> JsonResponse:
    """The OpenAPI schema of API v1 (public: it describes, it discloses no data)."""
    return JsonResponse(api.get_openapi_schema(path_prefix="/api/v1"))


def _api_urls() -> tuple[list[object], str, str]:
    """API v1's URL configuration, each of its views answering HEAD as GET."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = head_served_as_get(pattern.callback)
    return patterns, app_name, namespace


urlpatterns = [
    path("v1/schema/", schema, name="api-v1-schema"),
    path("v1/", _api_urls()),
    path("tokens/", views.tokens, name="api-tokens"),
    path("tokens/new/", views.tokens_create, name="api-tokens-create"),
    path("tokens/<int:token_id>/", views.tokens_token, name="api-tokens-token"),
    path("tokens/<int:token_id>/revoke/", views.tokens_revoke, name="api-tokens-revoke"),
]
