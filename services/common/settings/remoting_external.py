"""The remoting front's external listener settings (`remoting.external_*`, RemotingSettings):
what a broker advertises there, and the checks at load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqstore.storage import ConfigError

from .host_port import is_host_port, split_addresses

if TYPE_CHECKING:
    from .remoting import RemotingSettings


def external_address(settings: RemotingSettings) -> str:
    """Its entry of `external_advertised_addresses` (one per broker id), else
    `external_advertised_address`, its port plus `broker_id` with
    `external_advertised_port_plus_broker_id`."""
    addresses = split_addresses(settings.external_advertised_addresses)
    if addresses:
        return addresses[settings.broker_id]
    if not settings.external_advertised_port_plus_broker_id:
        return settings.external_advertised_address
    host, _, port = settings.external_advertised_address.rpartition(":")
    return f"{host}:{int(port) + settings.broker_id}"


def check_external(settings: RemotingSettings) -> None:
    if not 0 <= settings.external_port <= 65535:
        raise ConfigError(f"external_port={settings.external_port} must be in 0..65535")
    if not settings.external_enabled:
        return
    advertised = settings.external_advertised_address
    if not is_host_port(advertised):
        raise ConfigError(f"external_advertised_address={advertised!r} must be host:port "
                          f"with a port in 1..65535 (external_enabled is on)")
    plus = settings.broker_id if settings.external_advertised_port_plus_broker_id else 0
    if int(advertised.rpartition(":")[2]) + plus > 65535:
        raise ConfigError(f"external_advertised_address={advertised!r}: its port plus "
                          f"broker_id={settings.broker_id} passes 65535")
    if settings.external_port == settings.port != 0:
        raise ConfigError(f"external_port={settings.external_port} must differ from "
                          f"port={settings.port}")
    addresses = split_addresses(settings.external_advertised_addresses)
    for address in addresses:
        if not is_host_port(address):
            raise ConfigError(f"external_advertised_addresses: {address!r} must be host:port "
                              f"with a port in 1..65535 (entries separated by ';')")
    if addresses and settings.broker_id >= len(addresses):
        raise ConfigError(f"external_advertised_addresses has {len(addresses)} entries: none "
                          f"for broker_id={settings.broker_id}")
