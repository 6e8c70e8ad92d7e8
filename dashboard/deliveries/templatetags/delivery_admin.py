"""The admin's deliveries change list: its result table with the rows `DeliveryChangeList.result_rows` builds."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.admin.templatetags.admin_list import result_headers, result_hidden_fields, results

from dashboard.deliveries.admin import DeliveryChangeList

register = template.Library()


@register.inclusion_tag("admin/change_list_results.html")
def delivery_result_list(cl: DeliveryChangeList) -> dict[str, Any]:
    """What Django's `result_list` tag gives `change_list_results.html`, one ready-made cell string a row. A
    popup (`?_popup=1`: no field links to a delivery, but the URL can be typed) gets Django's own rows, whose
    links carry the popup's data attribute."""
    headers = list(result_headers(cl))
    rows = list(results(cl)) if cl.is_popup else [[row] for row in cl.result_rows()]
    return {
        "cl": cl,
        "result_hidden_fields": list(result_hidden_fields(cl)),
        "result_headers": headers,
        "num_sorted_fields": sum(1 for header in headers if header["sortable"] and header["sorted"]),
        "results": rows,
    }
