"""Whether a name calls its value a secret, and whether the value is one.

Every rule of the detector ends here. A name ("db_password", "X-Api-Key", "数据库密码",
"the wifi password") says what kind of secret its value would be, or that it is about one
(``password_min_length``, ``token_count``, ``secret_ref``): it is split into its words and
read from the right, so the last decisive word wins. The value then has to look like that
kind of secret: a password may be a word with a digit, a PIN four digits, a passphrase
several words, a token must look random (several character classes, frequent changes
between them, enough entropy). Placeholders, references to where a secret is kept,
documentation examples, measures, versions, dates, URLs, hashes and identifiers are not
secrets, whatever their name.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from enum import Enum
from functools import lru_cache
from itertools import pairwise

from memvault.policy.secret_wordlist import bip39_share


class Kind(Enum):
    """What a name says its value is; each kind judges a value its own way."""

    #: A password: a word with digits or symbols, a long word, six digits or more.
    PASSWORD = "password"  # noqa: S105 (a kind's name, not a password)
    #: A PIN or a door, alarm or unlock code: four digits or more.
    PIN = "pin"
    #: A passphrase, a seed or recovery phrase: several words.
    PHRASE = "phrase"
    #: A key, token or client secret: a random string.
    TOKEN = "token"  # noqa: S105 (a kind's name, not a token)
    #: A name that may hold a secret ("key", "auth", "session"): only a long random value.
    WEAK = "weak"


# --- names -----------------------------------------------------------------------------

_PASSWORD_WORDS = frozenset(
    {
        *("password", "passwd", "pwd", "pass", "pw", "passwort", "kennwort", "contraseña"),
        *("contrasena", "senha", "motdepasse", "mdp", "пароль", "pword", "passphrase"),
        *("psk", "wpapsk", "wpakey"),
        # Servers' own names for theirs: Redis, OpenLDAP, an SNMP community string.
        *("requirepass", "masterauth", "bindpw", "rootpw", "communitystring"),
    }
)
_PIN_WORDS = frozenset(
    {"pin", "pincode", "passcode", "pinnumber", "unlockcode", "keypad", "puk", "combo"}
)
_PHRASE_WORDS = frozenset({"mnemonic", "seedphrase", "mnemonics", "seed", "seedwords"})
_TOKEN_WORDS = frozenset(
    {
        *("secret", "secrets", "token", "apikey", "apisecret", "credential", "credentials"),
        *("creds", "privkey", "privatekey", "secretkey", "accesskey", "clientsecret", "bearer"),
        *("authtoken", "accesstoken", "refreshtoken", "sessiontoken", "authorization", "pat"),
        *("hmac", "apitoken", "webhooksecret", "signingsecret", "signingkey", "authkey"),
        *("privatekeys", "masterkey", "secretaccesskey", "connectionstring", "connstr"),
        *("sessionid", "jsessionid", "phpsessid", "sessid", "appsecret", "appkey"),
        *("keypair", "secretkeypair"),
    }
)
_WEAK_WORDS = frozenset({"key", "auth", "session", "cookie", "sid", "code", "license", "sk"})
#: What a name that is one lower-case word may end with (``pgpassword``, ``bindpassword``,
#: ``appsecret``): the word is read as its ending.
_SUFFIXES = (
    *("password", "passwd", "passphrase", "secret", "secretkey", "apikey", "privatekey"),
    *("accesskey", "token", "pwd"),
)
#: Words before "token" that make it a position in a listing, not a credential.
_TOKEN_NOT = frozenset(
    {"next", "page", "continuation", "pagination", "cursor", "sync", "resume", "prev"}
)
#: Words before "key" that make it a secret key ("api key", "wallet key", "ssh key").
_KEY_QUALIFIERS = frozenset(
    {
        *("api", "access", "private", "priv", "secret", "signing", "encryption", "master"),
        *("session", "client", "app", "deploy", "ssh", "gpg", "pgp", "wallet", "hmac", "jwt"),
        *("consumer", "service", "account", "root", "admin", "auth", "storage", "shared"),
        *("decryption", "crypto", "aes", "license", "activation", "product", "sk", "bot"),
        *("webhook", "subscription", "function", "host", "primary", "secondary", "sas"),
        *("integration", "personal", "server", "user", "write", "read", "sending", "mail"),
        *("recovery", "bitlocker", "backup", "unlock", "vault", "wifi", "wpa", "network"),
    }
)
#: Words before "key" that make it a passphrase a person chose (a Wi-Fi network's key).
_PASSPHRASE_KEYS = frozenset({"wifi", "fi", "wpa", "wpa2", "wlan", "network", "ssid"})
#: Words before "pass" that make it a ticket, not a password ("boarding pass").
_PASS_NOT = frozenset(
    {
        *("boarding", "bus", "day", "season", "hall", "free", "backstage", "guest", "visitor"),
        *("ski", "transit", "metro", "gym", "museum", "press", "all", "first", "second"),
        *("single", "multi", "two", "one", "final", "render", "review", "code", "by"),
    }
)
#: Words before "phrase", "words" or "code" that make them a secret.
_PHRASE_QUALIFIERS = frozenset({"seed", "recovery", "backup", "secret", "mnemonic", "wallet"})
#: Words before "codes" that make them one-time secrets ("backup codes").
_CODES_QUALIFIERS = frozenset({"backup", "recovery", "2fa", "mfa", "otp", "emergency"})
_CODE_QUALIFIERS = frozenset(
    {
        *("unlock", "door", "alarm", "security", "entry", "gate", "safe", "wifi", "lock"),
        *("garage", "locker", "backup", "recovery", "access", "pin", "keypad", "passcode"),
        *("screen", "phone", "vault", "building", "lockbox", "padlock", "pass", "fi"),
        *("disarm", "arm", "house", "home", "front", "apartment", "atm", "card", "bank"),
    }
)
#: Words before "pattern" that make it a phone's unlock pattern, not a regex or a format.
_PATTERN_LOCKS = frozenset({"unlock", "android", "lock", "lockscreen", "screen", "phone"})
#: Words that make a name about a secret rather than the secret itself, when they come
#: after its decisive word (``password_min_length``) or stand last (``api_key_id``).
_NEGATORS = frozenset(
    {
        *("id", "ids", "type", "types", "name", "names", "length", "len", "size", "count"),
        *("limit", "limits", "min", "max", "minimum", "maximum", "policy", "policies", "rule"),
        *("rules", "strength", "complexity", "expiry", "expires", "expiration", "expired"),
        *("ttl", "age", "lifetime", "url", "uri", "endpoint", "path", "file", "dir", "ref"),
        *("location", "reference", "arn", "env", "var", "variable", "hint", "prompt", "label"),
        *("field", "format", "pattern", "regex", "mask", "placeholder", "rotation", "rotated"),
        *("rotate", "updated", "created", "changed", "reset", "last", "required", "enabled"),
        *("disabled", "present", "exists", "manager", "provider", "hash", "hashed", "digest"),
        *("checksum", "sha1", "sha256", "sha512", "md5", "fingerprint", "algorithm", "alg"),
        *("kind", "version", "usage", "used", "remaining", "budget", "cost", "price", "index"),
        *("public", "pub", "cache", "partition", "sort", "foreign", "idempotency", "dedup"),
        *("routing", "lookup", "object", "bucket", "username", "user", "email", "host"),
        *("port", "region", "issuer", "audience", "scope", "scopes", "status", "valid"),
        *("validity", "error", "errors", "message", "description", "desc", "note", "notes"),
        *("comment", "help", "doc", "docs", "tokens", "keys", "secrets_manager", "holder"),
        *("owner", "mode", "method", "strategy", "header", "param", "store", "vault", "kms"),
        *("at", "on", "by", "date", "time", "timestamp", "days", "hours", "seconds", "minutes"),
        *("attempts", "retries", "tries", "failures", "set", "is", "has", "needs", "enable"),
        *("length", "chars", "characters", "digits", "words", "bits", "bytes", "ok", "flag"),
        *("stage", "step", "state", "expected", "example", "sample", "source", "template"),
        *("counter", "stats", "metrics", "rate", "ratio", "percent", "total", "numbers"),
        *("reminder", "question", "recovery_email", "link", "page", "form", "screen"),
        *("protected", "encrypted", "redacted", "masked", "secure", "strong", "weak"),
        *("generator", "generation", "length_min", "manager_url", "prefix", "suffix"),
        *("publishable", "accessor"),
        # What a key signs with is its signature: a message's, shown with the message.
        *("signature", "signatures"),
    }
)
#: Words that make a name about something else only as its last word:
#: ``credentials.role`` names a role, ``service_role_key`` a key.
_LAST_NEGATORS = frozenset({"role", "roles", "profile", "principal", "source"})
#: Words a name may carry after its decisive word without changing it (``password_prod``).
_NEUTRAL = frozenset(
    {
        *("value", "val", "v", "data", "raw", "plain", "plaintext", "current", "new", "old"),
        *("text", "str", "string", "prod", "production", "dev", "staging", "live", "test"),
        *("main", "default", "backup", "primary", "secondary", "temp", "tmp", "real", "b64"),
        *("base64", "hex", "encoded", "the", "my", "our", "your", "for", "of", "a", "an"),
        *("base58", "bs58", "json", "bytes", "wif"),
    }
)

#: Chinese names, longest first; the first found decides.
_ZH_NAMES: tuple[tuple[str, Kind], ...] = (
    *((w, Kind.PHRASE) for w in ("助记词", "恢复短语", "种子短语", "口令短语", "密语", "助记码")),
    *(
        (w, Kind.PIN)
        for w in (
            *("取款密码", "支付密码", "银行卡密码", "门禁密码", "保险箱密码", "开机密码"),
            *("锁屏密码", "解锁码", "门禁码", "密码锁", "PIN码", "pin码", "交易密码", "手机密码"),
            *("数字密码", "平板密码"),
            *("保险柜密码", "密码箱", "撤防码", "布防码", "开门码", "报警码", "门锁密码", "安全码"),
            *("恢复码", "备用码", "备份码", "救援码", "恢复代码", "备用代码", "备份代码"),
            *("验证码", "校验码", "动态码"),
        )
    ),
    *((w, Kind.TOKEN) for w in ("私钥", "密钥", "秘钥", "令牌", "授权码", "访问码", "凭证")),
    *((w, Kind.PASSWORD) for w in ("密码", "口令", "暗号", "通行码", "パスワード", "暗証番号")),
    # An SNMP community string: the password of SNMP v1 and v2c.
    *((w, Kind.PASSWORD) for w in ("团体字", "团体名", "共同体名")),
    *(
        (w, Kind.PASSWORD)
        for w in ("密保答案", "密保问题", "密保", "安全问题答案", "安全问题的答案")
    ),
)
_ZH_NEGATORS = (
    *("长度", "策略", "规则", "要求", "位数", "复杂度", "过期", "有效期", "轮换", "管理"),
    *("提示", "格式", "算法", "类型", "强度", "找回", "重置", "ID", "编号", "文件", "路径"),
    *("地址", "链接", "名称", "名字", "哈希", "摘要", "指纹", "公钥", "位置", "引用", "次数"),
    *("模板", "示例", "样例", "范例", "名"),
    # A count or a quota of them ("每日短信验证码条数", "令牌配额"): a number about them.
    *("条数", "数量", "个数", "总数", "上限", "下限", "配额", "额度"),
)

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_A-Za-z]+")
_LEET_INSIDE = re.compile(r"(?<=[A-Za-z])[0134@$5]+(?=[A-Za-z])")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "@": "a", "$": "s", "5": "s"})


def name_words(name: str) -> list[str]:
    """A name's words, lower-cased: ``dbPassword`` and ``DB_PASSWORD`` are ``db password``;
    leetspeak inside a word is undone (``p@ssw0rd``)."""
    words = []
    for part in re.split(r"[\s_.\-/:\[\]\"'`()]+", name):
        if not part:
            continue
        # Leetspeak inside a word (``p@ssw0rd``), not a number after it (``key1``).
        folded = _LEET_INSIDE.sub(lambda m: m.group().translate(_LEET), part)
        words += [w.lower() for w in _CAMEL.findall(folded)] or [folded.lower()]
    return words


def _compound(words: list[str]) -> list[str]:
    """Joined pairs count as one word too (``api key`` is ``apikey``)."""
    out: list[str] = []
    for i, word in enumerate(words):
        if i and words[i - 1] + word in (_TOKEN_WORDS | _PASSWORD_WORDS | _PHRASE_WORDS):
            out[-1] = words[i - 1] + word
        else:
            out.append(word)
    return out


@lru_cache(maxsize=4096)
def name_kind(name: str) -> Kind | None:
    """What a name says its value is, or None when it names no secret (or a fact about
    one: a length, an id, an expiry, a reference)."""
    if not name.isascii():
        return _zh_name_kind(name)
    words = _compound(name_words(name))
    weak = False
    skipped = 0
    for i in range(len(words) - 1, -1, -1):
        word = words[i]
        before = words[i - 1] if i else ""
        if word == "pattern" and before in _PATTERN_LOCKS:
            return Kind.PIN  # "Android unlock pattern 1-5-9-6": the grid's dots, in order
        if word in _NEGATORS or (i == len(words) - 1 and word in _LAST_NEGATORS):
            return None
        if word in _PIN_WORDS or word == "combination":
            return Kind.PIN
        if word in _PHRASE_WORDS and (word != "seed" or i == len(words) - 1):
            return Kind.PHRASE
        if word in _PASSWORD_WORDS:
            return None if word == "pass" and before in _PASS_NOT else Kind.PASSWORD
        if word in _TOKEN_WORDS:
            return None if word == "token" and before in _TOKEN_NOT else Kind.TOKEN
        if word in ("phrase", "words") and before in _PHRASE_QUALIFIERS:
            return Kind.PHRASE
        if word == "code" and before in _CODE_QUALIFIERS:
            return Kind.PIN
        if word in ("code", "codes") and before in _CODES_QUALIFIERS:
            return Kind.PIN
        if word == "answer" and before in ("security", "secret", "question"):
            return Kind.PASSWORD
        if word == "key" and before in _PASSPHRASE_KEYS:
            return Kind.PASSWORD  # a Wi-Fi network's key is its passphrase
        if word == "key" and before in _KEY_QUALIFIERS:
            return Kind.TOKEN
        if word in _WEAK_WORDS:
            weak = True
            continue
        if word in _NEUTRAL or word.isdigit():
            continue
        ending = _ending(word)
        if ending is not None:
            return name_kind(ending)
        skipped += 1
        if skipped > 2:
            break
    return Kind.WEAK if weak else None


def names_a_fact(name: str) -> bool:
    """Whether a name says its value is a fact about something (a hash, an id, a length,
    a fingerprint, a reference) by any of its words."""
    return any(word in _NEGATORS for word in name_words(name))


def _ending(word: str) -> str | None:
    """The secret's name a longer lower-case word ends with (``pgpassword``)."""
    if len(word) < 6 or not word.isalpha():
        return None
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            return suffix
    return None


_ZH_PIN_HINT = re.compile(r"门|锁|柜|箱|取款|支付|开机|锁屏|手机|平板|银行卡|信用卡|储蓄卡")


def _zh_name_kind(name: str) -> Kind | None:
    for word, kind in _ZH_NAMES:
        at = name.find(word)
        if at >= 0:
            after = name[at + len(word) :]
            if any(neg in after for neg in _ZH_NEGATORS) or "公钥" in name:
                return None
            if kind is Kind.PASSWORD and _ZH_PIN_HINT.search(name):
                return Kind.PIN  # "单元门密码", "快递柜密码": a code of digits
            return kind
    ascii_part = "".join(ch if ch.isascii() else " " for ch in name)
    return name_kind(ascii_part) if ascii_part.strip() else None


# --- values ----------------------------------------------------------------------------

_TEMPLATE = re.compile(
    r"^(?:\$\{?[\w.:-]+\}?|\{\{.*\}\}|\{[\w.-]*\}|<[^<>]*>?|\[[^\]]*\]?|%\(\w+\)[sd]?|%\w+%|\*+"
    r"|x{3,}|X{3,}|\.{3,}|…+|_+|-+|•+|#+|\?+|0{4,})$",
    re.IGNORECASE,
)
#: Template syntax anywhere in a value: it stands for a secret filled in elsewhere.
_TEMPLATE_INSIDE = re.compile(
    r"\$\{|\{\{|\$\(|%\(|<[A-Za-z_\- ]{3,}>|\{[A-Z_]{3,}\}|\.\.\.|…|\*{3,}|•{3,}"
    # A regular expression's "anything" (``s/PASSWORD=.*/.../``), an environment variable
    # a value is read from (``src=$HOME/.npmrc``): a pattern or a reference, not a value.
    r"|\.[*+](?![A-Za-z0-9])|(?:^|[=,:(])\$[A-Z_][A-Z0-9_]{2,}\b"
    # A character class with its count: a pattern ("[A-Za-z0-9/+=]{40}").
    r"|\[[^\]\s]{2,40}\](?:\{\d|[*+?])"
)
#: A value that names where the secret is kept rather than the secret: an environment
#: variable, a secret manager's reference, a file.
_REFERENCE = re.compile(
    r"^(?:os\.environ|os\.getenv|getenv|process\.env|env[.(\[:]|ENV\[|secrets?\.|vault:"
    r"|ssm:|arn:aws:|\$\(|!ref|!sub|\{\{|file:|op://|keyvault:|projects/[\w-]+/secrets"
    r"|/run/secrets|/etc/|~/|\./|[A-Za-z]:\\|sm://|gcp-secret|aws-secret|awssecret"
    r"|(?:var|local|module|data)\.[a-z_])",
    re.IGNORECASE,
)
#: Words that stand for no secret at all, or for the documentation's example of one.
_NOT_VALUES = frozenset(
    {
        *("null", "none", "nil", "true", "false", "yes", "no", "empty", "unset", "n/a", "na"),
        *("redacted", "hidden", "masked", "required", "optional", "secret", "password"),
        *("changed", "expired", "reset", "rotated", "stored", "encrypted", "missing"),
        *("invalid", "incorrect", "wrong", "correct", "unknown", "same", "different"),
        *("example", "placeholder", "string", "str", "env", "vault", "file", "passwd", "pwd"),
        *("pass", "token", "apikey", "api_key", "secretkey", "changeme", "changeit", "dummy"),
        *("mysecretpassword", "yourpassword", "mypassword", "your_password", "your-password"),
        *("yourtoken", "your_token", "your-token", "yourapikey", "your_api_key", "your-api-key"),
        *("replace_me", "replaceme", "replace-me", "todo", "tbd", "fixme", "foo", "bar"),
        *("foobar", "baz", "sample", "user", "username", "value", "key", "xxx", "guest"),
        *("default", "test", "testing", "demo", "fake", "notreal", "not-a-real-key", "admin"),
        *("root", "mysecret", "secretpassword", "secretkey", "supersecretpassword"),
        *("credentials", "credential", "bearer", "basic", "auth", "authorization", "jwt"),
        *("base64", "hex", "utf-8", "json", "uuid", "sha256", "sha-256", "md5", "bcrypt"),
        *("argon2", "argon2id", "scrypt", "pbkdf2", "oauth", "oauth2", "saml", "oidc", "mfa"),
        *("totp", "hmac", "rsa", "aes", "tls", "ssl", "x509", "pkcs8", "pkcs12", "pem", "der"),
        *("signature", "sig"),
    }
)
#: Placeholder words inside a value ("your_api_key_here", "sk-example-key").
_PLACEHOLDER_WORDS = re.compile(
    r"(?i)example|sample|placeholder|dummy|your[_\- ]?(?:api|access|secret|own|real|app"
    r"|token|key|pass|client)|your[_\-][\w\-]*(?:secret|key|token|passw)|_here\b|-here\b|insert|replace[_\-]?me|redacted|change[_\-]?me"
    r"|xxxx|0000000|notreal|not[_\-]a[_\-]real|fake[_\-]|[_\-]fake|lorem|foo[_\-]?bar"
    r"|fill[_\-]?(?:me|in)(?![a-z])"
)
#: Names of algorithms, encodings and formats: what a sentence about a key calls it.
_TECH_TERM = re.compile(
    r"^(?:aes|rsa|sha|hs|rs|es|ps|ed|hmac|md|tls|ssl|utf|oauth|pbkdf|argon|bcrypt|scrypt"
    r"|x\.?509|pkcs|base|ecdsa|ecdh|secp|p|curve|chacha|des|3des|blake|crc|dsa|gcm|cbc|sm"
    r"|v|ver|version|ipv|http|https|sha3|keccak|ripemd|poly|x|nist|fips|bip|eip|erc|ws"
    r"|wss|grpc|json|jwt|jwe|jws|jwk|saml|kerberos|ntlm|totp|hotp|otp|wpa|wep)"
    r"[-_./]?\d{0,5}(?:[-_./]?(?:gcm|cbc|ctr|pss|v\d|id|i|d|sha\d*|bit|bits|k1|r1"
    r"|poly1305|plus|personal|enterprise|psk)|[-_./]\d+)*$",
    re.IGNORECASE,
)
_MEASURE = re.compile(
    r"^[+-]?\d+(?:[.,]\d+)?\s?(?:[°%]|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|d"
    r"|days?|weeks?|months?|years?|kb|mb|gb|tb|k|m|b|chars?|characters?|digits?|bits?"
    r"|bytes?|x|px|em|位|个|天|小时|分钟|秒)?$",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^v?\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?$", re.IGNORECASE)
_DATE_TIME = re.compile(
    r"^(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?Z?)?"
    r"|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?(?:am|pm)?)$",
    re.IGNORECASE,
)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_HASH_HEX = re.compile(r"^(?:[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{56}|[0-9a-f]{64}|[0-9a-f]{96}"
                       r"|[0-9a-f]{128})$", re.I)  # fmt: skip
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
#: Chinese, Japanese or Korean script: the sentence going on, not a password.
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")
#: A path or a file name: "reports/2024/q3.csv".
_PATH = re.compile(
    r"^/?(?:[\w.\-]+/)+[\w.\-]+\.[A-Za-z0-9]{1,5}$|^[\w\-]+\.(?:csv|json|txt|md|py|ya?ml|png"
    r"|jpe?g|pdf|log|gz|zip|tar|sql|html?|xml|toml|ini|cfg|conf|sh|js|ts|go|rs|java|rb)$"
)
#: A data file's name ("db.sqlite3", "backup-2024.dump"): what a setting names, not a
#: password.
_DATA_FILE = re.compile(
    r"^[\w\-]+(?:\.[\w\-]+)*\.(?:sqlite3?|db|mdb|accdb|bak|dump|dmp|dat|parquet|xlsx?|docx?)$",
    re.IGNORECASE,
)
#: Where a secret manager keeps a secret: "secret/prod/db", "prod/payments/stripe-key".
_STORE_PATH = re.compile(r"^/?[a-z][a-z0-9_\-.]*(?:/[a-z][a-z0-9_\-.]*)+/?$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
#: A secret's name, not its value: ``github-deploy-token``, ``prod_db_password``.
_SECRET_NAME = re.compile(
    r"^[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*[-_.](?:token|key|secret|password|passwd|pat"
    r"|credentials?|apikey|api[-_]key)s?$"
)
#: A key's file, named rather than shown: ``id_ed25519``, ``id_rsa.pub``, ``deploy.pem``.
_KEY_FILE = re.compile(
    r"^(?:[~./\w-]*/)?(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?(?:\.pub)?"
    r"|[\w.-]+\.(?:pem|key|pub|ppk|p12|pfx|jks|keystore|kdbx|asc|gpg|crt|cer|der|csr))$",
    re.IGNORECASE,
)
#: A value made of lower-case words joined by punctuation: a phrase of the sentence
#: ("case-sensitive", "header.payload.signature"), not a random token.
_WORD_NUMBER = re.compile(r"^[a-z]{2,10}[-_]\d{1,8}$")
_WORD_COMPOUND = re.compile(r"^[a-z]{2,}(?:[-_.][a-z]{2,})+$")
#: Words that open a clause, not a secret ("the password is *the* same").
_STOPWORDS = frozenset(
    {
        *("a", "an", "the", "not", "no", "in", "on", "at", "to", "for", "of", "from", "with"),
        *("by", "as", "is", "was", "be", "been", "being", "stored", "saved", "kept", "only"),
        *("still", "also", "now", "always", "never", "usually", "too", "very", "what", "which"),
        *("that", "this", "it", "its", "something", "one", "your", "my", "our", "their", "his"),
        *("her", "same", "different", "long", "short", "weak", "strong", "secure", "set"),
        *("here", "there", "below", "above", "attached", "included", "provided", "shown"),
        *("and", "or", "but", "if", "when", "then", "so", "because", "must", "should", "can"),
        *("will", "would", "could", "may", "might", "do", "does", "did", "have", "has", "had"),
        *("are", "were", "you", "we", "they", "he", "she", "i", "me", "us", "them", "who"),
        *("how", "where", "why", "all", "any", "some", "every", "each", "into", "about"),
        *("required", "needed", "valid", "used", "sent", "shared", "generated", "issued"),
        *("usually", "typically", "just", "like", "e.g.", "eg", "i.e.", "ie", "such", "than"),
        *("more", "less", "least", "most", "at", "up", "out", "over", "under", "after"),
        *("before", "until", "since", "during", "via", "per", "these", "those", "again"),
    }
)
_TRIM = (
    "\"'`\u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f()[]<>{}.,;:!?\u3002\uff0c"
    "\u300a\u300b\u3008\u3009\u3010\u3011"
)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _class(ch: str) -> int:
    if ch.islower():
        return 0
    if ch.isupper():
        return 1
    if ch.isdigit():
        return 2
    return 3


def changes(value: str) -> float:
    """How often the character class changes (lower, upper, digit, other), per character:
    about 0.6 in random base62, under 0.15 in words and numbers."""
    if len(value) < 2:
        return 0.0
    flips = sum(_class(a) != _class(b) for a, b in pairwise(value))
    return flips / (len(value) - 1)


def looks_random(value: str, *, min_length: int = 16) -> bool:
    """Whether a string without spaces looks machine-made: long enough, enough entropy,
    and its character classes (lower, upper, digit, other) changing about as often as in
    a random string of the same mix. Words, numbers, versions, paths and hyphenated
    phrases change class far less often than that."""
    if len(value) < min_length or any(ch.isspace() for ch in value):
        return False
    if _WORD_COMPOUND.match(value) or value.isdigit() or _PATH.match(value):
        return False
    counts = Counter(_class(ch) for ch in value)
    n = len(value)
    expected = 1 - sum((c / n) ** 2 for c in counts.values())
    if expected < 0.2:
        return False  # one class: letters only or digits only
    threshold = 3.0 if n < 24 else 3.3
    return (
        entropy(value) >= threshold and changes(value) >= 0.6 * expected and not _identifier(value)
    )


_IDENTIFIER_CHARS = re.compile(r"[A-Za-z0-9_.\-/]+")
_IDENTIFIER_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _identifier(value: str) -> bool:
    """A name made of words (``MinimumPasswordLength``, ``STRIPE_WEBHOOK_SECRET``): its
    capitals change class as often as a random string's, but every part is a word."""
    if not _IDENTIFIER_CHARS.fullmatch(value):
        return False
    words = _IDENTIFIER_WORD.findall(value)
    if len(words) < 2:
        return False
    short = 0
    for w in words:
        if (w.isdigit() and len(w) <= 4) or (len(w) >= 3 and wordlike(w) >= 0.6):
            continue
        if w.lower() not in _SHORT_WORDS or not value.isalnum():
            return False
        short += 1
    # A two-letter word counts among two longer ones in a name written in camel case
    # ("InvalidClientTokenId"), not in words joined by punctuation (a passphrase's).
    return short == 0 or len(words) - short >= 2


#: Two-letter words an identifier's parts may be (``InvalidClientTokenId``,
#: ``UseSslIo``): among longer words, no sign of randomness.
_SHORT_WORDS = frozenset(
    {
        *("id", "db", "io", "ui", "os", "ip", "ok", "at", "by", "to", "of", "on", "in", "is"),
        *("it", "up", "no", "or", "an", "as", "vm", "js", "ts", "go", "my", "if", "do"),
    }
)


#: What a form's blank is drawn with.
_BLANK_CHARS = frozenset("_\u2026\u2014\u2013\uff3f")


#: "$fuuKUA8pi18": a "$" and a body of random mixed-case letters and digits. A shell's or
#: a template's variable is a name ("$DB_PASSWORD", "$db_password", "$dbPassword"); a
#: value that merely begins with "$" is no reference to one.
_DOLLAR_VALUE = re.compile(r"^\$(?P<b>[A-Za-z0-9!@#%^&*+=.~-]{8,})$")


def dollar_value(value: str) -> bool:
    """Whether a value that begins with "$" is a value, not a variable's name."""
    m = _DOLLAR_VALUE.match(value.strip(_TRIM))
    if m is None:
        return False
    body = m.group("b")
    if not (
        any(c.isupper() for c in body)
        and any(c.islower() for c in body)
        and any(c.isdigit() for c in body)
    ):
        return False
    return not _identifier(body) and not _identifier(body.strip("0123456789"))


def is_mask(value: str) -> bool:
    """A template, a mask, or a reference to where the secret is kept."""
    if _TEMPLATE.match(value) or _REFERENCE.match(value) or _TEMPLATE_INSIDE.search(value):
        return not dollar_value(value)
    core = value.strip(_TRIM)
    if len(core) >= 6 and len(set(core)) <= 2:
        return True  # xxxxxx, 000000, ******, abababab
    if len(core) >= 3 and sum(c in _BLANK_CHARS for c in core) >= 0.75 * len(core):
        return True  # "______'-", "____ ____": a form's blank to fill in by hand
    return bool(re.search(r"(.)\1{7,}", core))  # a run of one character: a mask


def is_placeholder(value: str) -> bool:
    """A mask or template, a reference to where the secret is kept, an example value."""
    if is_mask(value):
        return True
    core = value.strip(_TRIM)
    if core in KNOWN_EXAMPLES or core.lower() in _NOT_VALUES:
        return True
    return bool(_PLACEHOLDER_WORDS.search(core))


#: Keys that providers' documentation publishes for everyone to copy: not anyone's secret.
KNOWN_EXAMPLES = frozenset(
    {
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",  # Stripe's API reference
        "sk_test_BQokikJOvBiI2HlWgH4olfQ2",  # Stripe's older guides
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",  # GitHub's REST API docs
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # AWS's secret access key example
        # Azurite's and the Azure Storage Emulator's well-known development account key.
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        # RFC 6749's (OAuth 2.0) sample access token, refresh token and authorization code.
        *("2YotnFZFEjr1zCsicMWpAA", "tGzv3JOkF0XG5Qx2TlKWIA", "SplxlOBeZQQYbYS6WxSbIA"),
        # The Bitcoin wiki's wallet import format example, and the key it encodes.
        "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dJ1jvhTVqvbTLvyTJ",
        "0C28FCA386C7A227600B2FE50B7CAE11EC86D3BF1FBE471BE89827E19D72AA1D",
    }
)


def says_example(value: str) -> bool:
    """Whether a value's own words call it an example or a fake ("sk_test_FAKE...",
    "..._EXAMPLE_KEY"), whatever its shape."""
    return "EXAMPLE" in value.upper() or bool(_PLACEHOLDER_WORDS.search(value))


def is_documentation_example(value: str) -> bool:
    """Values a documentation page shows, recognised by their words or their shape (the
    jwt.io sample token among them: its payload names John Doe or subject 1234567890)."""
    return is_placeholder(value) or "EXAMPLE" in value.upper() or sample_jwt(value)


_JWT_EXAMPLES = ("john doe", "jane doe", "1234567890", "jwt.io", "example")


def sample_jwt(value: str) -> bool:
    """A JSON Web Token whose claims are documentation's (jwt.io's John Doe)."""
    core = value.strip(_TRIM)
    if not core.startswith("eyJ") or core.count(".") != 2 or len(core) > 4096:
        return False
    part = core.split(".")[1]
    try:
        payload = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        text = json.dumps(json.loads(payload)).lower()
    except (ValueError, binascii.Error):
        return False
    return any(marker in text for marker in _JWT_EXAMPLES)


#: Public by design: an SSH public key's algorithm (the key follows it), a Stripe
#: publishable key.
_PUBLIC = re.compile(
    r"^(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-|sk-(?:ssh|ecdsa)-|pk_(?:live|test)_)"
)


def _not_a_value(value: str) -> bool:
    """Shapes that are never a secret, whatever the name before them."""
    return bool(
        _PUBLIC.match(value)
        or _MEASURE.match(value)
        or _VERSION.match(value)
        or _DATE_TIME.match(value)
        or _EMAIL.match(value)
        or (_URL.match(value) and "@" not in value)
        or _TECH_TERM.match(value)
        or _STORE_PATH.match(value)
        or _DATA_FILE.match(value)
        or _KEY_FILE.match(value)
        or _SECRET_NAME.match(value)
        or _CALL.match(value)
    )


#: A function's call (``getpass.getpass("Password: ")``, ``read_secret(...)``): code that
#: asks for the value, not the value.
_CALL = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\((?:[\"'\w$)]|$)")


#: Segments of a password that mixes scripts: Chinese words and ASCII runs, joined by
#: its symbols ("青山-Blue-River-5521", "Qz8-刘老师-77").
MIXED_SCRIPT_VALUE = re.compile(
    r"(?:[\u4e00-\u9fff]{1,6}|[A-Za-z0-9]+)"
    r"(?:[-_#@!.&*+~$%]+(?:[\u4e00-\u9fff]{1,6}|[A-Za-z0-9]+)){2,}[!#$%&*+~]?"
)


def mixed_script_password(value: str) -> bool:
    """Three or more segments, Chinese words among ASCII runs, joined by symbols, with a
    digit: a password written in both scripts, not a sentence."""
    return (
        MIXED_SCRIPT_VALUE.fullmatch(value) is not None
        and _CJK.search(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isascii() and c.isalpha() for c in value)
    )


#: Passwords every list of the most common ones starts with, and the defaults devices and
#: test fixtures ship with: public knowledge, no one's secret where a text calls them a
#: default, a test's, or a common one (``common_password``).
_COMMON_PASSWORDS = frozenset(
    {
        *("1234", "0000", "1111", "12345", "123456", "1234567", "12345678", "123456789"),
        *("1234567890", "111111", "000000"),
        *("654321", "123123", "666666", "888888", "112233", "121212", "123321", "1q2w3e4r"),
        *("password1", "password12", "password123", "password!", "passw0rd", "p@ssw0rd"),
        *("p@ssword", "p@55w0rd", "pa55word", "pa$$w0rd", "qwerty", "qwerty123", "qwertyuiop"),
        *("abc123", "abcd1234", "letmein", "welcome1", "welcome123", "admin123", "admin@123"),
        *("toor", "iloveyou", "secret123", "test123", "test1234", "testpass", "111111111"),
        *("qwe123", "zaq12wsx", "1qaz2wsx", "hunter2", "trustno1"),
        # xkcd's weak example, quoted wherever password strength is explained.
        *("tr0ub4dor&3", "correcthorsebatterystaple"),
        # (The words among them, "password", "admin", "root", "changeme", are no value
        # at all: ``_NOT_VALUES``; a user's name stays one: "login is admin / ...".)
    }
)


def common_password(value: str) -> bool:
    """One of the passwords every common-password list holds (``123456``, ``P@ssw0rd``)."""
    return value.strip(_TRIM).lower() in _COMMON_PASSWORDS


def looks_secret(value: str, *, prose: bool, kind: Kind = Kind.PASSWORD) -> bool:
    """Whether a value after a credential's name is plausibly the credential itself.

    ``prose``: the value ends a sentence ("my password is ..."), where a lower-case word
    is more likely the sentence going on than a password."""
    if is_placeholder(value) or sample_jwt(value):
        return False
    value = value.strip(_TRIM)
    if len(value) < 4 or is_placeholder(value):
        return False
    if _CJK.search(value):
        # "青山-Blue-River-5521": Chinese words in a password, joined to the rest by its
        # symbols; otherwise the sentence going on.
        return kind is Kind.PASSWORD and mixed_script_password(value)
    if value.startswith("-----"):
        return False  # a PEM header: the private key rule judges the block
    if kind is Kind.PIN and value.strip("#*").isdigit():
        value = value.strip("#*")  # "4821#", "#4821": the keys around a code on a keypad
    if kind is Kind.PIN and _CODES.match(value):
        return True  # "35-12-48" (a combination), "4829 1037 5561" (backup codes)
    if kind is Kind.PIN and not any(c.isdigit() for c in value):
        return False  # "the PIN is acceptable": a code has digits
    if value.isdigit() and kind is not Kind.WEAK:
        return _digits_secret(value, kind)
    if _not_a_value(value):
        return False
    if kind in (Kind.TOKEN, Kind.WEAK) and value[-1] in "_-" and len(value) <= 16:
        return False  # "ghp_", "sk-proj-": a token's prefix, awaiting its body
    if kind is Kind.WEAK:
        return _weak_secret(value)
    if " " in value:
        return kind in (Kind.PASSWORD, Kind.PHRASE) and _phrase(value)
    if kind is Kind.PHRASE:
        return looks_random(value)  # a seed as hex or base58; "42" is a random seed
    return _one_word_secret(value, prose=prose, kind=kind)


def _digits_secret(value: str, kind: Kind) -> bool:
    """A value of digits only, after any name but a weak one."""
    if kind is Kind.TOKEN:
        return len(value) >= 10
    if kind is Kind.PHRASE:
        return False  # "seed: 1234567" seeds a random generator
    return len(value) >= (4 if kind is Kind.PIN else 6)  # a PIN; a password of digits


def _weak_secret(value: str) -> bool:
    """A value after a name that may hold a secret ("key", "session"): a random one only."""
    if _UUID.match(value.strip("/")) or _plain_segments(value) or _env_name(value):
        return False  # an id; "user:42:profile:v3", a key made of names
    return looks_random(value) or (value[:2] == "0x" and looks_random(value[2:]))


def _one_word_secret(value: str, *, prose: bool, kind: Kind) -> bool:
    """A value without spaces after a password's, a PIN's or a token's name."""
    if (value.isalpha() and value.isupper()) or _ENV_NAME.match(value):
        # "VAULT", "DB_PASSWORD": an acronym, a variable's name; unless random letters
        return kind is Kind.TOKEN and random_letters(value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if _WORD_COMPOUND.match(value):
        # "case-sensitive", "header.payload.signature": words of the sentence; a password
        # of three or more joined words ("correct-horse-battery") still counts.
        parts = re.split(r"[-_.]", value)
        if kind is Kind.TOKEN:
            return random_letters("".join(parts))  # a bootstrap token, "jdtjfj.ibaexx..."
        return not prose and len(parts) >= 3
    if kind is Kind.TOKEN and _WORD_NUMBER.match(value):
        return False  # "key_48213", "token-7": an identifier, a word and its number
    if kind is Kind.TOKEN:
        if _UUID.match(value) or _HASH_HEX.match(value):
            return True  # a key's value; the same shape without a key's name is an id
        if not (has_digit or has_symbol) and (not mixed_case or len(value) < 12):
            return random_letters(value)  # "Bearer", "OAuth": a word; unless random letters
        if _identifier(value):
            return False  # "withCredentials": a name made of words
    if has_digit or has_symbol or mixed_case:
        return len(value) >= 6
    # One lower-case word: a pass phrase when long, a word of the sentence otherwise.
    if kind is Kind.TOKEN:
        return random_letters(value)
    return len(value) >= (10 if prose else 8) and not value.endswith(("ed", "ing", "ly"))


#: Letter pairs common in English (and in romanised Chinese): nearly every pair of a word
#: is one of them, about a third of the pairs of random letters are.
_COMMON_PAIRS = frozenset(
    [
        "th",
        "he",
        "in",
        "er",
        "an",
        "re",
        "on",
        "at",
        "en",
        "nd",
        "ti",
        "es",
        "or",
        "te",
        "of",
        "ed",
        "is",
        "it",
        "al",
        "ar",
        "st",
        "to",
        "nt",
        "ng",
        "se",
        "ha",
        "as",
        "ou",
        "io",
        "le",
        "ve",
        "co",
        "me",
        "de",
        "hi",
        "ri",
        "ro",
        "ic",
        "ne",
        "ea",
        "ra",
        "ce",
        "li",
        "ch",
        "ll",
        "be",
        "ma",
        "si",
        "om",
        "ur",
        "ca",
        "el",
        "ta",
        "la",
        "ns",
        "di",
        "fo",
        "ho",
        "pe",
        "ec",
        "pr",
        "no",
        "ct",
        "us",
        "ac",
        "ot",
        "il",
        "tr",
        "ly",
        "nc",
        "et",
        "ut",
        "ss",
        "so",
        "rs",
        "un",
        "lo",
        "wa",
        "ge",
        "ie",
        "wh",
        "ee",
        "wi",
        "em",
        "ad",
        "ol",
        "rt",
        "po",
        "we",
        "na",
        "ul",
        "ni",
        "ts",
        "mo",
        "ow",
        "pa",
        "im",
        "mi",
        "ai",
        "sh",
        "ir",
        "su",
        "id",
        "os",
        "iv",
        "ia",
        "am",
        "fi",
        "ci",
        "vi",
        "pl",
        "ig",
        "tu",
        "ev",
        "ld",
        "ry",
        "mp",
        "fe",
        "bl",
        "ab",
        "gh",
        "ty",
        "op",
        "wo",
        "sa",
        "ay",
        "ex",
        "ke",
        "fr",
        "oo",
        "av",
        "ag",
        "if",
        "ap",
        "gr",
        "od",
        "bo",
        "sp",
        "rd",
        "do",
        "uc",
        "bu",
        "ei",
        "ov",
        "by",
        "rm",
        "ep",
        "tt",
        "oc",
        "fa",
        "ef",
        "cu",
        "rn",
        "sc",
        "gi",
        "da",
        "yo",
        "cr",
        "cl",
        "du",
        "ga",
        "qu",
        "ue",
        "ff",
        "ba",
        "ey",
        "ls",
        "va",
        "um",
        "pp",
        "ua",
        "up",
        "lu",
        "go",
        "ht",
        "ru",
        "ug",
        "ds",
        "lt",
        "pi",
        "rc",
        "rr",
        "eg",
        "au",
        "ck",
        "ew",
        "mu",
        "br",
        "bi",
        "pt",
        "ak",
        "pu",
        "ui",
        "rg",
        "ib",
        "tl",
        "ny",
        "ki",
        "rk",
        "ys",
        "ob",
        "mm",
        "fu",
        "ph",
        "og",
        "ms",
        "ye",
        "ud",
        "mb",
        "ip",
        "ub",
        "oi",
        "rl",
        "gu",
        "dr",
        "hr",
        "cc",
        "tw",
        "ft",
        "wn",
        "nu",
    ]
)


def wordlike(value: str) -> float:
    """The share of a word's letter pairs that are common in English: near 1 for words
    ("configuration"), about a third for random letters."""
    low = value.lower()
    pairs = [low[i : i + 2] for i in range(len(low) - 1)]
    return sum(p in _COMMON_PAIRS for p in pairs) / len(pairs) if pairs else 1.0


def _plain_segments(value: str) -> bool:
    """Three or more short parts, words or numbers joined by punctuation."""
    parts = [p for p in re.split(r"[:/_.\-]", value) if p]
    return len(parts) >= 3 and all(
        len(p) <= 4 or p.isdigit() or (p.isalpha() and wordlike(p) >= 0.6) for p in parts
    )


def _env_name(value: str) -> bool:
    """A variable's or a stored secret's name in capitals ("SLACK_WEBHOOK_URL", the name
    a CI system keeps a secret under): words joined by underscores, not random capitals."""
    return bool(_ENV_NAME.match(value)) and all(
        len(part) <= 4 or wordlike(part) >= 0.5 for part in value.split("_")
    )


def random_letters(value: str) -> bool:
    """Twelve or more letters of one case as random as a generated code
    ("brdjghtqztfwxnrw", a mail provider's authorisation code), not a word
    ("configuration"): few of its letter pairs are common in English."""
    if not (value.isascii() and value.isalpha() and len(value) >= 12):
        return False
    if not (value.islower() or value.isupper()):
        return False
    return entropy(value.lower()) >= 2.5 and wordlike(value) < 0.7


def _phrase(value: str) -> bool:
    """A passphrase or seed phrase given as words: three or more, few of them the small
    words of a sentence ("written on a card in my drawer" is not one)."""
    words = value.split()
    if len(words) < 3 or words[0].lower() in _STOPWORDS:
        return False
    small = sum(w.lower().strip(_TRIM) in _STOPWORDS for w in words)
    return small <= max(1, len(words) // 6)


_SEED_WORD = re.compile(r"^[a-z]{3,8}$")
#: A combination ("35-12-48", "4-7-1-9") or several codes ("48291037 55619024").
_CODES = re.compile(r"^\d{1,3}(?:-\d{1,3}){2,5}$|^\d{4,10}(?:[ ,、]+\d{4,10})+$")


def is_seed_phrase(words: list[str]) -> bool:
    """Twelve to twenty-four lower-case words of three to eight letters, none a small word
    of a sentence, few repeated, all but one of them BIP-39 words: a mnemonic written
    with nothing that calls it one (a shopping list of twelve words is not)."""
    if len(words) not in (12, 15, 18, 21, 24):
        return False
    if not all(_SEED_WORD.match(w) for w in words):
        return False
    if sum(w in _STOPWORDS for w in words) > 1:  # one is a BIP-39 word too ("can", "any")
        return False
    return len(set(words)) >= len(words) - 2 and bip39_share(words) >= 1 - 1.5 / len(words)
