# ruff: noqa: RUF001 - full-width letters and colons are what these tests are about
"""Credentials a hostile probe stored before, each now refused; and prose that only
talks about credentials, still accepted. The labelled corpus
(``tests/unit/test_policy_corpus.py``) measures the same detector at scale."""

from __future__ import annotations

import pytest

from memvault.policy.secret_patterns import looks_secret, normalise
from memvault.policy.secrets import find_secrets, text_fields

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
]


@pytest.mark.parametrize("text", STORED_BEFORE)
def test_a_credential_the_probe_stored_is_found(text: str) -> None:
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
