"""The Broker's ConfigMap: the one config file (services/common/config_file.py) that the
init container and the three containers read, and the hash that rolls the pods."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from . import names
from .spec import BrokerSpec, store_settings

CONFIG_HASH_LENGTH = 16
"""Hex digits of sha256 kept: 64 bits, no collision among a broker's config versions."""


def config_document(spec: BrokerSpec) -> dict[str, Any]:
    """The config file as a dict.  The three containers share the pod's network namespace,
    so the notifier reaches the indexer's notice stream on 127.0.0.1."""
    return {
        "data_dir": names.DATA_DIR,
        "store": store_settings(spec),
        "writer": {"port": names.WRITER_PORT},
        "indexer": {"port": names.INDEXER_PORT},
        "notifier": {"port": names.NOTIFIER_PORT,
                     "indexer_url": f"http://127.0.0.1:{names.INDEXER_PORT}"},
    }


def render_config(spec: BrokerSpec) -> str:
    """The file's text: sorted keys, so equal settings give equal text and an equal hash."""
    return yaml.safe_dump(config_document(spec), sort_keys=True, default_flow_style=False)


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:CONFIG_HASH_LENGTH]


def build_config_map(broker: Mapping[str, Any], spec: BrokerSpec) -> dict[str, Any]:
    text = render_config(spec)
    metadata = names.child_metadata(broker, names.config_map_name(broker["metadata"]["name"]))
    metadata["annotations"] = {names.CONFIG_HASH_ANNOTATION: config_hash(text)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {names.CONFIG_FILE: text}}
