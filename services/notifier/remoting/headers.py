"""Reading a request's custom header (its ext fields) as RocketMQ's header classes declare them.

Every value arrives as text.  A required (`@CFNotNull`) field that is missing, or a number
that is not one, answers SYSTEM_ERROR with a remark naming the field, as a RocketMQ broker's
`decodeCommandCustomHeader` does; the request reads and writes nothing.  So does a field
that is not UTF-8 text (a lone surrogate from a JSON header, `"\\ud800"`): no handler looks
it up, stores it or echoes it.
"""

from __future__ import annotations

from mqstore.services.notifier.remoting.codes import SYSTEM_ERROR, RemotingError
from mqstore.services.notifier.remoting.frame import Command

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

EXTERNAL_ADDRESS_FIELD = "externalBrokerAddr"
"""mqstore's REGISTER_BROKER header, sent with `remoting.external_enabled` (RocketMQ's name
server ignores it): where the broker's external listener is reached from outside the
cluster network, which mqstore's name server gives clients on its own external listener."""


def text(request: Command, name: str, *aliases: str) -> str:
    """A required text field (`aliases`: the short names of SEND_MESSAGE_V2's header)."""
    value = optional_text(request, name, *aliases)
    if value is None:
        raise RemotingError(SYSTEM_ERROR, f"the custom field <{name}> is null (request code "
                                          f"{request.code})")
    return value


def optional_text(request: Command, name: str, *aliases: str) -> str | None:
    fields = request.ext_fields
    for key in (name, *aliases):
        value = fields.get(key)
        if value is not None:
            if not is_text(value):
                raise RemotingError(SYSTEM_ERROR, f"the custom field <{name}> is not UTF-8 "
                                                  f"text (a lone surrogate)")
            return value
    return None


def is_text(value: str) -> bool:
    """False for a string UTF-8 cannot encode: a lone surrogate, which a JSON header or body
    can carry as `\\ud800` (a binary header cannot: its bytes decode with replacement)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def number(request: Command, name: str, *aliases: str, minimum: int = INT64_MIN,
           maximum: int = INT64_MAX, default: int | None = None) -> int:
    """A required integer field (or `default` when absent), within [minimum, maximum]."""
    value = optional_text(request, name, *aliases)
    if value is None:
        if default is not None:
            return default
        raise RemotingError(SYSTEM_ERROR, f"the custom field <{name}> is null (request code "
                                          f"{request.code})")
    try:
        parsed = int(value.strip())
    except ValueError:
        raise RemotingError(SYSTEM_ERROR, f"the custom field <{name}> must be an integer, not "
                                          f"{value[:40]!r}") from None
    if not minimum <= parsed <= maximum:
        raise RemotingError(SYSTEM_ERROR, f"the custom field <{name}>={parsed} is outside "
                                          f"[{minimum}, {maximum}]")
    return parsed


def flag(request: Command, name: str, *aliases: str, default: bool = False) -> bool:
    value = optional_text(request, name, *aliases)
    return default if value is None else value.strip().lower() == "true"


def queue_id(request: Command, name: str = "queueId", *aliases: str) -> int:
    return number(request, name, *aliases, minimum=INT32_MIN, maximum=INT32_MAX)
