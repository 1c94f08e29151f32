from django.urls import path

from approvals import views

urlpatterns = [
    path("", views.approvals_queue, name="approvals-queue"),
    path("history/", views.approvals_history, name="approvals-history"),
    path("deliveries/", views.approvals_deliveries, name="approvals-deliveries"),
    path("questions/", views.approvals_questions, name="approvals-questions"),
    path("<str:checkpoint_id>/", views.approvals_detail, name="approvals-detail"),
    path("<str:checkpoint_id>/decide/", views.approvals_decide, name="approvals-decide"),
    path("<str:checkpoint_id>/answer/", views.approvals_answer, name="approvals-answer"),
]
