"""Decoding a payload's logs and transaction inputs with the payload's own `abi`: the events and functions
the stream asked for. No Django: the search keys (at ingest) and the delivery page both read this.

The ABI coding is the Ethereum Foundation's `eth-abi` and the hashing `eth-utils` (keccak): an event's
topic0 is the keccak of its canonical signature, a function's selector the first four bytes of it. This
module only checks the untrusted ABI entries and payload values before handing them over, and says in a
few words why a log or an input could not be decoded (the page then shows it raw).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson
from eth_abi.decoding import AddressDecoder, ContextFramesBytesIO, StringDecoder
from eth_abi.grammar import ABIType, BasicType, TupleType, normalize, parse
from eth_abi.registry import BaseEquals, registry
from eth_utils import event_signature_to_log_topic, function_signature_to_4byte_selector

# Bounds on untrusted input: an ABI is read up to ABI_ENTRIES entries, parameters nest at most
# NESTING deep, and logs or inputs longer than MAX_DATA_BYTES are not decoded (every real event and
# call the ABI describes is far smaller; the page shows them raw with the reason).
ABI_ENTRIES = 500
PARAMS = 64
NESTING = 8
MAX_DATA_BYTES = 64 * 1024
MAX_NAME_CHARS = 200
CACHED_ABI_BYTES = 256 * 1024
# Decoded arrays longer than this keep their first items; `Value.more` says how many were left out.
ARRAY_ITEMS = 200

# Hex digits after 0x; an even count is checked apart (a repeated pair in the pattern costs several times more).
_HEX = re.compile(r"0x[0-9a-fA-F]*")
_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,63}$")
# The types an indexed argument keeps in its topic; any other indexed type (string, bytes, arrays,
# tuples) is stored as the keccak hash of its encoding, which cannot be turned back into the value.
_VALUE_TOPIC_BASES = {"address", "bool", "uint", "int", "bytes", "fixed", "ufixed"}


class _LowerAddressDecoder(AddressDecoder):
    # The stock decoder checksums every address through eth-utils (most of a Transfer's decoding time);
    # the search keys and the page want lower case. Padding is still checked by the base decoder.
    decoder_fn = staticmethod(lambda data: "0x" + data.hex())  # type: ignore[assignment]


class _LenientStringDecoder(StringDecoder):
    # A contract may emit bytes that are not UTF-8 in a `string`; show them with U+FFFD, not fail the log.
    def __init__(self) -> None:
        super().__init__(handle_string_errors="replace")


# eth-abi's registry with those two decoders replaced.
REGISTRY = registry.copy()
REGISTRY.unregister("address")
REGISTRY.register_decoder(BaseEquals("address"), _LowerAddressDecoder, label="address")
REGISTRY.unregister("string")
REGISTRY.register_decoder(BaseEquals("string"), _LenientStringDecoder, label="string")


@functools.lru_cache(maxsize=1024)
def tuple_decoder(types: tuple[str, ...]) -> Callable[[bytes], tuple[Any, ...]]:
    """What `ABICodec(REGISTRY).decode(types, data)` does (strict), built once per list of types.

    A tuple of static values holds no pointers, and eth-abi's pointer check before decoding it only
    decodes every value once more (same checks, same errors, in the same order): each value's decoder
    runs once here instead. Values, errors and their messages are the codec's."""
    decoder = REGISTRY.get_tuple_decoder(*types)
    if decoder.is_dynamic:
        return lambda data: cast(tuple[Any, ...], decoder(ContextFramesBytesIO(data)))
    parts = decoder.decoders

    def decode(data: bytes) -> tuple[Any, ...]:
        stream = ContextFramesBytesIO(data)
        return tuple([part(stream) for part in parts])

    return decode


class AbiEntryError(ValueError):
    """An ABI entry this module will not use; the message says why."""


@dataclass(frozen=True)
class Param:
    """One validated parameter: its canonical type (tuples collapsed), and its fields when a tuple."""

    name: str
    type: str
    indexed: bool = False
    components: tuple[Param, ...] = ()


# Appends the addresses of one raw decoded value to a list (`address_picker`).
AddressPicker = Callable[[Any, list[str]], None]


@dataclass(frozen=True)
class Layout:
    """Where an item's values are, worked out once per item: the indexed parameters (one topic each, in
    order), whether each keeps its value in its topic (else the topic holds a hash), and the types decoded
    from the data (the non-indexed parameters; every parameter of a function's input) and from the topics."""

    indexed: tuple[Param, ...]
    value_topics: tuple[bool, ...]
    data_types: tuple[str, ...]
    topic_types: tuple[str, ...]
    # Per parameter, what picks the addresses out of its raw value (None: it holds none).
    address_pickers: tuple[AddressPicker | None, ...]


@dataclass(frozen=True)
class AbiItem:
    kind: str  # "event" | "function"
    name: str
    params: tuple[Param, ...]
    signature: str  # Name(type,type,...)
    selector: bytes  # an event's topic0 (32 bytes), a function's selector (4 bytes)
    anonymous: bool = False

    @functools.cached_property
    def layout(self) -> Layout:
        indexed = tuple(p for p in self.params if p.indexed)
        value_topics = tuple(_value_topic(p.type) for p in indexed)
        return Layout(
            indexed,
            value_topics,
            tuple(p.type for p in self.params if not p.indexed),
            tuple(p.type for p, keeps in zip(indexed, value_topics, strict=True) if keeps),
            tuple(address_picker(p.type) for p in self.params),
        )

    @property
    def indexed_count(self) -> int:
        return sum(1 for p in self.params if p.indexed)


@dataclass(frozen=True)
class AbiProblem:
    position: int
    name: str
    reason: str


@dataclass(frozen=True)
class ContractAbi:
    """The usable events and functions of one payload ABI, keyed by topic0 and selector."""

    events: dict[bytes, tuple[AbiItem, ...]]
    functions: dict[bytes, tuple[AbiItem, ...]]
    anonymous: tuple[AbiItem, ...]
    problems: tuple[AbiProblem, ...]
    # Entry position -> the item read from it (for the ABI table beside the decoded logs).
    items: dict[int, AbiItem]


@dataclass(frozen=True)
class Value:
    """One decoded argument. `kind` is address, int, bool, bytes, string, fixed, hash (an indexed value
    only its keccak hash is known of), tuple or array; tuples and arrays hold `items`."""

    name: str
    type: str
    kind: str
    value: Any = None
    items: tuple[Value, ...] = ()
    indexed: bool = False
    more: int = 0  # array items left out after ARRAY_ITEMS


@dataclass(frozen=True)
class Decoded:
    """A decoded log or input: `item` and `args` when it decoded, else `problem` in a few words."""

    item: AbiItem | None = None
    args: tuple[Value, ...] = ()
    problem: str = ""

    @property
    def name(self) -> str:
        return self.item.name if self.item else ""


# -- reading the ABI ----------------------------------------------------------------------------------


def _name(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AbiEntryError("a name is not text")
    if len(value) > MAX_NAME_CHARS:
        raise AbiEntryError(f"a name is longer than {MAX_NAME_CHARS} characters")
    return value


def _param(raw: Any, depth: int, *, event: bool) -> Param:
    if not isinstance(raw, dict):
        raise AbiEntryError("a parameter is not an object")
    if depth > NESTING:
        raise AbiEntryError(f"tuples nest deeper than {NESTING} levels")
    type_ = raw.get("type")
    if not isinstance(type_, str) or not type_ or len(type_) > 200:
        raise AbiEntryError("a parameter has no type")
    name = _name(raw.get("name"))
    indexed = raw.get("indexed", False)
    if not isinstance(indexed, bool):
        raise AbiEntryError(f"“indexed” of {name or 'a parameter'} is not true or false")
    components: tuple[Param, ...] = ()
    if type_.startswith("tuple"):
        raw_components = raw.get("components")
        if not isinstance(raw_components, list) or len(raw_components) > PARAMS:
            raise AbiEntryError(f"the tuple {name or ''} has no list of components".replace("  ", " "))
        components = tuple(_param(c, depth + 1, event=False) for c in raw_components)
        canonical = "(" + ",".join(c.type for c in components) + ")" + type_[len("tuple"):]
    else:
        canonical = type_
    try:
        parsed = parse(normalize(canonical))
        parsed.validate()
    except Exception as exc:  # noqa: BLE001 - any grammar error means the type is unusable
        raise AbiEntryError(f"the type “{type_}” is not an ABI type") from exc
    if _has_empty_tuple(parsed):
        raise AbiEntryError("a tuple has no components")
    return Param(name, parsed.to_type_str(), indexed and event, components)


def _has_empty_tuple(parsed: ABIType) -> bool:
    if isinstance(parsed, TupleType):
        return not parsed.components or any(_has_empty_tuple(c) for c in parsed.components)
    return False


def _item(raw: Any) -> AbiItem | None:
    """The event or function of an entry; None for the entries nothing is decoded with (constructor,
    fallback, receive, error). Raises AbiEntryError for an entry that cannot be used."""
    if not isinstance(raw, dict):
        raise AbiEntryError("the entry is not an object")
    kind = raw.get("type", "function")
    if kind not in ("event", "function"):
        if isinstance(kind, str) and kind in ("constructor", "fallback", "receive", "error"):
            return None
        raise AbiEntryError("the entry's type is not event, function, constructor, fallback, receive or error")
    name = _name(raw.get("name"))
    if not _IDENTIFIER.match(name):
        raise AbiEntryError(f"the {kind} has no valid name")
    raw_inputs = raw.get("inputs", [])
    if not isinstance(raw_inputs, list):
        raise AbiEntryError("the inputs are not a list")
    if len(raw_inputs) > PARAMS:
        raise AbiEntryError(f"more than {PARAMS} inputs")
    params = tuple(_param(p, 1, event=kind == "event") for p in raw_inputs)
    anonymous = raw.get("anonymous", False) is True and kind == "event"
    if anonymous and sum(p.indexed for p in params) > 4 or not anonymous and sum(p.indexed for p in params) > 3:
        raise AbiEntryError("more indexed arguments than a log has topics")
    signature = f"{name}({','.join(p.type for p in params)})"
    if kind == "event":
        selector = bytes(event_signature_to_log_topic(signature))
    else:
        selector = bytes(function_signature_to_4byte_selector(signature))
    return AbiItem(kind, name, params, signature, selector, anonymous)


def read_abi(abi: Any) -> ContractAbi:
    """The events and functions of a payload's `abi`; entries that cannot be used are listed as
    problems with the reason. Streams repeat one ABI in every payload, so results are cached."""
    if not isinstance(abi, list) or not abi:
        return _EMPTY
    try:
        key = orjson.dumps(abi[:ABI_ENTRIES], option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return _read_abi(abi)
    # A huge ABI is read each time rather than held in the cache.
    return _read_abi_cached(key) if len(key) <= CACHED_ABI_BYTES else _read_abi(abi)


@functools.lru_cache(maxsize=256)
def _read_abi_cached(key: bytes) -> ContractAbi:
    return _read_abi(orjson.loads(key))


def _read_abi(abi: list[Any]) -> ContractAbi:
    events: dict[bytes, list[AbiItem]] = {}
    functions: dict[bytes, list[AbiItem]] = {}
    anonymous: list[AbiItem] = []
    problems: list[AbiProblem] = []
    items: dict[int, AbiItem] = {}
    for position, raw in enumerate(abi[:ABI_ENTRIES]):
        try:
            item = _item(raw)
        except AbiEntryError as exc:
            name = raw.get("name") if isinstance(raw, dict) else None
            problems.append(AbiProblem(position, name[:MAX_NAME_CHARS] if isinstance(name, str) else "", str(exc)))
            continue
        if item is None:
            continue
        items[position] = item
        if item.kind == "function":
            functions.setdefault(item.selector, []).append(item)
        elif item.anonymous:
            anonymous.append(item)
        else:
            events.setdefault(item.selector, []).append(item)
    return ContractAbi(
        {k: tuple(v) for k, v in events.items()},
        {k: tuple(v) for k, v in functions.items()},
        tuple(anonymous),
        tuple(problems),
        items,
    )


_EMPTY = ContractAbi({}, {}, (), (), {})


# -- decoding -----------------------------------------------------------------------------------------


def _hex_bytes(value: Any) -> bytes | None:
    if not isinstance(value, str) or len(value) % 2 or not _HEX.fullmatch(value):
        return None
    return bytes.fromhex(value[2:])


_TOPIC_KEYS = ("topic0", "topic1", "topic2", "topic3")


def _topics(log: dict[str, Any]) -> list[Any]:
    topics = [log.get(key) for key in _TOPIC_KEYS]
    while topics and topics[-1] is None:
        topics.pop()
    return topics


# A decoded indexed argument of which the topic holds only a hash: its place among the raw values.
_HASHED = object()


@dataclass(frozen=True)
class _Matched:
    """A log or input matched to its ABI item and decoded: `values` in the item's parameter order, as eth-abi
    returns them (`_HASHED` for an indexed argument whose topic holds a hash, `topics` holding it); else
    `problem`."""

    item: AbiItem | None = None
    values: tuple[Any, ...] = ()
    topics: tuple[bytes, ...] = ()
    problem: str = ""


def decode_log(abi: ContractAbi, log: dict[str, Any]) -> Decoded:
    """The event of one payload log (`topic0`…`topic3`, `data`), matched by topic0 among the ABI's events.
    When several events share a topic0 (ERC-20 and ERC-721 `Transfer`), the one whose indexed arguments
    fit the log's topics is taken."""
    return _wrapped(_match_log(abi, log))


def decode_input(abi: ContractAbi, data_hex: Any) -> Decoded | None:
    """The function call of a transaction's `input`; None when there is no call (empty input)."""
    matched = _match_input(abi, data_hex)
    return None if matched is None else _wrapped(matched)


def log_addresses(abi: ContractAbi, log: dict[str, Any]) -> tuple[AbiItem, list[str]] | None:
    """The event a log decodes as and every address among its arguments (the `address` values of
    `decode_log(abi, log).args`, in order, tuples and arrays included), without building the arguments; None
    when it does not decode."""
    return _picked(_match_log(abi, log))


def input_addresses(abi: ContractAbi, data_hex: Any) -> tuple[AbiItem, list[str]] | None:
    """`log_addresses` of a transaction's input: the call and the addresses among its arguments."""
    matched = _match_input(abi, data_hex)
    return None if matched is None else _picked(matched)


def _match_log(abi: ContractAbi, log: dict[str, Any]) -> _Matched:
    topics = _topics(log)
    if not topics or topics[0] is None:
        why = "the log has no topic0 (an anonymous event)"
        if abi.anonymous:
            why += "; the ABI's anonymous events carry no topic to match them by"
        return _Matched(problem=why)
    for topic in topics:
        if not (isinstance(topic, str) and _HEX32.match(topic)):
            return _Matched(problem="a topic is not 32 bytes of hex")
    data = _hex_bytes(log.get("data") or "0x")
    if data is None:
        return _Matched(problem="the data is not hex")
    if len(data) > MAX_DATA_BYTES:
        return _Matched(problem=f"the data is {len(data):,} bytes, more than this page decodes")
    candidates = abi.events.get(bytes.fromhex(topics[0][2:]), ())
    if not candidates:
        why = "no event in the ABI has this topic0"
        if abi.anonymous:
            why += " (the ABI's anonymous events cannot be matched by topic)"
        return _Matched(problem=why)
    indexed = tuple(bytes.fromhex(t[2:]) for t in topics[1:])
    first_problem = ""
    for item in candidates:
        matched = _decode_event(item, indexed, data)
        if not matched.problem:
            return matched
        first_problem = first_problem or matched.problem
    return _Matched(problem=first_problem)


def _decode_event(item: AbiItem, topics: tuple[bytes, ...], data: bytes) -> _Matched:
    layout = item.layout
    if len(layout.indexed) != len(topics):
        count = len(layout.indexed)
        return _Matched(
            problem=f"{item.signature} has {count} indexed argument{'s' if count != 1 else ''}, "
            f"the log {len(topics)} topic{'s' if len(topics) != 1 else ''} after topic0"
        )
    try:
        if not layout.data_types and data:
            raise ValueError(f"{len(data)} bytes of data where the event has none")
        plain_values = iter(tuple_decoder(layout.data_types)(data) if layout.data_types else ())
        # Topics of value types are one word each: decoded together in one call (one call per value costs
        # more than the decoding itself); the others hold a hash.
        topic_values = iter(
            tuple_decoder(layout.topic_types)(
                b"".join(t for t, keeps in zip(topics, layout.value_topics, strict=True) if keeps)
            )
            if layout.topic_types else ()
        )
    except Exception as exc:  # noqa: BLE001 - eth-abi raises several kinds on untrusted data
        return _Matched(problem=f"the log does not decode as {item.signature}: {_reason(exc)}")
    keeps = iter(layout.value_topics)
    values = tuple(
        (next(topic_values) if next(keeps) else _HASHED) if param.indexed else next(plain_values)
        for param in item.params
    )
    return _Matched(item, values, topics)


def _match_input(abi: ContractAbi, data_hex: Any) -> _Matched | None:
    data = _hex_bytes(data_hex) if isinstance(data_hex, str) else None
    if data is None:
        return _Matched(problem="the input is not hex") if data_hex not in (None, "") else None
    if not data:
        return None
    if len(data) < 4:
        return _Matched(problem="the input is shorter than a function selector")
    if len(data) > MAX_DATA_BYTES:
        return _Matched(problem=f"the input is {len(data):,} bytes, more than this page decodes")
    candidates = abi.functions.get(data[:4], ())
    if not candidates:
        return _Matched(problem=f"no function in the ABI has the selector 0x{data[:4].hex()}")
    first_problem = ""
    for item in candidates:
        try:
            values = tuple_decoder(item.layout.data_types)(data[4:])
        except Exception as exc:  # noqa: BLE001 - eth-abi raises several kinds on untrusted data
            first_problem = first_problem or f"the input does not decode as {item.signature}: {_reason(exc)}"
            continue
        return _Matched(item, values)
    return _Matched(problem=first_problem)


def _wrapped(matched: _Matched) -> Decoded:
    """The decoded arguments of a match, as the page shows them."""
    item = matched.item
    if item is None:
        return Decoded(problem=matched.problem)
    topics = iter(matched.topics)
    args: list[Value] = []
    for param, value in zip(item.params, matched.values, strict=True):
        topic = next(topics) if param.indexed else b""
        if value is _HASHED:
            args.append(Value(param.name, param.type, "hash", "0x" + topic.hex(), indexed=True))
        else:
            args.append(_value(param, param.type, value, indexed=param.indexed))
    return Decoded(item, tuple(args))


def _picked(matched: _Matched) -> tuple[AbiItem, list[str]] | None:
    item = matched.item
    if item is None:
        return None
    found: list[str] = []
    for pick, value in zip(item.layout.address_pickers, matched.values, strict=True):
        if pick is not None and value is not _HASHED:
            pick(value, found)
    return item, found


@functools.lru_cache(maxsize=1024)
def address_picker(type_: str) -> AddressPicker | None:
    """What appends the addresses in a raw decoded value of this type to a list, in the order of the `address`
    values in its `Value` (arrays cut at ARRAY_ITEMS as `_value` cuts them); None when the type holds no
    address."""
    parsed = parse(type_)
    if parsed.arrlist:
        each = address_picker(parsed.item_type.to_type_str())
        if each is None:
            return None

        def pick_items(value: Any, found: list[str], each: AddressPicker = each) -> None:
            for item in value[:ARRAY_ITEMS]:
                each(item, found)

        return pick_items
    if isinstance(parsed, TupleType):
        parts = tuple(address_picker(c.to_type_str()) for c in parsed.components)
        if all(part is None for part in parts):
            return None

        def pick_fields(value: Any, found: list[str]) -> None:
            for part, field_value in zip(parts, value, strict=True):
                if part is not None:
                    part(field_value, found)

        return pick_fields
    if isinstance(parsed, BasicType) and parsed.base == "address":
        return lambda value, found: found.append(str(value).lower())
    return None


@functools.lru_cache(maxsize=1024)
def _value_topic(type_: str) -> bool:
    """Whether an indexed argument of this type keeps its value in the topic (else its hash)."""
    parsed = parse(type_)
    return isinstance(parsed, BasicType) and not parsed.arrlist and parsed.base in _VALUE_TOPIC_BASES and (
        parsed.base != "bytes" or bool(parsed.sub)
    )


def _reason(exc: Exception) -> str:
    text = str(exc).split("\n")[0]
    return (text[:160] + "…") if len(text) > 160 else text or type(exc).__name__


def _value(param: Param, type_: str, value: Any, *, indexed: bool) -> Value:
    parsed = parse(type_)
    if parsed.arrlist:
        item_type = parsed.item_type.to_type_str()
        items = tuple(
            _value(Param(f"[{n}]", item_type, components=param.components), item_type, v, indexed=False)
            for n, v in enumerate(value[:ARRAY_ITEMS])
        )
        return Value(param.name, type_, "array", None, items, indexed, max(0, len(value) - ARRAY_ITEMS))
    if isinstance(parsed, TupleType):
        fields = param.components or tuple(Param("", c.to_type_str()) for c in parsed.components)
        items = tuple(
            _value(Param(f.name or f"[{n}]", f.type, components=f.components), f.type, v, indexed=False)
            for n, (f, v) in enumerate(zip(fields, value, strict=True))
        )
        return Value(param.name, type_, "tuple", None, items, indexed)
    base = parsed.base if isinstance(parsed, BasicType) else ""
    if base == "address":
        return Value(param.name, type_, "address", str(value).lower(), indexed=indexed)
    if base in ("uint", "int"):
        return Value(param.name, type_, "int", int(value), indexed=indexed)
    if base == "bool":
        return Value(param.name, type_, "bool", bool(value), indexed=indexed)
    if base == "string":
        return Value(param.name, type_, "string", str(value), indexed=indexed)
    if base in ("fixed", "ufixed"):
        return Value(param.name, type_, "fixed", str(value), indexed=indexed)
    return Value(param.name, type_, "bytes", "0x" + bytes(value).hex(), indexed=indexed)


# -- token amounts ------------------------------------------------------------------------------------

# The ERC-20 events (of the emitting contract) and calls (to the called contract) whose uint256 argument
# is an amount of that token.
TOKEN_AMOUNT_EVENTS = {"Transfer(address,address,uint256)", "Approval(address,address,uint256)"}
TOKEN_AMOUNT_CALLS = {
    "transfer(address,uint256)", "approve(address,uint256)", "transferFrom(address,address,uint256)",
}


@dataclass(frozen=True)
class Token:
    decimals: int
    symbol: str


def tokens(payload: dict[str, Any]) -> dict[str, Token]:
    """Contract address (lower case) -> decimals and symbol, from the payload's erc20Transfers and
    erc20Approvals (`tokenDecimals`, `tokenSymbol`); contracts without readable decimals are left out."""
    found: dict[str, Token] = {}
    for name in ("erc20Transfers", "erc20Approvals"):
        items = payload.get(name)
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("contract"), str):
                continue
            decimals = item.get("tokenDecimals")
            try:
                places = int(str(decimals))
            except ValueError:
                continue
            if 0 <= places <= 77:
                symbol = item.get("tokenSymbol")
                found.setdefault(
                    item["contract"].lower(), Token(places, symbol[:32] if isinstance(symbol, str) else "")
                )
    return found


def token_amount(value: int, decimals: int) -> str:
    """An integer amount in the token's units: 1250000000 at 6 decimals is "1,250", 1 is "0.000001"."""
    sign = "-" if value < 0 else ""
    whole, fraction = divmod(abs(value), 10**decimals)
    text = f"{sign}{whole:,}"
    if fraction:
        text += "." + f"{fraction:0{decimals}d}".rstrip("0")
    return text

