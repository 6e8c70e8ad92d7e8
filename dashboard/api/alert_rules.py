"""Alert rules: list, one, create, update, delete (scope `admin`, the admin's permissions on alert rules),
checked by the admin's form (`alerts.forms.AlertRuleForm`) and written to the admin's history under the
token's name."""

from typing import Any

from django.http import Http404, HttpRequest
from ninja import Query, Router, Status

from dashboard.alerts.forms import AlertRuleForm
from dashboard.alerts.models import AlertRule
from dashboard.api import administration
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT
from dashboard.api.problems import refuse_unknown
from dashboard.api.schemas import AlertRuleIn, AlertRuleOut, AlertRulePage
from dashboard.api.security import allow

router = Router(tags=["alert rules"])

VIEW = administration.admin_need(AlertRule, "view")
ADD = administration.admin_need(AlertRule, "add")
CHANGE = administration.admin_need(AlertRule, "change")
DELETE = administration.admin_need(AlertRule, "delete")


def _out(rule: AlertRule) -> dict[str, Any]:
    fields = {name: getattr(rule, name) for name in AlertRuleOut.model_fields if hasattr(AlertRule, name)}
    return {
        **fields, "id": rule.pk, "condition_text": rule.describe_condition(),
        "channels": [{"id": c.pk, "name": c.name} for c in rule.channels.order_by("name")],
    }


def _rule(rule_id: int) -> AlertRule:
    rule = AlertRule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise Http404("No alert rule with this id.")
    return rule


@router.get("/alert-rules", response=AlertRulePage, summary="Alert rules, by name")
def rule_list(
    request: HttpRequest,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=200, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    return administration.page_by_name(request, AlertRule.objects.prefetch_related("channels"), limit, cursor, _out)


@router.get("/alert-rules/{int:rule_id}", response=AlertRuleOut, summary="One alert rule")
def rule_detail(request: HttpRequest, rule_id: int) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [])
    return _out(_rule(rule_id))


@router.post("/alert-rules", response=AlertRuleOut, summary="Create an alert rule")
def rule_create(request: HttpRequest, body: AlertRuleIn) -> dict[str, Any]:
    """Fields left out take their defaults, as on the admin's blank form."""
    caller = allow(request, ADD)
    refuse_unknown(request, [])
    form = AlertRuleForm(administration.form_data(AlertRuleForm, None, body.model_dump(exclude_unset=True)))
    administration.checked(form)
    return _out(administration.save_added(caller, form))


@router.patch("/alert-rules/{int:rule_id}", response=AlertRuleOut, summary="Change an alert rule")
def rule_update(request: HttpRequest, rule_id: int, body: AlertRuleIn) -> dict[str, Any]:
    """Only the fields given change; `channels`, when given, is the whole list."""
    caller = allow(request, CHANGE)
    refuse_unknown(request, [])
    rule = _rule(rule_id)
    form = AlertRuleForm(
        administration.form_data(AlertRuleForm, rule, body.model_dump(exclude_unset=True)), instance=rule
    )
    administration.checked(form)
    return _out(administration.save_changed(caller, form))


@router.delete("/alert-rules/{int:rule_id}", response={204: None}, summary="Delete an alert rule")
def rule_delete(request: HttpRequest, rule_id: int) -> Status[None]:
    """Its incidents and their mails go with it, as in the admin."""
    caller = allow(request, DELETE)
    refuse_unknown(request, [])
    administration.delete_logged(caller, _rule(rule_id))
    return Status(204, None)
