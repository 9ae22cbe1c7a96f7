"""`config/delayOffset.json` as RocketMQ 4.9 and 5.5 write it, read and written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.storage.errors import StoreFormatError
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile

ROCKETMQ_5 = ('{\n\t"dataVersion":{\n\t\t"counter":7,\n\t\t"stateVersion":0,\n'
              '\t\t"timestamp":1795813063621\n\t},\n\t"offsetTable":{2:1,3:6,4:3,18:1}\n}')
"""What a RocketMQ 5.5.0 broker wrote (broker-features reference, §2.3): unquoted keys."""


@pytest.mark.parametrize("text", [
    ROCKETMQ_5, '{"offsetTable":{2:1,3:6,4:3,18:1}}',
    '{"offsetTable":{"2":1,"3":6,"4":3,"18":1}}'])
def test_rocketmq_files_are_read_in_every_form(tmp_path: Path, text: str) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayOffset.json").write_text(text)
    assert DelayOffsetsFile(tmp_path).read() == {2: 1, 3: 6, 4: 3, 18: 1}


def test_written_as_rocketmq_writes_it_and_read_back(tmp_path: Path) -> None:
    file = DelayOffsetsFile(tmp_path)
    assert file.read() == {}
    file.write({3: 6, 2: 1}, now_ms=1795813063621)
    text = (tmp_path / "config" / "delayOffset.json").read_text()
    assert text == ('{\n\t"dataVersion":{\n\t\t"counter":1,\n\t\t"stateVersion":0,\n'
                    '\t\t"timestamp":1795813063621\n\t},\n\t"offsetTable":{\n\t\t2:1,\n'
                    '\t\t3:6\n\t}\n}')
    file.write({3: 7, 2: 1})
    assert DelayOffsetsFile(tmp_path).read() == {2: 1, 3: 7}
    assert (tmp_path / "config" / "delayOffset.json.bak").exists()


def test_the_counter_continues_from_the_file(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayOffset.json").write_text(ROCKETMQ_5)
    file = DelayOffsetsFile(tmp_path)
    file.read()
    file.write({2: 2})
    assert '"counter":8' in (tmp_path / "config" / "delayOffset.json").read_text()


def test_a_lost_file_falls_back_to_its_backup(tmp_path: Path) -> None:
    file = DelayOffsetsFile(tmp_path)
    file.write({1: 4})
    file.write({1: 5})
    (tmp_path / "config" / "delayOffset.json").write_text("{garbage")
    assert DelayOffsetsFile(tmp_path).read() == {1: 4}
    (tmp_path / "config" / "delayOffset.json").unlink()
    assert DelayOffsetsFile(tmp_path).read() == {1: 4}


@pytest.mark.parametrize("text", ["{garbage", '{"offsetTable":[1]}', '{"offsetTable":{0:1}}',
                                  '{"offsetTable":{"x":1}}', '{"offsetTable":{1:-2}}'])
def test_a_file_that_is_not_offsets_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayOffset.json").write_text(text)
    with pytest.raises(StoreFormatError, match=r"delayOffset\.json"):
        DelayOffsetsFile(tmp_path).read()


def test_the_scan_position_is_mqstores_own_field_and_absent_from_rocketmqs(
        tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "delayOffset.json").write_text(ROCKETMQ_5)
    rocketmq = DelayOffsetsFile(tmp_path)
    rocketmq.read()
    assert rocketmq.scan_position is None
    rocketmq.write({2: 3}, scan_position=4096)
    again = DelayOffsetsFile(tmp_path)
    assert again.read() == {2: 3} and again.scan_position == 4096
    assert '"mqstoreDeliveryScanPosition":4096' in (tmp_path / "config" /
                                                    "delayOffset.json").read_text()
