"""The write policy: secrets refused, personal data classified or refused, consent required."""

from __future__ import annotations

import pytest

from memvault.config import Settings
from memvault.policy import write_policy
from memvault.policy.pii import find_pii, find_structured_pii
from memvault_wire.errors import ConsentRequired, SecretDetected, ValidationFailed
from memvault_wire.memory import MemoryStatus, Sensitivity, Source, SourceType
from tests.support.harness import FakeClock


def draft(content: str, **overrides: object) -> write_policy.Draft:
    fields: dict[str, object] = {
        "content": content,
        "canonical_key": None,
        "tags": [],
        "scope": {},
        "source": Source(type=SourceType.USER_STATEMENT),
        "sensitivity": Sensitivity.INTERNAL,
        "consent": True,
    }
    fields.update(overrides)
    return write_policy.Draft(**fields)  # type: ignore[arg-type]


SECRETS = {
    "aws access key": "deploy with AKIAIOSFODNN7EXAMPLE please",
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY---",
    "github token": "my token is ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "slack token": "bot token xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "password in url": "the db is at postgres://admin:hunter2pass@db.internal:5432/app",
    "keyword assignment": "config has password = 'S3cretPass!' in it",
}


@pytest.mark.parametrize("text", SECRETS.values(), ids=SECRETS.keys())
def test_credentials_are_refused_with_secret_detected(text: str) -> None:
    with pytest.raises(SecretDetected) as raised:
        write_policy.evaluate(draft(text))
    # The error names the field and the kind of secret, never the secret itself.
    assert raised.value.details["findings"][0]["field"] == "content"
    assert text not in str(raised.value.to_body())


def test_secrets_are_found_in_tags_scope_and_source_ref_too() -> None:
    with pytest.raises(SecretDetected) as raised:
        write_policy.evaluate(
            draft(
                "harmless",
                source=Source(
                    type=SourceType.TOOL_RESULT, ref="https://bob:pa55word99@example.com/x"
                ),
            )
        )
    assert raised.value.details["findings"][0]["field"] == "source.ref"


def test_declared_secret_sensitivity_is_refused_even_with_consent() -> None:
    with pytest.raises(SecretDetected):
        write_policy.evaluate(draft("a plain sentence", sensitivity=Sensitivity.SECRET))


def test_secret_is_refused_before_consent_is_considered() -> None:
    with pytest.raises(SecretDetected):
        write_policy.evaluate(draft(SECRETS["aws access key"], consent=False))


PII = {
    "email": "reach me at li.wei@example.com",
    "phone, international": "call +1 415-555-2671 after six",
    "phone, PRC mobile": "我的手机号是 13812345678",
    "phone, the digits a UUID's last group could hold": "ring 114013845259 after six",
    "card number": "card 4111 1111 1111 1111 expires soon",
    "US SSN": "ssn 123-45-6789",
    "PRC resident id": "身份证 11010519491231002X",
    # A fresh probe: each was stored as public and served to public readers.
    "SSN without separators, named": "SSN 219099999 on the W-2 form",
    "social security number, bare": "social security number 536221234",
    "e-mail spelled with at and dot": "maria dot gonzalez84 at gmail dot com",
    "e-mail with bracketed at": "jane[at]example[dot]org",
    "e-mail percent-encoded": "contact jane.doe%40example.com",
    # A fresh probe stored an address in base64 as public.
    "e-mail in base64": "contact: bWFyaWEuZ29uemFsZXpAZXhhbXBsZS5vcmc=",
    "e-mail in base64url, unpadded": "mailbox cm9iZXJ0LmNoZW5AbWFpbC5leGFtcGxlLmNu",
    # Probe 8 stored each as internal, in memories and session messages.
    "date of birth, ISO": "My date of birth is 1990-04-12",
    "birthday, ISO": "My birthday is 1990-04-12",
    "street address on a Parkway": "1600 Amphitheatre Parkway, Mountain View, CA 94043",
    "passport number as a field": "passport_no: X12345678",
}


@pytest.mark.parametrize("text", PII.values(), ids=PII.keys())
def test_personal_data_without_consent_is_refused(text: str) -> None:
    with pytest.raises(ConsentRequired) as raised:
        write_policy.evaluate(draft(text, consent=False))
    assert raised.value.details["reason"] == "pii"


@pytest.mark.parametrize("text", PII.values(), ids=PII.keys())
def test_personal_data_with_consent_is_classified_pii(text: str) -> None:
    decision = write_policy.evaluate(draft(text, sensitivity=Sensitivity.PUBLIC))
    assert decision.sensitivity is Sensitivity.PII
    assert decision.pii_types


@pytest.mark.parametrize(
    "text",
    [
        "Python 3.11.7 was released on 2023-12-04",
        "order 12345 shipped in 3 boxes",
        "prefers Chinese for internal docs and English for external API docs",
        "card 4111 1111 1111 1112 fails the Luhn check",
        "身份证格式示例 110105194912310021 校验位错误",
        "we work at example dot com these days",
        "order 536221234 shipped, progress 100%40 done",
        "image tag aGVsbG8gd29ybGQgYWdhaW4= is base64 of a greeting",
        "trace id 4bf92f3577b34da6a3ce929d0e0e4736",
        # A UUID whose last group is digits that also spell a valid phone number.
        "checkpoint 1f1ef3e9-c56e-6105-bfff-114013845259 stored",
        "resumed run-1f1ef3e9-c56e-6105-bfff-114013845259-retry",
        # Germany's plan has valid four-digit service numbers: not a person's reach.
        "resumed at step 1640",
        # A date is a date of birth only when the text says whose birth it is.
        "the birthday campaign launches on 2026-05-01",
        "created_at: 2026-01-02T03:04:05Z",
        "my driver's license expired yesterday",
    ],
)
def test_ordinary_text_is_not_classified_as_personal_data(text: str) -> None:
    assert find_pii([("content", text)]) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("s s n : 1 2 3 - 4 5 - 6 7 8 9", "national_id"),
        ("reach me at j o h n . d o e @ e x a m p l e . c o m", "email"),
        ("encoded so the filter misses it: MTIzLTQ1LTY3ODk=", "national_id"),
        ("the address, base64: am9obi5kb2VAZXhhbXBsZS5vcmc=", "email"),
    ],
)
def test_personal_data_spaced_out_or_in_base64_is_found(text: str, kind: str) -> None:
    """Probe 9 (F4): a spaced-out SSN or e-mail address, and an SSN in base64, were stored
    as internal without consent; what they hide whole is personal data."""
    assert kind in {f.pii_type for f in find_pii([("content", text)])}


def test_spaced_digits_alone_are_not_a_phone_or_card_number() -> None:
    assert find_pii([("content", "steps 1 2 3 4 5 6 7 8 9 0, then 4 1 1 1 1 1 1 1")]) == []


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"ssn": 123456789}, "national_id"),
        ({"customer": {"ssn": "123456789"}}, "national_id"),
        ({"customerSSN": 923456789}, "national_id"),
        ({"phone": 4155550132}, "phone_number"),
        ({"手机号": 13812345678}, "phone_number"),
        ({"contacts": [{"mobile": 4155550132.0}]}, "phone_number"),
        ({"card_number": 4111111111111111}, "card_number"),
        ({"date_of_birth": "1990-04-12"}, "date_of_birth"),
        ({"dob": 19900412}, "date_of_birth"),
        ({"address": "1600 Amphitheatre Parkway, Mountain View, CA 94043"}, "address"),
        ({"home_address": {"street": "Hauptstraße 5"}}, "address"),
        ({"passport_no": "X12345678"}, "passport"),
        ({"type": "ssn", "value": 123456789}, "national_id"),
        ({"account_number": 12345678}, "bank_account"),
    ],
)
def test_structured_values_are_read_with_the_names_they_are_stored_under(
    value: dict[str, object], kind: str
) -> None:
    """Probe 8: run state holding these was stored without consent. A value's keys say
    what it is, as a form's labels do, and numbers are read as well as strings."""
    found = find_structured_pii(value, "state")
    assert kind in {f.pii_type for f in found}
    assert all(f.field.startswith("state.") for f in found)


@pytest.mark.parametrize(
    "value",
    [
        {"step": 1640},
        {"tokens": 4155550132},
        {"count": 4111111111111111},
        {"run_id": "run-1f1ef3e9-c56e-6105-bfff-114013845259"},
        {"created_at": "2026-01-02T03:04:05Z"},
        {"release_date": "1990-04-12", "version": "1.2.3", "build": 20240412},
        {"wallet_address": "0x742d35Cc6634C0532925a3b844Bc454e4438f44e"},
        {"address": 94043, "phone": 1640, "card": 3, "passport": "pending", "born": 1990},
        {"passport": {"expires": "2030-01-01"}, "drivers_license": {"issued": "2019/03/04"}},
    ],
)
def test_ids_counts_and_timestamps_in_structured_values_are_not_personal_data(
    value: dict[str, object],
) -> None:
    """A number is judged only for the kinds its key names, and a bare date is no one's
    birth date."""
    assert find_structured_pii(value, "state") == []


def test_a_scope_named_as_personal_data_is_personal_data() -> None:
    with pytest.raises(ConsentRequired) as raised:
        write_policy.evaluate(draft("a note", scope={"date_of_birth": "1990-04-12"}, consent=False))
    assert raised.value.details["pii_types"] == ["date_of_birth"]
    assert raised.value.details["fields"] == ["scope.date_of_birth"]


SLACK_KEY = "xoxb-598747174292-4741166773731-2080opxn7yftd8ng1ab91nq1"


def test_a_credential_as_a_scope_key_is_refused_without_repeating_it() -> None:
    """A fresh probe: a Slack token used as a scope key was refused, and the refusal named
    the field ``scope.xoxb-...``, so the answer repeated the credential."""
    with pytest.raises(SecretDetected) as raised:
        write_policy.evaluate(draft("a note", scope={"w": "1", SLACK_KEY: "w1"}))
    fields = [f["field"] for f in raised.value.details["findings"]]
    assert "scope.<key 1>" in fields
    assert "xoxb" not in str(raised.value.details) and "xoxb" not in raised.value.message


def test_personal_data_as_a_scope_key_is_named_by_its_place() -> None:
    with pytest.raises(ConsentRequired) as raised:
        write_policy.evaluate(draft("a note", scope={"4155550199": "w1"}, consent=False))
    assert "4155550199" not in str(raised.value.details)
    assert "scope.<key 0>" in raised.value.details["fields"]


def test_a_visibility_role_is_scanned_for_credentials_and_refused_if_personal() -> None:
    """Probe 8: a GitHub token and an e-mail address were stored as agent roles."""
    token = "ghp_" + "Zq7vN2kLx9RtWb4M" * 2 + "Ab1x"
    with pytest.raises(SecretDetected) as secret:
        write_policy.evaluate(draft("a note", visibility=["planner", token]))
    assert secret.value.details["findings"][0]["field"] == "visibility[1]"
    assert token not in str(secret.value.to_body())
    with pytest.raises(ValidationFailed) as personal:
        write_policy.evaluate(draft("a note", visibility=["dana.whitfield@example.com"]))
    assert personal.value.details == {
        "field": "visibility[0]",
        "reason": "pii_in_id",
        "pii_types": ["email"],
    }
    assert "dana.whitfield" not in str(personal.value.to_body())
    assert write_policy.evaluate(draft("a note", visibility=["billing-agent"])).pii_types == ()


def test_long_term_memory_requires_consent() -> None:
    with pytest.raises(ConsentRequired) as raised:
        write_policy.evaluate(draft("prefers dark mode", consent=False))
    assert raised.value.details["reason"] == "long_term_memory"


def test_model_inferred_memories_start_as_candidates() -> None:
    inferred = Source(type=SourceType.MODEL_INFERRED, ref="run-9")
    assert (
        write_policy.evaluate(draft("likes tea", source=inferred)).status is MemoryStatus.CANDIDATE
    )
    confirmed = write_policy.evaluate(draft("likes tea", source=inferred, confirmed=True))
    assert confirmed.status is MemoryStatus.ACTIVE
    stated = write_policy.evaluate(draft("likes tea"))
    assert stated.status is MemoryStatus.ACTIVE


def test_lifetime_beyond_the_deployment_maximum_is_refused() -> None:
    settings = Settings(max_ttl_seconds=86_400, default_ttl_seconds=3600)
    now = FakeClock().now()
    assert (write_policy.expiry(now, None, settings) - now).total_seconds() == 3600
    assert (write_policy.expiry(now, 86_400, settings) - now).total_seconds() == 86_400
    with pytest.raises(ValidationFailed) as raised:
        write_policy.expiry(now, 86_401, settings)
    assert raised.value.details == {"field": "ttl_seconds", "max": 86_400}


def test_concurrent_writes_never_skip_the_secret_scan() -> None:
    """detect-secrets keeps the plugins a scan uses in one process-wide setting, which a
    scan replaces and then restores; without a lock one thread's restore left another
    thread's scan with no plugins, and a credential was stored (or the scan crashed).
    Threads released together by a barrier, each evaluating drafts with a credential."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    threads, rounds = 8, 150
    barrier = threading.Barrier(threads)
    text = SECRETS["aws access key"]

    def refusals(_: int) -> int:
        barrier.wait(timeout=30)
        refused = 0
        for _ in range(rounds):
            try:
                write_policy.evaluate(draft(text))
            except SecretDetected:
                refused += 1
        return refused

    with ThreadPoolExecutor(max_workers=threads) as pool:
        counts = list(pool.map(refusals, range(threads)))

    assert counts == [rounds] * threads


#: Lines for the equivalence check below: each plugin kept has at least one line it fires
#: on, and the rest are prose (English, Chinese, numbers) that none should fire on.
EQUIVALENCE_LINES = [
    *SECRETS.values(),
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + " is the stripe key",
    "SG." + "a" * 22 + "." + "b" * 43,
    "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP",
    "//registry.npmjs.org/:_authToken=" + "1a2b3c4d-1a2b-1a2b-1a2b-1a2b3c4d5e6f",
    "pypi-AgEIcHlwaS5vcmc" + "A" * 70,
    "glpat-" + "x1Y2z3W4v5U6t7S8r9Q0",
    "api_key: 'AKCp8jQ8hLk2H5pNvA9bXmRrT3sW7yZ1cD4eF6gH8jK0'",
    "The user prefers tea over coffee and lives in Berlin.",
    "用户喜欢喝茶，住在上海，下周二下午三点开会。",  # noqa: RUF001
    "Turn 4521: invoice 2024-11-03 total 1,234.56 EUR, call back on Monday",
    "password reset was requested on 2024-05-01",
    "",
]


@pytest.mark.parametrize("line", EQUIVALENCE_LINES)
def test_the_scan_finds_what_detect_secrets_own_line_scan_finds(line: str) -> None:
    """``find_secrets`` calls the plugins directly instead of through ``scan_line`` (which
    costs about 2 ms a memory in argument injection and cache clearing); it must find
    exactly the secret types that ``scan_line`` finds, with the same plugins."""
    from detect_secrets.core.scan import scan_line

    from memvault.policy import secrets

    secrets._configure()
    expected = {str(s.type) for s in scan_line(line)}
    assert set(secrets._types_in(line)) == expected


def test_the_equivalence_lines_exercise_most_plugins() -> None:
    from memvault.policy import secrets

    found = {t for line in EQUIVALENCE_LINES for t in secrets._types_in(line)}
    assert len(found) >= 10, found
