"""Provider token formats: a fixed prefix and a random body of a known alphabet and length.

The formats follow the public rule sets of gitleaks and trufflehog (and detect-secrets,
whose plugins run beside these: AWS key ids, GitHub and GitLab tokens, Slack, Stripe live
keys, Twilio, Mailchimp, npm, PyPI, SendGrid, Square, Telegram, Discord, JWTs, private key
headers). A token matches when its whole body has the format's length; a body that is a
mask or an example (``ghp_XXXX...``, ``...EXAMPLE...``) does not count.

Formats are matched inside *candidates*, runs of token characters of 12 or more, so that
a line of prose costs one scan for such runs and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from memvault.policy.secret_values import (
    KNOWN_EXAMPLES,
    is_documentation_example,
    looks_random,
    says_example,
)

#: A token ends where its alphabet does; a hyphen may follow it when a name goes on in
#: another script or after a dot ("deepseek-sk-<hex>-配置备份.txt").
_END = r"(?![A-Za-z0-9_]|-[A-Za-z0-9_])"
#: A token may follow a hyphen or underscore ("dump-sk-proj-...json"), not a letter.
_START = r"(?<![A-Za-z0-9])"


@dataclass(frozen=True)
class Format:
    secret_type: str
    #: The literal a token starts with: what a split token is reassembled from.
    prefix: str
    regex: re.Pattern[str]
    #: Whether the body must also look random (formats whose prefix is a common word).
    random_body: bool = False


def _f(secret_type: str, prefix: str, body: str, *, random_body: bool = False) -> Format:
    pattern = _START + re.escape(prefix) + body + _END
    return Format(secret_type, prefix, re.compile(pattern), random_body)


A62 = "[A-Za-z0-9]"
B64U = "[A-Za-z0-9_-]"
HEX = "[a-f0-9]"

FORMATS: tuple[Format, ...] = (
    # Code hosting, CI and registries.
    _f("GitHub Fine-Grained Token", "github_pat_", r"[A-Za-z0-9_]{60,90}"),
    _f("GitHub Token", "ghp_", f"{A62}{{36,40}}"),
    _f("GitHub Token", "gho_", f"{A62}{{36,40}}"),
    _f("GitHub Token", "ghu_", f"{A62}{{36,40}}"),
    _f("GitHub Token", "ghs_", f"{A62}{{36,40}}"),
    _f("GitHub Token", "ghr_", f"{A62}{{36,40}}"),
    *(
        _f("GitLab Token", p, f"{B64U}{{20,64}}")
        for p in ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-")
    ),
    _f("Bitbucket App Password", "ATBB", f"{A62}{{28,40}}"),
    _f("Atlassian API Token", "ATATT3", r"[A-Za-z0-9_=\-]{100,}"),
    _f("Docker Hub Token", "dckr_pat_", f"{B64U}{{27,40}}"),
    _f("Docker Hub Token", "dckr_oat_", f"{B64U}{{27,40}}"),
    _f("Sourcegraph Access Token", "sgp_", f"(?:{HEX}{{16}}_)?{HEX}{{40}}"),
    _f("OpenRouter API Key", "sk-or-v1-", f"{HEX}{{64}}"),
    _f("NPM Token", "npm_", f"{A62}{{36}}"),
    _f("PyPI Token", "pypi-AgE", f"{B64U}{{50,}}"),
    _f("RubyGems Token", "rubygems_", f"{HEX}{{48}}"),
    _f("NuGet API Key", "oy2", "[a-z0-9]{43}"),
    _f("Crates.io Token", "cio", f"{A62}{{32}}", random_body=True),
    _f("Clojars Token", "CLOJARS_", "[a-z0-9]{60}"),
    _f("Postman API Key", "PMAK-", f"{HEX}{{24}}-{HEX}{{34}}"),
    _f("Terraform Cloud Token", "", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,70}"),
    _f("Pulumi Token", "pul-", f"{HEX}{{40}}"),
    _f("Prefect Token", "pnu_", f"{A62}{{36}}"),
    _f("Readme API Key", "rdme_", "[a-z0-9]{70}"),
    *(_f("SonarQube Token", p, f"{HEX}{{40}}") for p in ("sqp_", "squ_", "sqa_")),
    _f("Buildkite Token", "bkua_", f"{HEX}{{40}}"),
    _f("CircleCI Token", "CCIPAT_", f"{B64U}{{30,}}"),
    # Cloud providers.
    _f("Google OAuth Client Secret", "GOCSPX-", f"{B64U}{{28}}"),
    _f("Google OAuth Access Token", "ya29.", f"{B64U}{{30,}}"),
    _f("Google OAuth Refresh Token", "1//0", f"{B64U}{{40,}}"),
    _f("Google API Key", "AIza", f"{B64U}{{35}}"),
    _f("Azure AD Client Secret", "", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"),
    _f("Alibaba Cloud AccessKey", "LTAI", f"{A62}{{12,24}}", random_body=True),
    _f("Tencent Cloud SecretId", "AKID", f"{A62}{{32,36}}"),
    _f("Volcengine AccessKey", "AKLT", f"{B64U}{{40,}}"),
    _f("DigitalOcean Token", "dop_v1_", f"{HEX}{{64}}"),
    _f("DigitalOcean Token", "doo_v1_", f"{HEX}{{64}}"),
    _f("DigitalOcean Token", "dor_v1_", f"{HEX}{{64}}"),
    _f("Heroku API Key", "HRKU-", f"{B64U}{{20,}}"),
    _f(
        "Tailscale Key",
        "tskey-",
        r"(?:auth|api|client|webhook|scim)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}",
    ),
    _f("Fly.io Token", "fo1_", f"{B64U}{{40,}}"),
    _f("Fly.io Token", "fm2_", r"[A-Za-z0-9+/=_,\-]{40,}"),
    _f("Vercel Token", "vcp_", f"{A62}{{24,}}"),
    _f("Vercel Token", "vci_", f"{A62}{{24,}}"),
    _f("Vercel Token", "vca_", f"{A62}{{24,}}"),
    _f("Vercel Token", "vcr_", f"{A62}{{24,}}"),
    _f("Vercel Token", "vck_", f"{A62}{{24,}}"),
    _f("Netlify Token", "nfp_", f"{A62}{{36,}}"),
    _f("Supabase Token", "sbp_", f"{HEX}{{40}}"),
    _f("Supabase Secret Key", "sb_secret_", f"{B64U}{{20,}}"),
    _f("Cloudflare Origin CA Key", "v1.0-", f"{HEX}{{24}}-{HEX}{{146}}"),
    _f("HashiCorp Vault Token", "hvs.", f"{B64U}{{24,}}"),
    _f("HashiCorp Vault Token", "hvb.", f"{B64U}{{24,}}"),
    _f("HashiCorp Vault Token", "hvr.", f"{B64U}{{24,}}"),
    _f("Doppler Token", "dp.", r"(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),
    _f("Databricks Token", "dapi", f"{HEX}{{32}}(?:-\\d)?"),
    _f("Dynatrace Token", "dt0c01.", "[A-Z0-9]{24}\\.[A-Z0-9]{64}"),
    _f("New Relic Key", "NRAK-", "[A-Z0-9]{27}"),
    _f("New Relic Key", "NRII-", f"{B64U}{{32}}"),
    _f("New Relic Key", "NRJS-", f"{HEX}{{19}}"),
    _f("Sentry Token", "sntrys_", r"[A-Za-z0-9+/=_\-]{30,}"),
    _f("Sentry Token", "sntryu_", f"{HEX}{{64}}"),
    _f("Grafana Token", "glc_", r"[A-Za-z0-9+/]{32,}={0,2}"),
    _f("Grafana Token", "glsa_", f"{A62}{{32}}_{HEX}{{8}}"),
    _f("Age Secret Key", "AGE-SECRET-KEY-1", "[A-Z0-9]{50,70}"),
    _f("1Password Secret Key", "A3-", "[A-Z0-9]{6}-[A-Z0-9]{5,6}(?:-[A-Z0-9]{5}){4}"),
    _f("1Password Service Account Token", "ops_eyJ", r"[A-Za-z0-9+/=_\-]{100,}"),
    # Payments and commerce.
    _f("Stripe Key", "sk_live_", f"{A62}{{16,}}"),
    _f("Stripe Key", "sk_test_", f"{A62}{{16,}}"),
    _f("Stripe Key", "rk_live_", f"{A62}{{16,}}"),
    _f("Stripe Key", "rk_test_", f"{A62}{{16,}}"),
    _f("Stripe Webhook Secret", "whsec_", f"{A62}{{24,}}"),
    *(_f("Shopify Token", p, "[a-fA-F0-9]{32}") for p in ("shpat_", "shpca_", "shppa_", "shpss_")),
    _f("Square Token", "sq0atp-", f"{B64U}{{22}}"),
    _f("Square Token", "sq0csp-", f"{B64U}{{43}}"),
    _f("Square Token", "EAAA", f"{B64U}{{60}}"),
    _f("PayPal Braintree Token", "access_token$production$", r"[0-9a-z]{16}\$[0-9a-f]{32}"),
    _f("Flutterwave Secret Key", "FLWSECK", r"(?:_TEST)?-[a-h0-9]{32}-X"),
    _f("Shippo Token", "shippo_", f"(?:live|test)_{HEX}{{40}}"),
    _f("EasyPost Key", "EZAK", "[a-z0-9]{54}"),
    _f("EasyPost Key", "EZTK", "[a-z0-9]{54}"),
    _f("Adyen Key", "AQE", r"[A-Za-z0-9+/=_\-]{80,}"),
    # Messaging, e-mail and social.
    _f("Slack Token", "xoxb-", r"[0-9A-Za-z\-]{20,}"),
    _f("Slack Token", "xoxp-", r"[0-9A-Za-z\-]{20,}"),
    _f("Slack Token", "xoxa-", r"[0-9A-Za-z\-]{20,}"),
    _f("Slack Token", "xoxe.xox", r"[bp]-\d-[A-Za-z0-9]{100,}"),
    _f("Slack Token", "xoxe-", r"\d-[A-Za-z0-9]{100,}"),
    _f("Slack Token", "xapp-", r"\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    _f("Slack Webhook", "https://hooks.slack.com/", r"(?:services|workflows|triggers)/[\w/]+"),
    _f("Discord Webhook", "https://discord", r"(?:app)?\.com/api/webhooks/\d+/[\w\-]{60,}"),
    _f("Mailgun Key", "key-", f"{HEX}{{32}}"),
    _f("Mailgun Key", "", f"{HEX}{{32}}-{HEX}{{8}}-{HEX}{{8}}"),
    _f("Mailchimp Key", "", f"{HEX}{{32}}-us\\d{{1,2}}"),
    _f("SendGrid API Key", "SG.", f"{B64U}{{16,32}}\\.{B64U}{{16,64}}"),
    _f("Brevo API Key", "xkeysib-", f"{HEX}{{64}}-{A62}{{16}}"),
    _f("Telegram Bot Token", "", r"\d{8,10}:AA[A-Za-z0-9_\-]{33}"),
    _f("Facebook Access Token", "EAA", f"{A62}{{90,}}"),
    _f("Twitter Bearer Token", "AAAAAAAAAAAAAAAAAAAAA", r"[A-Za-z0-9%]{30,}"),
    _f("Firebase Cloud Messaging Key", "AAAA", f"{B64U}{{7}}:APA91b{B64U}{{100,}}"),
    _f("Mapbox Secret Token", "sk.eyJ", r"[A-Za-z0-9_\-]{30,}\.[A-Za-z0-9_\-]{20,}"),
    _f("Linear API Key", "lin_api_", f"{A62}{{40}}"),
    _f("Linear OAuth Token", "lin_oauth_", f"{HEX}{{64}}"),
    _f("Notion Token", "secret_", f"{A62}{{43}}"),
    _f("Notion Token", "ntn_", f"{A62}{{40,}}"),
    _f("Airtable Token", "pat", f"{A62}{{14}}\\.{HEX}{{64}}"),
    _f("Typeform Token", "tfp_", r"[A-Za-z0-9_=.\-]{40,}"),
    _f("Contentful Token", "CFPAT-", f"{B64U}{{43}}"),
    _f("Asana Token", "", r"[0-9]/[0-9]{13,19}(?:/[0-9]{13,19})?:[A-Za-z0-9]{32}"),
    _f("Figma Token", "figd_", f"{B64U}{{38,48}}"),
    _f("Figma Token", "figu_", f"{B64U}{{38,48}}"),
    _f("Planetscale Token", "pscale_", r"(?:tkn|pw|oauth)_[A-Za-z0-9_.=\-]{32,64}"),
    _f("Intercom Token", "dG9rOj", r"[A-Za-z0-9+/=]{40,}"),
    # AI and ML providers.
    _f("Anthropic API Key", "sk-ant-", r"[a-z]+\d*-[A-Za-z0-9_\-]{20,}"),
    _f("OpenAI API Key", "sk-proj-", f"{B64U}{{20,}}"),
    _f("OpenAI API Key", "sk-svcacct-", f"{B64U}{{20,}}"),
    _f("OpenAI API Key", "sk-admin-", f"{B64U}{{20,}}"),
    _f("OpenAI-Style API Key", "sk-", f"{A62}{{20,}}"),
    _f("OpenAI-Style API Key", "sk-", f"{HEX}{{32}}"),
    _f("ElevenLabs Key", "sk_", f"{HEX}{{48}}"),
    _f("Groq API Key", "gsk_", f"{A62}{{40,}}"),
    _f("Replicate Token", "r8_", f"{A62}{{37}}"),
    _f("Perplexity API Key", "pplx-", f"{A62}{{40,}}"),
    _f("xAI API Key", "xai-", f"{A62}{{60,}}"),
    _f("LangSmith Key", "lsv2_", f"(?:pt|sk)_{HEX}{{32}}_{HEX}{{10}}"),
    _f("Pinecone API Key", "pcsk_", r"[A-Za-z0-9_]{40,}"),
    _f("Hugging Face Token", "hf_", f"{A62}{{34,}}"),
    _f("Hugging Face Token", "api_org_", f"{A62}{{34}}"),
    _f("Fireworks API Key", "fw_", f"{A62}{{24,}}", random_body=True),
    _f("Tavily API Key", "tvly-", f"{B64U}{{24,}}"),
    _f("Langfuse Secret Key", "sk-lf-", r"[a-f0-9\-]{36}"),
    # Wallets and key files.
    # A Nostr private key (NIP-19): bech32, "nsec1" then 58 characters.
    _f("Nostr Private Key", "nsec1", "[a-z0-9]{58}"),
    # A DingTalk (钉钉) robot's signing secret: "SEC" then 64 hex digits.
    _f("DingTalk Robot Secret", "SEC", f"{HEX}{{64}}", random_body=True),
    # Base58 keys stand alone: not inside a longer base64 run.
    Format(
        "Bitcoin Private Key (WIF)",
        "",
        re.compile(r"(?<![\w+/=\-])[5KL][1-9A-HJ-NP-Za-km-z]{50,51}(?![\w+/=\-])"),
        random_body=True,
    ),
    Format(
        # A bot token: the bot's id in base64, a timestamp, an HMAC (trufflehog's shape).
        "Discord Bot Token",
        "",
        re.compile(
            r"(?<![\w.\-])[A-Za-z0-9_\-]{23,28}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}"
            r"(?![\w.\-])"
        ),
        random_body=True,
    ),
    Format(
        # A Zhipu AI (智谱, GLM / BigModel) API key: the key's id in 32 hex digits, a dot,
        # its secret in 16 letters and digits.
        "Zhipu AI API Key",
        "",
        re.compile(r"(?<![\w.\-/])[0-9a-f]{32}\.(?=[a-z0-9]*[A-Z])[A-Za-z0-9]{16}(?![\w.\-/])"),
        random_body=True,
    ),
    Format(
        "Extended Private Key",
        "",
        re.compile(r"(?<![\w+/=\-])[xyztuv]prv[1-9A-HJ-NP-Za-km-z]{100,112}(?![\w+/=\-])"),
    ),
)
_BY_PREFIX: dict[str, list[Format]] = {}
for _format in FORMATS:
    _BY_PREFIX.setdefault(_format.prefix, []).append(_format)
_UNPREFIXED = tuple(_BY_PREFIX.pop(""))
#: What each unprefixed format's token must hold, and its least length: a substring test
#: and a length test are what most runs cost.
_UNPREFIXED_HINTS: dict[str, tuple[str, int]] = {
    "Terraform Cloud Token": (".atlasv1.", 80),
    "Azure AD Client Secret": ("Q~", 40),
    "Mailgun Key": ("-", 50),
    "Mailchimp Key": ("-us", 35),
    "Telegram Bot Token": (":AA", 44),
    "Asana Token": (":", 50),
    "Bitcoin Private Key (WIF)": ("", 51),
    "Extended Private Key": ("prv", 104),
    "Discord Bot Token": (".", 58),
    "Zhipu AI API Key": (".", 49),
}
#: Prefixes by their first two characters, longest first: a token can start wherever a
#: word starts, and a dictionary lookup there costs less than a regex of all prefixes.
PREFIXES = tuple(sorted(_BY_PREFIX, key=len, reverse=True))
_BY_HEAD: dict[str, tuple[str, ...]] = {}
for _prefix in PREFIXES:
    _BY_HEAD[_prefix[:2]] = (*_BY_HEAD.get(_prefix[:2], ()), _prefix)
#: Where a token may start: a letter or digit that no letter or digit precedes.
WORD_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]")

#: Runs of characters a token is made of; formats are matched only inside these.
CANDIDATE = re.compile(r"[A-Za-z0-9_\-.+/=~:$%,]{12,}")


def prefix_at(text: str, pos: int) -> str | None:
    """The longest token prefix ``text`` has at ``pos``, if any."""
    for prefix in _BY_HEAD.get(text[pos : pos + 2], ()):
        if text.startswith(prefix, pos):
            return prefix
    return None


def _accept(fmt: Format, token: str) -> bool:
    if token in KNOWN_EXAMPLES:
        return False
    body = token[len(fmt.prefix) :] if fmt.prefix else token
    if is_documentation_example(body) or says_example(token) or len(set(body)) <= 4:
        return False
    return not fmt.random_body or looks_random(body, min_length=12)


def formats_in(text: str) -> Iterator[str]:
    """The secret types of the provider tokens in ``text``."""
    for candidate in CANDIDATE.finditer(text):
        run = candidate.group()
        yield from _formats_in_run(run)


def _formats_in_run(run: str) -> Iterator[str]:
    seen: set[str] = set()
    for start in WORD_START.finditer(run):
        prefix = prefix_at(run, start.start())
        if prefix is None:
            continue
        for fmt in _BY_PREFIX[prefix]:
            found = fmt.regex.match(run, start.start())
            if found and fmt.secret_type not in seen and _accept(fmt, found.group()):
                seen.add(fmt.secret_type)
                yield fmt.secret_type
                break
    for fmt in _UNPREFIXED:
        hint, least = _UNPREFIXED_HINTS[fmt.secret_type]
        if len(run) < least or hint not in run:
            continue
        found = fmt.regex.search(run)
        if found and fmt.secret_type not in seen and _accept(fmt, found.group()):
            seen.add(fmt.secret_type)
            yield fmt.secret_type


def format_at(text: str) -> tuple[str, str] | None:
    """The secret type and random body of the provider token ``text`` wholly is."""
    prefix = prefix_at(text, 0)
    if prefix is None:
        return None
    for fmt in _BY_PREFIX[prefix]:
        if fmt.regex.fullmatch(text) and _accept(fmt, text):
            return fmt.secret_type, text[len(prefix) :]
    return None
