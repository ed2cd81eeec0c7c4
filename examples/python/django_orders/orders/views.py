"""The recipe's routes: readiness from the shared generator, and an insert that answers 503 with
Retry-After while the generator cannot issue ids (a lost lease being leased again)."""

import time

import clockflake.django
from clockflake import ClockflakeError, CoordinatorUnavailableError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from orders.models import Order


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 while the generator holds its lease, else 503 with the reason. The first
    probe opens the generator (leases a worker id); while a lost lease is leased again the state
    is "healing", and the route answers 200 again after it, with no restart."""
    try:
        ids = clockflake.django.generator()
    except ClockflakeError as error:  # no lease at all yet: the coordinator is unreachable
        return JsonResponse({"state": "opening", "error": str(error)}, status=503)
    stats = ids.stats()
    body = {
        "state": stats["state"],  # "active", "healing" or "closed"
        "worker_id": stats["worker_id"],  # None while healing
        "last_loss": stats["last_loss"],  # why the lease was lost, if it was
        "last_heal_error": stats["last_heal_error"],  # why leasing again failed, if it did
    }
    return JsonResponse(body, status=200 if ids.is_active else 503)


@csrf_exempt  # an API called by programs, not a form
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    try:
        order = Order.objects.create(item=request.POST.get("item", ""))
    except CoordinatorUnavailableError as error:
        # next_id() waited RETRY_FOR_S for the generator already: ask the client to come back.
        retry_after_s = max(1, round((error.retry_at_ms or 0) / 1000 - time.time()))
        response = JsonResponse({"error": str(error)}, status=503)
        response["Retry-After"] = str(retry_after_s)
        return response
    return JsonResponse({"id": str(order.pk), "item": order.item}, status=201)  # ids as strings
