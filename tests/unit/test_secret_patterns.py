# ruff: noqa: RUF001 - full-width letters and colons are what these tests are about
"""Credentials a hostile probe stored before, each now refused; and prose that only
talks about credentials, still accepted. The labelled corpus
(``tests/unit/test_policy_corpus.py``) measures the same detector at scale."""

from __future__ import annotations

import pytest

from memvault.policy.secret_patterns import looks_secret, normalise
from memvault.policy.secrets import find_secrets, structured_fields, text_fields

#: Fake values, in the formats of real ones.
STORED_BEFORE = [
    "password: Hunter22!",
    "db_password=s3cr3tPass",
    "MYSQL_ROOT_PASSWORD=rootpw123",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzzKEYq",
    "我的邮箱密码是 Lin#2024xyz",
    "数据库口令：Pg_admin_77!",
    "服务的密钥为 Zq8-77Lp-x0",
    "パスワードは Abc12345! です",
    "la contraseña del wifi es Gato#2024",
    "github_pat_11ABCDEFG0123456789_abcdefghijABCDEFGHIJ0123456789abcdefghijABCDEFGHIJ012345678",
    "sk-proj-abcdefghijABCDEFGHIJ0123456789abcd",
    "sk-ant-api03-abcdefghijABCDEFGHIJ0123456789abcdefghij-AA",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "npm_abcdefghijABCDEFGHIJ0123456789abcdef",
    "jdbc:mysql://db:3306/app?user=app&password=Xk9!pq7z",
    "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=Str0ng!Pass",
    "DefaultEndpointsProtocol=https;AccountName=acct;"
    "AccountKey=abcdefghijABCDEFGHIJ0123456789abcdefghijABCD==;EndpointSuffix=core.windows.net",
    "Authorization: Bearer eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9abcdefgh",
    "AKIA\u200bIOSFODNN7EXAMPLF",  # a zero-width space inside the key id
    "ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＦ",  # full-width letters
    "pass\u200dword: Hunter22!",  # a zero-width joiner inside the keyword
    "my password is Tr0ub4dor&3",
    "the wifi password for the office is Coffee2024!",
    "redis://:Sup3rS3cret@cache:6379",
]


#: What a fresh corpus found stored before (issue: secret detection holds on the project's
#: corpus but not on a fresh one). Provider bodies are made here, not written out.
def _body(alphabet: str, n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


_A62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
MISSED_BEFORE = [
    "GOCSPX-" + _body(_A62 + "-_", 28, 1),
    "mailgun: key-" + _body(_HEX, 32, 2),
    "docker login -u ci -p dckr_pat_" + _body(_A62 + "-_", 27, 3),
    "shpat_" + _body(_HEX, 32, 4),
    "wallet private key 0x" + _body(_HEX, 64, 5),
    "Authorization: Basic ZGVwbG95OlhrOSFwcTd6TG0=",  # deploy:Xk9!pq7zLm
    "数据库密码改成了 Hunter2024!",
    "私钥是 0x" + _body(_HEX, 64, 6),
    "config (base64): cGFzc3dvcmQ9SHVudGVyMjAyNCE=",  # password=Hunter2024!
    "token: ghp_" + _body(_A62, 18, 7) + "\n" + _body(_A62, 18, 8),
    "A K I A " + " ".join(_body("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 9)),
    "my bank PIN is 4821",
    "my wallet passphrase is purple monkey dishwasher lamp",
    "助记词：abandon ability absorb abstract access accident achieve acoustic across action"
    " actress adapt",
    "the door code is 7731#",
    "公司VPN账号 zhangwei，密码 Vpn@2024zw",
]

ABOUT_CREDENTIALS = [
    "reset your password every 90 days",
    "the token bucket rate limiter allows 100 requests per second",
    "密码策略要求至少12位",
    "密钥轮换每90天一次,由KMS自动完成",
    "rotate the API key in the vault, never paste it here",
    "password: <redacted>",
    "password=${DB_PASSWORD}",
    "api_key: {{ secrets.API_KEY }}",
    "max_tokens: 4096",
    "the password is expired",
    "token: 100",
    "Use bearer token authentication for the API",
    "The pass rate was 98% this sprint",
    "the login page is https://example.com/login?next=/home",
    "Lin prefers green tea in the afternoon",
    # Documentation, explanations, placeholders and ids that look like credentials.
    "Connect with postgres://user:password@localhost:5432/mydb",
    "A JWT is a compact token: header.payload.signature, each part base64url-encoded.",
    "e.g. eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4g"
    "RG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "A GitHub token starts with ghp_ followed by 36 alphanumeric characters",
    "token = 'ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX'",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "The password is case-sensitive and at least 12 characters long",
    "Transaction 0x" + _body(_HEX, 64, 10) + " confirmed",
    "The signing key is RSA-2048 and rotates every 90 days.",
    "密钥算法是 AES-256-GCM，每年轮换一次。",
    "密码长度至少 12 位，区分大小写。",
    "123456 is still the most common password.",
]


@pytest.mark.parametrize("text", STORED_BEFORE)
def test_a_credential_the_probe_stored_is_found(text: str) -> None:
    assert find_secrets([("content", text)]), text


@pytest.mark.parametrize("text", MISSED_BEFORE)
def test_a_credential_a_fresh_corpus_stored_is_found(text: str) -> None:
    assert find_secrets([("content", text)]), text


@pytest.mark.parametrize("text", ABOUT_CREDENTIALS)
def test_prose_about_credentials_is_not_a_credential(text: str) -> None:
    assert find_secrets([("content", text)]) == []


def test_normalising_undoes_full_width_letters_and_invisible_characters() -> None:
    assert normalise("ＡＫＩＡ\u200b12\u2060\ufeff34\u00ad") == "AKIA1234"


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("Hunter22!", True),
        ("123456", True),
        ("1234", False),
        ("${DB_PASSWORD}", False),
        ("<redacted>", False),
        ("****", False),
        ("expired", False),
        ("correcthorsebatterystaple", True),
    ],
)
def test_a_value_must_look_like_a_secret(value: str, secret: bool) -> None:
    assert looks_secret(value, prose=True) is secret


def test_every_string_of_a_json_value_is_named_by_its_path() -> None:
    fields = text_fields({"notes": ["a", {"db": "b"}], "n": 3}, "state")
    assert fields == [
        ("state (key)", "notes"),
        ("state.notes[0]", "a"),
        ("state.notes[1] (key)", "db"),
        ("state.notes[1].db", "b"),
        ("state (key)", "n"),
    ]


def test_a_structured_value_is_read_with_the_names_it_is_stored_under() -> None:
    fields = structured_fields(
        {"db": {"password": "x"}, "env": [{"name": "API_TOKEN", "value": "y"}], "pin": 4821},
        "state",
    )
    assert ("state.db.password", "db.password: x") in fields
    assert ("state.env[0].value", "API_TOKEN: y") in fields
    assert ("state.pin", "pin: 4821") in fields
    assert ("state (key)", "db") in fields


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ({"db_password": "Hunter2024!"}, True),
        ({"smtp": {"pass": "S3nd!Mail42"}}, True),
        ({"env": [{"name": "DB_PASSWORD", "value": "Hunter2024!"}]}, True),
        ({"数据库密码": "Hunter2024!"}, True),
        ({"bank_pin": 4821}, True),
        ({"password_min_length": 12, "token_count": 1532, "seed": 42}, False),
        ({"secret_ref": "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db"}, False),
        ({"cache_key": "user:1234:profile", "key": "reports/2024/q3.csv"}, False),
    ],
)
def test_a_name_and_its_value_are_judged_together(value: object, refused: bool) -> None:
    """The same pair is refused in run state as it is in text, and only then."""
    assert bool(find_secrets(structured_fields(value, "state"))) is refused


def test_every_plugin_kept_has_a_gate() -> None:
    """A plugin without a gate runs on every line; a gate is what keeps a line of prose
    from costing a regex per plugin."""
    from memvault.policy import secrets

    kept = {plugin["name"] for plugin in secrets._plugins()}
    assert kept == set(secrets._GATES)
