"""`mqstore up --groups N`'s layout (services/cli/up_groups.py): every listener of the name
server and of N groups on a port of its own, each group on its own directory and broker name;
a count, a layout or a port the machine refuses is one line and exit 2, before anything
starts.  The processes themselves: tests/remoting_clients/test_up_groups_clients.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mqstore.services.cli.command import main
from mqstore.services.cli.up import EXIT_USAGE, UpError, UpOptions
from mqstore.services.cli.up_groups import (
    CLUSTER_NAME,
    GROUP_PORT_STRIDE,
    GROUPS_MAX,
    group_layout,
)
from mqstore.services.common.process.local_ports import UP_PORTS


@pytest.mark.parametrize("group_count", [2, 3, GROUPS_MAX])
def test_layout_gives_every_listener_its_own_port(tmp_path: Path, group_count: int) -> None:
    options = UpOptions(data_dir=tmp_path, ports=dict(UP_PORTS))
    groups = group_layout(options, group_count=group_count)
    ports = [UP_PORTS["remoting"], *(port for group in groups for port in group.ports.values())]
    assert len(set(ports)) == len(ports) == 1 + 5 * group_count
    assert max(ports) <= 65535
    for index, group in enumerate(groups):
        assert group.data_dir == tmp_path / f"g{index}"
        assert group.ports == {name: port + GROUP_PORT_STRIDE * (index + 1)
                               for name, port in UP_PORTS.items()}
        assert group.broker is not None
        assert group.broker.broker_name == f"mqstore-g{index}"
        assert group.broker.cluster_name == CLUSTER_NAME
        assert group.broker.namesrv_address == f"127.0.0.1:{UP_PORTS['remoting']}"
        assert group.host == options.host


def test_layout_of_the_defaults_is_the_documented_table(tmp_path: Path) -> None:
    """The module docstring's rows g0 and g15."""
    groups = group_layout(UpOptions(data_dir=tmp_path, ports=dict(UP_PORTS)),
                          group_count=GROUPS_MAX)
    assert groups[0].ports == {"writer": 8091, "indexer": 8092, "notifier": 8093,
                               "remoting": 9886, "forward": 8095}
    assert groups[-1].ports == {"writer": 8241, "indexer": 8242, "notifier": 8243,
                                "remoting": 10036, "forward": 8245}


def test_namesrv_on_any_address_is_given_as_loopback(tmp_path: Path) -> None:
    options = UpOptions(data_dir=tmp_path, ports=dict(UP_PORTS), host="0.0.0.0")
    for group in group_layout(options, group_count=2):
        assert group.broker is not None
        assert group.broker.namesrv_address == f"127.0.0.1:{UP_PORTS['remoting']}"


def test_base_ports_a_stride_apart_collide(tmp_path: Path) -> None:
    """writer 8081 and indexer 8091: g1's writer would be on g0's indexer's port, 8101."""
    ports = {**UP_PORTS, "indexer": 8081 + GROUP_PORT_STRIDE}
    with pytest.raises(UpError, match="port 8101") as raised:
        group_layout(UpOptions(data_dir=tmp_path, ports=ports), group_count=2)
    assert raised.value.exit_code == EXIT_USAGE


def test_a_group_port_past_65535_is_refused(tmp_path: Path) -> None:
    ports = {**UP_PORTS, "writer": 65530}
    with pytest.raises(UpError, match="past 65535") as raised:
        group_layout(UpOptions(data_dir=tmp_path, ports=ports), group_count=2)
    assert raised.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("group_count", [0, -1, GROUPS_MAX + 1])
def test_group_count_out_of_bounds_is_one_line_and_exit_2(
        tmp_path: Path, group_count: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--data", str(tmp_path / "data"), "--groups", str(group_count)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"mqstore up: --groups must be 1 to {GROUPS_MAX}, "
                            f"got {group_count}\n")
    assert not (tmp_path / "data").exists()


def test_collision_from_the_command_line_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--data", str(tmp_path / "data"), "--groups", "2",
                 "--writer-port", "8081", "--indexer-port", "8091"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("mqstore up: --groups 2 puts indexer of g0 and writer of g1 on "
                          "port 8101")


def test_a_group_port_in_use_is_one_line_and_exit_2_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The busy port is group 1's notifier: the name server and group 0 did not start."""
    for _attempt in range(LAYOUT_ATTEMPTS):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            busy = holder.getsockname()[1]
            ports = _ports_around(busy - 2 * GROUP_PORT_STRIDE)
            if not _others_free(ports, busy, tmp_path):
                continue
            arguments = [item for name, port in ports.items()
                         for item in (f"--{name}-port", str(port))]
            assert main(["up", "--data", str(tmp_path / "data"), "--groups", "2",
                         *arguments]) == 2
            break
    else:
        pytest.fail(f"{LAYOUT_ATTEMPTS} layouts each had a port taken by another process")
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"mqstore up: port {busy} on 127.0.0.1 (notifier) is in use")
    assert not (tmp_path / "data").exists()


LAYOUT_ATTEMPTS = 20
"""An ephemeral port's neighbours may belong to another process (CI once found the indexer's
taken): a layout with one is passed over for another ephemeral port."""


def _others_free(ports: dict[str, int], busy: int, tmp_path: Path) -> bool:
    """Every listener of a 2-group layout other than `busy` is on a port free now."""
    groups = group_layout(UpOptions(data_dir=tmp_path, ports=ports), group_count=2)
    others = [ports["remoting"], *(port for group in groups for port in group.ports.values())]
    return all(_free(port) for port in others if port != busy)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports_around(notifier_port: int) -> dict[str, int]:
    """Base ports of distinct last digits beside `notifier_port` (as the defaults are)."""
    return {"writer": notifier_port - 2, "indexer": notifier_port - 1,
            "notifier": notifier_port, "remoting": notifier_port + 3,
            "forward": notifier_port + 2}
