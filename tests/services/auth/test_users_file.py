"""The users file: RocketMQ 4.x plain_acl.yml read whole, and every bad file refused with one
line naming the file, the account and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.auth import UsersFileError, load_users, users_of
from mqstore.services.auth.permissions import Perm
from mqstore.services.common.settings.auth import AuthSettings

ROCKETMQ_SAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1700000000000
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    return path


def test_rocketmqs_sample_file_is_read_as_written(tmp_path: Path) -> None:
    users = load_users(write(tmp_path, ROCKETMQ_SAMPLE))
    first = users.account("RocketMQ")
    assert first is not None
    assert first.secret_key == "12345678"  # a number to YAML, a key to RocketMQ
    assert (first.admin, first.default_topic_perm, first.default_group_perm) == (
        False, Perm.DENY, Perm.SUB)
    assert first.topic_perms == {"topicA": Perm.DENY, "topicB": Perm.PUB | Perm.SUB,
                                 "topicC": Perm.SUB}
    assert first.group_perms["groupB"] == Perm.PUB | Perm.SUB
    assert first.white_addresses == ()
    second = users.account("rocketmq2")
    assert second is not None and second.admin
    assert second.is_white("192.168.1.77") and not second.is_white("192.168.2.77")
    assert users.is_globally_white("10.10.103.5") and not users.is_globally_white("10.10.104.5")
    assert users.first_admin() is second


def test_an_empty_users_file_setting_turns_authentication_off() -> None:
    assert users_of(AuthSettings()) is None


@pytest.mark.parametrize(("text", "problem"), [
    ("accounts: [", "not YAML (line 1)"),
    ("- a\n- b\n", "expected a mapping with `accounts`"),
    ("acounts: []\n", "unknown key 'acounts'"),
    ("accounts: []\n", "no accounts"),
    ("accounts:\n  - secretKey: 12345678\n", "accounts[0]: accessKey must be text of at "
                                             "least 7"),
    ("accounts:\n  - {accessKey: short, secretKey: 12345678}\n", "accessKey must be text"),
    ("accounts:\n  - {accessKey: producer1, secretKey: abc}\n",
     "accounts[0] (producer1): secretKey must be text of at least 7"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678, admin: yes please}\n",
     "admin must be true or false"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678, defaultTopicPerm: ALL}\n",
     "defaultTopicPerm: unknown permission 'ALL'"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678, topicPerms: [orders]}\n",
     "topicPerms[0]: expected \"name=PERM\""),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678,"
     " topicPerms: [a=PUB, a=SUB]}\n", "topicPerms[1]: a is listed twice"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678, groupPerms: g=SUB}\n",
     "groupPerms: expected a list"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678, secret: x}\n",
     "unknown key 'secret'"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678}\n"
     "  - {accessKey: producer1, secretKey: 87654321}\n", "accessKey 'producer1' is used twice"),
    ("accounts:\n  - {accessKey: producer1, secretKey: 12345678,"
     " whiteRemoteAddress: 10.0.300.*}\n", "whiteRemoteAddress: address pattern"),
    ("globalWhiteRemoteAddresses: [10.*.*.*.*]\naccounts:\n"
     "  - {accessKey: producer1, secretKey: 12345678}\n", "globalWhiteRemoteAddresses[0]"),
])
def test_a_bad_file_is_refused_with_one_line_naming_the_problem(
        tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsersFileError) as refused:
        load_users(path)
    message = str(refused.value)
    assert message.startswith(f"auth.users_file {path}")
    assert problem in message
    assert "\n" not in message


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match="cannot read it"):
        users_of(AuthSettings(users_file=str(tmp_path / "absent.yml")))
