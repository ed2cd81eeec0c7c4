from django.urls import path
from orders import views

urlpatterns = [
    path("readyz", views.readyz),
    path("orders", views.create_order),
]
