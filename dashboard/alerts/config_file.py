"""Configuration as code: teams, alert rules, channels, maintenance windows and streams' own objectives as one
YAML file (`manage.py export_config`, `import_config`).

Each entry is keyed by its name (a stream objective by its stream id), so an import finds what it changes and
applying the same file twice changes nothing. Every entry is checked by the form the admin uses
(`alerts.forms`, `expectations.forms`, and through them the models' `clean`); one bad entry refuses the whole
file, and everything is written in one transaction. A channel's URL and secret are never written to the file:
it holds `{env: NAME}`, the environment variable the import reads them from.

A field an entry leaves out takes its default: the file says the whole entry. Muting a rule is not
configuration (it is done on the alerts page for a while) and is left as it is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import yaml
from django import forms
from django.db import models, transaction

from dashboard import encryption
from dashboard.accounts.models import Team
from dashboard.alerts.forms import AlertRuleForm, ChannelForm
from dashboard.alerts.models import AlertRule, Channel
from dashboard.expectations.forms import MaintenanceWindowForm, StreamObjectiveForm
from dashboard.expectations.models import MaintenanceWindow, StreamObjective

VERSION = 1
# Who an import names as the author of the windows it makes and the objectives it changes.
IMPORTER = "import_config"

RULE_FIELDS = [
    "name", "enabled", "scope", "scope_value", "condition", "window_minutes", "threshold_percent", "min_deliveries",
    "latency_seconds", "quiet_probability", "consecutive_failures", "stale_minutes", "recipients", "grace_minutes",
    "cooldown_minutes", "digest", "channels",
]
CHANNEL_FIELDS = ["name", "kind", "enabled", "team", "url", "secret"]
TEAM_FIELDS = ["name", "stream_ids", "tag_patterns", "alert_emails"]
# The file's name of each secret, and the channel form's field that takes it.
SECRET_FIELDS = {"url": "new_url", "secret": "new_secret"}
WINDOW_FIELDS = [
    "name", "scope", "scope_value", "starts_at", "ends_at", "cron", "duration_minutes", "time_zone", "reason",
]
OBJECTIVE_FIELDS = ["stream_id", "delivery", "delivery_target", "latency_seconds", "latency_target", "note"]


class ConfigError(Exception):
    """The file cannot be imported; `problems` names each entry and field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Section:
    name: str
    label: str
    model: type[models.Model]
    key: str
    fields: list[str]
    form: type[forms.ModelForm]


class TeamForm(forms.ModelForm):  # type: ignore[type-arg]
    """A team's claims and alert addresses (its members come by hand or from the identity provider)."""

    class Meta:
        model = Team
        fields = TEAM_FIELDS


TEAMS = Section("teams", "team", Team, "name", TEAM_FIELDS, TeamForm)
CHANNELS = Section("channels", "channel", Channel, "name", CHANNEL_FIELDS, ChannelForm)
RULES = Section("alert_rules", "alert rule", AlertRule, "name", RULE_FIELDS, AlertRuleForm)
WINDOWS = Section("maintenance_windows", "maintenance window", MaintenanceWindow, "name", WINDOW_FIELDS,
                  MaintenanceWindowForm)
OBJECTIVES = Section("stream_objectives", "stream objective", StreamObjective, "stream_id", OBJECTIVE_FIELDS,
                     StreamObjectiveForm)
# Teams first: channels name them; channels before the rules that name them.
SECTIONS = (TEAMS, CHANNELS, RULES, WINDOWS, OBJECTIVES)


@dataclass
class Change:
    section: Section
    key: str
    verb: str  # "create", "change" or "remove"
    # What changed: (field, before, after); a secret's values are never kept, only that it changed.
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)

    def text(self, *, dry_run: bool = False) -> str:
        verb = f"would {self.verb}" if dry_run else {"create": "created", "change": "changed", "remove": "removed"}[
            self.verb]
        head = f"{verb} {self.section.label} {_shown(self.key)}"
        if self.verb != "change":
            return head
        parts = []
        for name, before, after in self.fields:
            if name in SECRET_FIELDS:
                parts.append(f"{name} (from the environment; not shown)")
            else:
                parts.append(f"{name}: {_shown(before)} → {_shown(after)}")
        return f"{head}: " + "; ".join(parts)


# Called with each object an import creates or changes (after) or removes (before), and what it did: the
# command writes the admin's history from it.
Audit = Callable[[models.Model, Change], None]


@dataclass
class Outcome:
    changes: list[Change]
    # In the database, not in the file, and kept (no --prune).
    kept: list[str]


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


# --- Export ----------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _entry(
    section: Section, obj: Any, refs: Mapping[str, str] | None = None, channels: list[str] | None = None
) -> dict[str, Any]:
    """An object as the file holds it: empty fields left out, secrets as environment references. A rule's
    channels are read from the database unless given (a rule not saved yet)."""
    entry: dict[str, Any] = {}
    for name in section.fields:
        if section is RULES and name == "channels":
            value: Any = sorted(channels if channels is not None else (c.name for c in obj.channels.all()))
        elif section is CHANNELS and name in SECRET_FIELDS:
            stored = obj.url_encrypted if name == "url" else obj.secret_encrypted
            value = {"env": (refs or {}).get(name) or _env_name(obj.name, name)} if stored else None
        elif section is CHANNELS and name == "team":
            value = obj.team.name if obj.team_id is not None else None
        else:
            value = _plain(getattr(obj, name))
        if value not in (None, "", []):
            entry[name] = value
    return entry


def _env_name(channel_name: str, part: str) -> str:
    slug = re.sub(r"[^A-Z0-9]+", "_", channel_name.upper()).strip("_") or "UNNAMED"
    return f"CHANNEL_{slug}_{part.upper()}"


def export_document() -> dict[str, Any]:
    names = list(MaintenanceWindow.objects.values_list("name", flat=True))
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError([
            f"maintenance windows: several are named {_shown(name)}; the file names each window once, so rename "
            "them in the admin first" for name in repeated
        ])
    document: dict[str, Any] = {"version": VERSION}
    document["teams"] = [_entry(TEAMS, t) for t in Team.objects.order_by("name")]
    taken: set[str] = set()
    channels = []
    for channel in Channel.objects.select_related("team").order_by("name"):
        refs = {}
        for part in SECRET_FIELDS:
            env, n = _env_name(channel.name, part), 2
            while env in taken:
                env, n = f"{_env_name(channel.name, part)}_{n}", n + 1
            taken.add(env)
            refs[part] = env
        channels.append(_entry(CHANNELS, channel, refs))
    document["channels"] = channels
    document["alert_rules"] = [_entry(RULES, r) for r in AlertRule.objects.prefetch_related("channels").order_by("name")]
    document["maintenance_windows"] = [_entry(WINDOWS, w) for w in MaintenanceWindow.objects.order_by("name", "pk")]
    document["stream_objectives"] = [_entry(OBJECTIVES, o) for o in StreamObjective.objects.order_by("stream_id")]
    return document


HEADER = (
    "# Stream Dashboard configuration: teams, alert rules, channels, maintenance windows and stream objectives.\n"
    "# Apply with `manage.py import_config FILE` (--dry-run first). Channel URLs and secrets are read from the\n"
    "# environment variables named by `{env: NAME}`; they are never written here.\n"
)


def dump(document: Mapping[str, Any]) -> str:
    return HEADER + yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, default_flow_style=False)


# --- Import ----------------------------------------------------------------------------------------------


def load(text: str) -> dict[str, Any]:
    """The file read and its shape checked: known sections of entries with known fields and unique keys."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"not YAML: {exc}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(["the file holds a mapping of sections (channels, alert_rules, …)"])
    problems = []
    if document.get("version", VERSION) != VERSION:
        problems.append(f"version: this dashboard reads version {VERSION}")
    known = {s.name for s in SECTIONS} | {"version"}
    problems += [f"{_shown(name)}: not a section (expected one of {', '.join(sorted(known))})"
                 for name in document if name not in known]
    for section in SECTIONS:
        entries = document.get(section.name) or []
        if not isinstance(entries, list):
            problems.append(f"{section.name}: a list of entries")
            continue
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"{section.name}[{index}]"
            if not isinstance(entry, dict):
                problems.append(f"{where}: an entry is a mapping of fields")
                continue
            key = entry.get(section.key)
            if not isinstance(key, str) or not key.strip():
                problems.append(f"{where}: {section.key}: required")
                continue
            where = _where(section, index, key)
            if key in seen:
                problems.append(f"{where}: a second entry with this {section.key}")
            seen.add(key)
            problems += [f"{where}: {_shown(name)}: not a field of this section "
                         f"(expected {', '.join(section.fields)})" for name in entry if name not in section.fields]
    if problems:
        raise ConfigError(problems)
    return document


def _where(section: Section, index: int, key: str) -> str:
    return f"{section.name}[{index}] ({section.key} {_shown(key)})"


def _secret(where: str, name: str, value: Any, environ: Mapping[str, str]) -> str:
    if value is None:
        return ""
    if not (isinstance(value, dict) and set(value) == {"env"} and isinstance(value["env"], str)):
        raise ConfigError([
            f"{where}: {name}: write {{env: VARIABLE}}, the environment variable holding it; a channel's URL and "
            "secret are never written in the file"
        ])
    variable = value["env"]
    found = environ.get(variable, "")
    if not found:
        raise ConfigError([f"{where}: {name}: the environment variable {variable} is not set (or empty)"])
    return found


def _stored(channel: Channel, name: str) -> str:
    try:
        return encryption.decrypt(channel.url_encrypted if name == "url" else channel.secret_encrypted)
    except encryption.UnreadableSecret:
        return ""


def _form_errors(form: forms.BaseForm, where: str) -> list[str]:
    names = {form_name: file_name for file_name, form_name in SECRET_FIELDS.items()}
    out = []
    for name, messages in form.errors.items():
        shown = names.get(name, name) if name != "__all__" else ""
        for message in messages:
            out.append(f"{where}: {shown + ': ' if shown else ''}{message}")
    return out


def _default(model: type[models.Model], name: str) -> Any:
    if name == "channels":
        return []
    found = model._meta.get_field(name)
    return found.get_default() if isinstance(found, models.Field) else None


def _data(
    section: Section, entry: Mapping[str, Any], channel_ids: Callable[[list[Any]], list[int]], where: str = ""
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in section.fields:
        if section is CHANNELS and name in SECRET_FIELDS:
            continue
        value = entry.get(name, _default(section.model, name))
        if section is RULES and name == "channels":
            value = channel_ids(value if isinstance(value, list) else [value])
        elif section is CHANNELS and name == "team":
            value = _team_id(where, value)
        elif section is TEAMS and isinstance(value, list):
            # The form's field reads a comma-separated list.
            value = ",".join(str(v) for v in value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        data[name] = "" if value is None else value
    return data


def apply(document: Mapping[str, Any], *, prune: bool = False, dry_run: bool = False,
          environ: Mapping[str, str] | None = None, audit: Audit | None = None) -> Outcome:
    """Make the database say what the file says, in one transaction; nothing is written on a problem or a dry
    run. The changes are returned (also for a dry run), never a secret."""
    environ = os.environ if environ is None else environ
    with transaction.atomic():
        outcome = _apply(document, prune=prune, environ=environ, audit=audit or (lambda obj, change: None))
        if dry_run:
            transaction.set_rollback(True)
    return outcome


def _apply(document: Mapping[str, Any], *, prune: bool, environ: Mapping[str, str], audit: Audit) -> Outcome:
    problems: list[str] = []
    changes: list[Change] = []
    kept: list[str] = []
    for section in SECTIONS:
        entries = document.get(section.name) or []
        existing: dict[str, list[Any]] = {}
        queryset = section.model.objects.all()  # type: ignore[attr-defined]
        if section is RULES:
            queryset = queryset.prefetch_related("channels")
        for obj in queryset.order_by("pk"):
            existing.setdefault(getattr(obj, section.key), []).append(obj)
        for index, entry in enumerate(entries):
            key = entry[section.key]
            where = _where(section, index, key)
            found = existing.pop(key, [])
            if len(found) > 1:
                problems.append(f"{where}: several {section.label}s in the database have this {section.key}; "
                                "rename them in the admin so the file names one")
                continue
            try:
                change = _apply_entry(section, entry, found[0] if found else None, where, environ, audit)
            except ConfigError as exc:
                problems += exc.problems
                continue
            if change is not None:
                changes.append(change)
        for key, objs in sorted(existing.items()):
            for obj in objs:
                if prune:
                    changes.append(Change(section, key, "remove"))
                    audit(obj, changes[-1])
                    obj.delete()
                else:
                    kept.append(f"{section.label} {_shown(key)}")
    if problems:
        raise ConfigError(problems)
    return Outcome(changes, kept)


def _team_id(where: str, name: Any) -> int | None:
    """A channel's team, by name."""
    if name in (None, ""):
        return None
    found = Team.objects.filter(name=name).values_list("pk", flat=True).first() if isinstance(name, str) else None
    if found is None:
        raise ConfigError([f"{where}: team: no team named {_shown(name)} (in the file or the database)"])
    return found


def _channel_ids(where: str, names: list[Any]) -> list[int]:
    ids, missing = [], []
    for name in names:
        pk = Channel.objects.filter(name=name).values_list("pk", flat=True).first() if isinstance(name, str) else None
        if pk is None:
            missing.append(name)
        else:
            ids.append(pk)
    if missing:
        raise ConfigError([f"{where}: channels: no channel named {', '.join(_shown(n) for n in missing)} "
                           "(in the file or the database)"])
    return ids


def _apply_entry(section: Section, entry: Mapping[str, Any], obj: Any, where: str,
                 environ: Mapping[str, str], audit: Audit) -> Change | None:
    before = _entry(section, obj) if obj is not None else None
    data = _data(section, entry, lambda names: _channel_ids(where, names), where)
    secrets: dict[str, str] = {}
    if section is CHANNELS:
        problems = []
        for name, form_name in SECRET_FIELDS.items():
            try:
                secrets[name] = _secret(where, name, entry.get(name), environ)
            except ConfigError as exc:
                problems += exc.problems
            data[form_name] = secrets.get(name, "")
        if problems:
            raise ConfigError(problems)
    if section is RULES and obj is not None:
        data["muted_until"] = obj.muted_until
    stored = {name: _stored(obj, name) for name in SECRET_FIELDS} if section is CHANNELS and obj is not None else {}
    if obj is not None and section is CHANNELS:
        # The channel form keeps a stored URL or secret the form leaves empty; the file says them all, so the
        # form checks exactly the file's.
        obj.url_encrypted = obj.secret_encrypted = ""
    form = section.form(data, instance=obj)
    if not form.is_valid():
        raise ConfigError(_form_errors(form, where))
    saved = form.save(commit=False)
    channels = [c.name for c in form.cleaned_data["channels"]] if section is RULES else None
    after = _entry(section, saved, channels=channels)
    if before is None:
        _save(section, form, saved, created=True)
        change = Change(section, entry[section.key], "create")
        audit(saved, change)
        return change
    fields = [(name, before.get(name), after.get(name)) for name in section.fields
              if name not in SECRET_FIELDS and before.get(name) != after.get(name)]
    if section is CHANNELS:
        fields += [(name, None, None) for name in SECRET_FIELDS if stored[name] != secrets[name]]
    if not fields:
        return None
    _save(section, form, saved, created=False)
    change = Change(section, entry[section.key], "change", fields)
    audit(saved, change)
    return change


def _save(section: Section, form: forms.ModelForm, obj: Any, *, created: bool) -> None:
    if section is WINDOWS and created:
        obj.created_by = IMPORTER
    if section is OBJECTIVES:
        obj.updated_by = IMPORTER
    obj.save()
    form.save_m2m()  # type: ignore[attr-defined]
