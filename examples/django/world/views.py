"""Views of the Django example: JSON, one ORM read, a template over ORM rows, an ORM write.

Inputs are validated and clamped (?n= to 1..500, anything else falls back to 1); the ORM
writes parameterized SQL only; only GET is accepted (405 otherwise).
"""

from __future__ import annotations

import random

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from world.models import World

WORLD_ROWS = 10_000
MAX_ROWS = 500


def clamp_rows(raw: str | None) -> int:
    """?n=: missing, too long or not a number -> 1, then clamped to 1..500."""
    if raw is None or len(raw) > 12:
        return 1
    try:
        value = int(raw)
    except ValueError:
        return 1
    return max(1, min(MAX_ROWS, value))


def _ids(count: int) -> list[int]:
    return random.sample(range(1, WORLD_ROWS + 1), count)


@require_GET
def json_message(request: HttpRequest) -> JsonResponse:
    """A fixed JSON body: the framework's own cost."""
    return JsonResponse({"message": "Hello, World!"})


@require_GET
def one_row(request: HttpRequest) -> JsonResponse:
    """One random row of world through the ORM."""
    row = World.objects.get(id=random.randint(1, WORLD_ROWS))
    return JsonResponse({"id": row.id, "randomNumber": row.randomnumber})


@require_GET
def rows_page(request: HttpRequest) -> HttpResponse:
    """?n= rows (1..500) rendered by a template (autoescaped)."""
    count = clamp_rows(request.GET.get("n"))
    rows = World.objects.filter(id__in=_ids(count)).order_by("id")
    note = f"{count} rows <from the world table>"  # escaped by the template
    return render(request, "world/rows.html", {"rows": rows, "note": note})


@require_GET
def update_rows(request: HttpRequest) -> JsonResponse:
    """?n= rows (1..500) read and written back with new random numbers, in one transaction
    (GET, as TechEmpower's updates test: the load tools here send GET only)."""
    count = clamp_rows(request.GET.get("n"))
    with transaction.atomic():
        rows = list(World.objects.filter(id__in=sorted(_ids(count))).order_by("id"))
        for row in rows:
            row.randomnumber = random.randint(1, WORLD_ROWS)
        World.objects.bulk_update(rows, ["randomnumber"])
    return JsonResponse([{"id": r.id, "randomNumber": r.randomnumber} for r in rows], safe=False)
