"""The lookup pages' query strings as forms: every value is checked here, before anything is sent upstream."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.http import QueryDict

from dashboard.sources.models import Source
from dashboard.text import visible
from dashboard.upstream import chains, errors

DEFAULT_PAGE_SIZE = 25
MAX_CREATORS = 25
MAX_CURSOR_LENGTH = 4096
# Cursors are a few hundred characters; keeping only the newest ones keeps URLs under the
# ~4 KB request line many proxies (and gunicorn) accept. "First page" always works.
MAX_CURSOR_STACK = 8

CHAIN_LABELS: dict[str, str] = {
    "eth": "Ethereum",
    "goerli": "Goerli (testnet)",
    "sepolia": "Sepolia (testnet)",
    "polygon": "Polygon",
    "mumbai": "Mumbai (Polygon testnet)",
    "bsc": "BNB Smart Chain",
    "bsc testnet": "BNB Smart Chain testnet",
    "avalanche": "Avalanche C-Chain",
    "fantom": "Fantom",
    "palm": "Palm",
    "cronos": "Cronos",
    "arbitrum": "Arbitrum One",
}
CHAIN_CHOICES = [
    (name, f"{CHAIN_LABELS.get(name, name)} · {name} · {hex_id}")
    for name, hex_id in chains.EVM_CHAINS.items()
]
FORMAT_CHOICES = [("decimal", "Decimal"), ("hex", "Hex (0x…)")]
NETWORK_CHOICES = [("mainnet", "Mainnet"), ("testnet", "Testnet")]
_SPLIT = re.compile(r"[\s,;]+")


def _shown(value: str, limit: int = 70) -> str:
    """A typed value as an error quotes it: clipped, and a direction override cannot reverse the sentence."""
    return visible(value if len(value) <= limit else value[: limit - 1] + "…")


class CursorStackField(forms.Field):
    """The cursors of the pages before this one, oldest first, as a repeated query parameter.

    An empty entry stands for the first page, which has no cursor.
    """

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        if not value:
            return []
        if isinstance(value, str):
            value = [value]
        stack = [str(v) for v in value]
        if any(len(v) > MAX_CURSOR_LENGTH for v in stack):
            raise forms.ValidationError(
                "A page cursor in the link is too long; start again from the first page."
            )
        return stack[-MAX_CURSOR_STACK:]

    def validate(self, value: Any) -> None:
        # Empty is fine: the first page has nothing before it.
        pass


class ShortChoiceField(forms.ChoiceField):
    """A choice whose error quotes the value from the link clipped: a link can carry kilobytes."""

    def validate(self, value: Any) -> None:
        try:
            super().validate(value)
        except forms.ValidationError as exc:
            if exc.code != "invalid_choice":
                raise
            raise forms.ValidationError(
                self.error_messages["invalid_choice"], code="invalid_choice", params={"value": _shown(str(value))}
            ) from None


class SourceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return str(obj.name)


class LookupForm(forms.Form):
    """What both pages share: the source to ask, the page size and the cursor stack."""

    # Shown in the form when a link leaves them out, so the page says what was asked.
    defaults: dict[str, str] = {"limit": str(DEFAULT_PAGE_SIZE)}

    def __init__(self, data: QueryDict | None = None, **kwargs: Any) -> None:
        if data is not None:
            data = data.copy()
            for name, value in self.defaults.items():
                if not data.get(name):
                    data[name] = value
        super().__init__(data, **kwargs)

    source = SourceField(
        queryset=Source.objects.filter(enabled=True),
        required=False,
        empty_label=None,
        error_messages={"invalid_choice": "That source does not exist or is disabled."},
    )
    limit = forms.IntegerField(
        label="Page size",
        required=False,
        min_value=1,
        max_value=100,
        error_messages={
            "min_value": "Page size must be between 1 and 100.",
            "max_value": "Page size must be between 1 and 100.",
            "invalid": "Page size must be a whole number between 1 and 100.",
        },
    )
    cursor = forms.CharField(required=False, max_length=MAX_CURSOR_LENGTH, widget=forms.HiddenInput)
    back = CursorStackField(required=False)
    # Shown only: the page number when the stack has been cut short. Never sent upstream.
    page = forms.IntegerField(required=False, min_value=1, max_value=1_000_000, widget=forms.HiddenInput)

    def clean_limit(self) -> int:
        return self.cleaned_data.get("limit") or DEFAULT_PAGE_SIZE

    def clean_cursor(self) -> str | None:
        return self.cleaned_data.get("cursor") or None


class OwnersForm(LookupForm):
    address = forms.CharField(
        label="Contract address",
        max_length=200,
        widget=forms.TextInput(
            attrs={"placeholder": "0x… (40 hex digits)", "spellcheck": "false", "autocomplete": "off"}
        ),
        error_messages={"required": "Enter an NFT contract address (0x followed by 40 hex digits)."},
    )
    chain = ShortChoiceField(
        label="Chain",
        choices=CHAIN_CHOICES,
        required=False,
        error_messages={
            "invalid_choice": "“%(value)s” is not a chain the provider serves: pick one from the list "
            "(a link may also give its hex id, such as 0x89)."
        },
    )
    format = ShortChoiceField(
        label="Token ids",
        choices=FORMAT_CHOICES,
        required=False,
        error_messages={"invalid_choice": "Token ids are shown as decimal or hex, not “%(value)s”."},
    )
    normalize_metadata = forms.BooleanField(label="Normalize metadata", required=False)
    media_items = forms.BooleanField(label="Media items (thumbnails)", required=False)

    defaults = {**LookupForm.defaults, "chain": "eth", "format": "decimal"}

    def __init__(self, data: QueryDict | None = None, **kwargs: Any) -> None:
        raw_chain = data.get("chain") if data is not None else None
        if data is not None and raw_chain:
            # Hex ids ("0x89") and aliases are accepted in links; the select shows the provider's name.
            try:
                name = chains.chain_name(str(raw_chain))
            except errors.InvalidRequest:
                pass
            else:
                data = data.copy()
                data["chain"] = name
        super().__init__(data, **kwargs)

    def clean_address(self) -> str:
        value = self.cleaned_data["address"]
        try:
            return chains.validate_evm_address(value)
        except errors.InvalidRequest:
            raise forms.ValidationError(
                "“%(value)s” is not a contract address: expected 0x followed by 40 hex digits.",
                params={"value": _shown(value)},
            ) from None

    def clean_chain(self) -> str:
        return self.cleaned_data.get("chain") or "eth"

    def clean_format(self) -> str:
        return self.cleaned_data.get("format") or "decimal"

    @property
    def chain_hex(self) -> str:
        return chains.EVM_CHAINS[self.cleaned_data["chain"]]


class CreatorsForm(LookupForm):
    addresses = forms.CharField(
        label="Creator addresses",
        help_text=f"One per line, up to {MAX_CREATORS}. Aptos account addresses: 0x followed by up to 64 hex digits.",
        max_length=MAX_CREATORS * 80 * 2,
        widget=forms.Textarea(
            attrs={
                "rows": 4,
                "placeholder": "0x4d09404aecb8…ba221",
                "spellcheck": "false",
                "autocomplete": "off",
            }
        ),
        error_messages={"required": "Enter at least one creator address."},
    )
    network = ShortChoiceField(label="Network", choices=NETWORK_CHOICES, required=False)

    defaults = {**LookupForm.defaults, "network": "mainnet"}

    def clean_addresses(self) -> list[str]:
        raw = self.cleaned_data["addresses"]
        entries = [e for e in _SPLIT.split(raw) if e]
        if not entries:
            raise forms.ValidationError("Enter at least one creator address.")
        problems: list[forms.ValidationError] = []
        addresses: list[str] = []
        for number, entry in enumerate(entries, start=1):
            try:
                address = chains.validate_aptos_address(entry)
            except errors.InvalidRequest:
                problems.append(
                    forms.ValidationError(
                        "Address %(number)s, “%(value)s”, is not an Aptos address: "
                        "expected 0x followed by up to 64 hex digits.",
                        params={"number": number, "value": _shown(entry)},
                    )
                )
                continue
            if address not in addresses:
                addresses.append(address)
        if problems:
            raise forms.ValidationError(problems)
        if len(addresses) > MAX_CREATORS:
            raise forms.ValidationError(
                "Up to %(max)s creator addresses at a time; this list has %(count)s.",
                params={"max": MAX_CREATORS, "count": len(addresses)},
            )
        return addresses

    def clean_network(self) -> str:
        return self.cleaned_data.get("network") or "mainnet"
