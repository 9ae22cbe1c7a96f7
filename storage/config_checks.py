"""The checks `StoreConfig.__post_init__` runs that are more than one comparison.

Each raises `ConfigError` naming the settings involved and what would make them work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ConfigError
from .roles import BrokerRole

if TYPE_CHECKING:
    from .config import StoreConfig


def check_positive(config: StoreConfig, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name}={value!r} must be a positive integer")


def check_name_and_property_sizes(config: StoreConfig) -> None:
    """The sizes RocketMQ's formats bound: properties in a signed short, a topic in a name."""
    if not 0 < config.properties_size_bytes_max <= 32767:
        raise ConfigError("properties_size_bytes_max must be in 1..32767 (a signed short)")
    if not 0 < config.topic_size_bytes_max <= 255:
        raise ConfigError("topic_size_bytes_max must be in 1..255 (a topic names a "
                          "consumequeue/ directory; NAME_MAX is 255 bytes)")


def check_non_negative(config: StoreConfig, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name}={value!r} must be a non-negative integer")


def check_multiples(config: StoreConfig, *, page_size_bytes: int) -> None:
    """Sizes that must divide evenly: a consume queue file into entries, a segment and a
    consume queue allocation step into pages (both are mapped in by page)."""
    if config.consume_queue_file_size_bytes % 20:
        raise ConfigError(f"consume_queue_file_size_bytes={config.consume_queue_file_size_bytes}"
                          f" must be a multiple of the 20-byte entry")
    for name in ("segment_size_bytes", "consume_queue_allocate_step_bytes"):
        if getattr(config, name) % page_size_bytes:
            raise ConfigError(f"{name}={getattr(config, name)} must be a multiple of the "
                              f"{page_size_bytes}-byte page")


def check_race(config: StoreConfig) -> None:
    align = config.group_commit_align_bytes
    if (not isinstance(align, int) or isinstance(align, bool) or align < 0
            or align & (align - 1) or config.segment_size_bytes % max(align, 1)):
        raise ConfigError(f"group_commit_align_bytes={align!r} must be 0 (off) or a power of "
                          f"two dividing segment_size_bytes={config.segment_size_bytes}")
    classes = config.read_cache_size_classes_bytes
    if not classes or any(not isinstance(size, int) or size <= 0 for size in classes) \
            or list(classes) != sorted(set(classes)):
        raise ConfigError(f"read_cache_size_classes_bytes={classes!r} must be positive block "
                          f"sizes, strictly ascending")
    if classes[-1] > config.read_cache_capacity_bytes:
        raise ConfigError(f"read_cache_capacity_bytes={config.read_cache_capacity_bytes} must "
                          f"hold one block of the largest size class ({classes[-1]} bytes)")


def check_ratios(config: StoreConfig) -> None:
    for name in ("disk_max_used_ratio", "disk_clean_forcibly_ratio", "disk_warning_ratio"):
        value = getattr(config, name)
        if not isinstance(value, int | float) or not 0 < value <= 1:
            raise ConfigError(f"{name}={value!r} must be a ratio in (0, 1]")
    if not config.disk_max_used_ratio <= config.disk_clean_forcibly_ratio \
            <= config.disk_warning_ratio:
        raise ConfigError("need disk_max_used_ratio <= disk_clean_forcibly_ratio <= "
                          "disk_warning_ratio: writes are refused only after forced deletion "
                          "has had its chance")
    if not all(isinstance(hour, int) and 0 <= hour <= 23 for hour in config.delete_hours):
        raise ConfigError(f"delete_hours={config.delete_hours!r} must be hours 0..23")


def check_role(config: StoreConfig) -> None:
    if not isinstance(config.role, BrokerRole):
        raise ConfigError(f"role={config.role!r} must be one of "
                          f"{', '.join(role.value for role in BrokerRole)}")
    if config.role is BrokerRole.FOLLOWER and config.pool_enabled:
        raise ConfigError("role=follower with pool_enabled=true: a follower appends the "
                          "master's bytes straight into its segments and never uses the pool "
                          "(RocketMQ also disables it on slaves); turn pool_enabled off")
    if config.role is BrokerRole.FOLLOWER and config.group_commit_align_bytes:
        raise ConfigError("role=follower with group_commit_align_bytes: a follower's log is the "
                          "master's byte for byte, so it cannot add filler records")


def check_record_fits(config: StoreConfig, *, record_fixed_bytes_max: int) -> None:
    """The largest record plus the 8-byte BLANK reserve fits into one segment, and one batch
    put holds at least one such record."""
    record_bytes_max = (record_fixed_bytes_max + config.message_body_size_bytes_max
                        + config.topic_size_bytes_max + config.properties_size_bytes_max)
    if record_bytes_max + 8 > config.segment_size_bytes:
        raise ConfigError(
            f"a record of message_body_size_bytes_max={config.message_body_size_bytes_max} "
            f"with topic and properties at their maxima is {record_bytes_max} bytes, which "
            f"with the 8-byte BLANK reserve does not fit in segment_size_bytes="
            f"{config.segment_size_bytes}; lower the maxima or raise the segment size")
    if config.put_batch_size_bytes_max + 8 > config.segment_size_bytes:
        raise ConfigError(f"put_batch_size_bytes_max={config.put_batch_size_bytes_max} plus "
                          f"the 8-byte BLANK reserve must fit in segment_size_bytes="
                          f"{config.segment_size_bytes}")
    if config.put_batch_size_bytes_max < record_bytes_max:
        raise ConfigError(f"put_batch_size_bytes_max={config.put_batch_size_bytes_max} must "
                          f"hold at least one largest record ({record_bytes_max} bytes)")
