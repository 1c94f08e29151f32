from django.urls import path  # noqa: F401  (decision replay and execution simulation)

urlpatterns: list = []
