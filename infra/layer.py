"""The runtime layer and the functions' code, built by local bundling from a lock file.

There is no Docker here, so nothing is built in a container.

The lock. ``infra/layer-requirements.lock`` holds pyproject's runtime dependencies as
resolved for Lambda (Linux arm64, manylinux2014, CPython 3.14) by ``make layer-lock``
(``uv pip compile`` with every file's hash). Its header records a hash of what it was
resolved from (:func:`lock_inputs_hash`); tests/infrastructure/test_layer.py fails when
pyproject's dependencies change and the lock was not regenerated.

What ships. pip installs the locked versions (``--no-deps --require-hashes``, binary
wheels for the Lambda platform only) less what Lambda's runtime provides (``PROVIDED``)
and what no function imports (``NEVER_IMPORTED``, each with its reason). The shared layer
holds them and the ``memvault`` and ``memvault_wire`` packages (``SHIPPED``; never the
clients, packaged apart in clients/python/); what only the ``api`` and ``direct`` functions
load (``FUNCTION_ONLY``: the cl100k token tables, libphonenumber) is bundled with those
two functions' own code instead, so the other four never carry it. Parts of a shipped
distribution nothing imports are removed (``PRUNED``: libphonenumber's geocoding tables).

Bytecode. Every module, the layer's and each function's, is compiled by CPython 3.14
(Debian's, fetched by ``scripts/python314.sh``) with ``--invalidation-mode
unchecked-hash``: Lambda's ``/opt`` and ``/var/task`` are read-only, so without it every
cold start compiles each module it imports, and unchecked pycs are used without reading
their source. Without a python3.14 the build fails, unless ``MEMVAULT_LAYER_NO_BYTECODE=1``
(refused under CI) ships source only, loudly and under its own asset hash.

Asset hashes are computed over the lock entries installed, the package source, the
platform, the bytecode's magic number and this build's recipe: a new release of any
dependency ships only through a new lock, under a new hash. Builds are cached under
``build/`` by those hashes.

:func:`build_host_twin` builds the same trees for this machine (its Python and
architecture) from the same lock, for rehearsals that run the handlers here.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra import settings

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "layers" / "memvault"
#: The packages the layer holds as source, by import name: the server and the wire models
#: it shares with its clients. The clients (clients/python/) are not among them.
SHIPPED = {"memvault": SOURCE, "memvault_wire": ROOT / "wire" / "memvault_wire"}
FUNCTIONS = ROOT / "functions"
LOCK = ROOT / "infra" / "layer-requirements.lock"
CACHE = ROOT / "build" / "layer"
FUNCTION_CACHE = ROOT / "build" / "functions"
HOST_TWIN = ROOT / "build" / "host-twin"
PYTHON314 = ROOT / "scripts" / "python314.sh"
#: Bumped whenever the build below changes what it ships for the same inputs.
RECIPE = "2"
#: The bytecode's magic number for CPython 3.14 (``importlib.util.MAGIC_NUMBER``; fixed
#: for a minor version from its first release candidate on). The compiler is checked.
PYC_MAGIC_314 = 3627
NO_BYTECODE_ENV = "MEMVAULT_LAYER_NO_BYTECODE"
#: Where Lambda puts a layer's and a function's files (the paths the bytecode names).
LAYER_MOUNT = "/opt/python"
TASK_ROOT = "/var/task"
RUNTIME_SITE = "/var/lang/lib/python3.14/site-packages"

#: Provided by the Lambda Python runtime; locked (the rehearsals use those versions) but
#: left out of the layer.
PROVIDED = ("boto3", "botocore", "s3transfer")
#: Locked because a dependency declares them, never imported by any function (every
#: handler is imported and invoked without them by tests/infrastructure/test_layer.py):
#: distribution -> (its import names, why it is not needed).
NEVER_IMPORTED: dict[str, tuple[tuple[str, ...], str]] = {
    "opensearch-protobufs": (
        ("opensearch_protobufs", "opensearch"),
        "opensearch-py 3.x requires it for a gRPC transport it does not have yet: no module "
        "of opensearchpy imports it (nor grpc, nor protobuf)",
    ),
    "grpcio": (("grpc",), "only opensearch-protobufs depends on it"),
    "protobuf": (("google",), "only opensearch-protobufs depends on it"),
    "pyyaml": (
        ("yaml", "_yaml"),
        "detect-secrets' YAML file transformer only; memvault scans strings, never files",
    ),
}
#: Only these functions load these distributions (memvault.policy.pii on a write,
#: memvault.services.tokens for a context): bundled with their code, not in the layer.
FUNCTION_ONLY: dict[str, tuple[str, ...]] = {
    "bpe-openai": ("api", "direct"),
    "phonenumbers": ("api", "direct"),
}
#: Their import names (checked by the tests: the other functions never load them).
FUNCTION_ONLY_MODULES = ("bpe_openai", "phonenumbers")
#: Parts of a shipped distribution that nothing imports, removed after it is installed:
#: distribution -> (paths in the site folder, why).
PRUNED: dict[str, tuple[tuple[str, ...], str]] = {
    "phonenumbers": (
        (
            "phonenumbers/geocoder.py",
            "phonenumbers/geocoder.pyi",
            "phonenumbers/geodata",
            "phonenumbers/carrier.py",
            "phonenumbers/carrier.pyi",
            "phonenumbers/carrierdata",
            "phonenumbers/timezone.py",
            "phonenumbers/timezone.pyi",
            "phonenumbers/tzdata",
        ),
        "its geocoding, carrier and time zone lookups (40 MB of tables): memvault only "
        "matches numbers (PhoneNumberMatcher), and no module left imports them",
    ),
}
HANDLERS = ("api", "authorizer", "direct", "indexer", "purge", "sweeper")
#: Console scripts pip writes under --target: nothing in Lambda runs them.
_DROPPED = ("bin",)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- the lock ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One locked distribution: its version and the hashes of its files."""

    name: str
    version: str
    hashes: tuple[str, ...] = ()

    def requirement(self, with_hashes: bool = True) -> str:
        text = f"{self.name}=={self.version}" if self.version else self.name
        if with_hashes:
            text += "".join(f" --hash={h}" for h in self.hashes)
        return text


#: The projects whose packages the layer ships (``SHIPPED``): their runtime dependencies
#: are what the lock is resolved from.
PYPROJECTS = (ROOT / "pyproject.toml", ROOT / "wire" / "pyproject.toml")


def runtime_dependencies() -> list[str]:
    """The runtime dependencies of the server and the wire models: what the lock is
    resolved from (memvault's own packages ship as source, ``SHIPPED``, so they are not
    resolved)."""
    found: list[str] = []
    for path in PYPROJECTS:
        for dependency in tomllib.loads(path.read_text())["project"]["dependencies"]:
            if not dependency.startswith("memvault-") and dependency not in found:
                found.append(dependency)
    return found


def uv_platform() -> str:
    """``settings.WHEEL_PLATFORM`` as uv names it (``manylinux2014_aarch64`` ->
    ``aarch64-manylinux2014``)."""
    tag, _, arch = settings.WHEEL_PLATFORM.partition("_")
    return f"{arch}-{tag}"


def lock_inputs_hash() -> str:
    """What the lock was resolved from: the dependencies, the platform, the Python."""
    inputs = {
        "dependencies": sorted(runtime_dependencies()),
        "platform": uv_platform(),
        "python": settings.PYTHON_VERSION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


_INPUTS_LINE = "# inputs-sha256: "


def lock_recorded_inputs_hash(text: str | None = None) -> str | None:
    text = LOCK.read_text() if text is None else text
    for line in text.splitlines():
        if line.startswith(_INPUTS_LINE):
            return line.removeprefix(_INPUTS_LINE).strip()
    return None


def compile_lock(*, upgrade: bool = False) -> Path:
    """Resolve the runtime dependencies for Lambda and write the lock (``make layer-lock``).

    The versions already locked are kept where they still satisfy pyproject (uv prefers
    an output file's pins); ``upgrade`` resolves every package afresh to its newest
    release (``make layer-lock UPGRADE=1``)."""
    uv = Path(sys.executable).parent / "uv"
    # uv writes a copy (seeded with the current pins), so the lock is never half written.
    draft = ROOT / "build" / LOCK.name
    draft.parent.mkdir(exist_ok=True)
    draft.unlink(missing_ok=True)
    if LOCK.exists():
        shutil.copyfile(LOCK, draft)
    command = [
        str(uv) if uv.exists() else "uv",
        "pip",
        "compile",
        "-",
        "--quiet",
        "--python-platform",
        uv_platform(),
        "--python-version",
        settings.PYTHON_VERSION,
        "--only-binary",
        ":all:",
        "--generate-hashes",
        "--custom-compile-command",
        "make layer-lock",
        "--output-file",
        str(draft),
        *(["--upgrade"] if upgrade else []),
    ]
    subprocess.run(  # noqa: S603 - fixed arguments
        command,
        input="\n".join(runtime_dependencies()) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    header = (
        "# memvault's runtime layer: pyproject's runtime dependencies resolved for Lambda\n"
        f"# ({uv_platform()}, CPython {settings.PYTHON_VERSION}) with every file's hash.\n"
        "# infra/layer.py installs the layer from it. Regenerate: `make layer-lock`.\n"
        f"{_INPUTS_LINE}{lock_inputs_hash()}\n"
    )
    resolved = draft.read_text()
    draft.write_text(header + resolved[resolved.index("# This file was autogenerated") :])
    draft.replace(LOCK)
    return LOCK


def locked(text: str | None = None) -> dict[str, Pin]:
    """The lock's pins by normalized name."""
    text = LOCK.read_text() if text is None else text
    joined = re.sub(r"\\\n", " ", text)
    pins: dict[str, Pin] = {}
    for line in joined.splitlines():
        tokens = line.split()
        if not tokens or tokens[0].startswith("#") or "==" not in tokens[0]:
            continue
        name, version = tokens[0].split("==", 1)
        hashes = tuple(t.removeprefix("--hash=") for t in tokens[1:] if t.startswith("--hash="))
        pins[_normalize(name)] = Pin(_normalize(name), version, hashes)
    return pins


def _selected(pins: dict[str, Pin], names: Iterable[str]) -> list[Pin]:
    missing = [n for n in names if n not in pins]
    if missing:
        raise RuntimeError(f"{LOCK.name} has no {missing}: run `make layer-lock`")
    return [pins[n] for n in sorted(names)]


def layer_pins(pins: dict[str, Pin] | None = None) -> list[Pin]:
    """The shared layer's distributions."""
    pins = locked() if pins is None else pins
    left_out = {*PROVIDED, *NEVER_IMPORTED, *FUNCTION_ONLY}
    return [pins[n] for n in sorted(pins) if n not in left_out]


def function_pins(name: str, pins: dict[str, Pin] | None = None) -> list[Pin]:
    """The distributions bundled with one function's code."""
    pins = locked() if pins is None else pins
    return _selected(pins, [d for d, fns in FUNCTION_ONLY.items() if name in fns])


def provided_pins(pins: dict[str, Pin] | None = None) -> list[Pin]:
    """What Lambda's runtime provides, at the locked versions (for the rehearsals)."""
    return _selected(locked() if pins is None else pins, PROVIDED)


def _check_lock() -> None:
    if lock_recorded_inputs_hash() != lock_inputs_hash():
        raise RuntimeError(
            f"{LOCK.relative_to(ROOT)} was not resolved from pyproject's current runtime "
            "dependencies: run `make layer-lock`"
        )


# -- bytecode ------------------------------------------------------------------------------


def bytecode_waived() -> bool:
    """``MEMVAULT_LAYER_NO_BYTECODE=1``: ship source only (offline development); never
    under CI."""
    if os.environ.get(NO_BYTECODE_ENV, "") not in ("1", "true"):
        return False
    if os.environ.get("CI"):
        raise RuntimeError(f"{NO_BYTECODE_ENV} is refused under CI: a layer ships bytecode")
    return True


def python314(arch: str | None = None) -> str:
    """A command that runs CPython 3.14 (Debian's, unpacked by scripts/python314.sh)."""
    args = [arch] if arch else []
    try:
        out = subprocess.run(  # noqa: S603 - fixed arguments
            ["bash", str(PYTHON314), *args],  # noqa: S607 - bash from PATH runs our script
            capture_output=True,
            text=True,
            check=True,
        )
    except subprocess.CalledProcessError as e:
        raise RuntimeError(
            f"no python3.14 to compile the layer's bytecode (scripts/python314.sh failed):\n"
            f"{e.stderr.strip()}\nSet {NO_BYTECODE_ENV}=1 to build without bytecode "
            "(offline development only)."
        ) from e
    return out.stdout.strip().splitlines()[-1]


def _compile(
    python: str, tree: Path, mount: str, *, root: Path, top_level_only: bool = False
) -> None:
    """Compile every module under ``tree`` (unchecked-hash pycs naming their source as
    under ``mount``, where Lambda puts ``root``); fails on any module that does not
    compile."""
    magic = subprocess.run(  # noqa: S603 - the interpreter we fetched
        [
            python,
            "-c",
            "import importlib.util as u; print(int.from_bytes(u.MAGIC_NUMBER[:2], 'little'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if python != sys.executable and int(magic) != PYC_MAGIC_314:
        raise RuntimeError(f"{python} writes bytecode {magic}, not CPython 3.14's {PYC_MAGIC_314}")
    subprocess.run(  # noqa: S603 - fixed arguments
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j0",
            *(["-l"] if top_level_only else []),
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(root),
            "-p",
            mount,
            str(tree),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def missing_bytecode(tree: Path, tag: str = "cpython-314") -> list[Path]:
    """Modules under ``tree`` without a pyc for ``tag`` beside them."""
    return [
        p
        for p in tree.rglob("*.py")
        if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").exists()
    ]


# -- building ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """Where a tree is built for: pip's flags and the interpreter that compiles it."""

    name: str
    pip_flags: tuple[str, ...]
    #: The compiler (a command), or None for source only.
    python: str | None
    tag: str

    @property
    def marker(self) -> str:
        return f"{self.name}/{self.tag}/{'bytecode' if self.python else 'source-only'}"


def lambda_platform() -> Platform:
    python = None if bytecode_waived() else python314()
    return Platform(
        "lambda",
        (
            "--platform",
            settings.WHEEL_PLATFORM,
            "--implementation",
            "cp",
            "--python-version",
            settings.PYTHON_VERSION,
        ),
        python,
        f"cpython-{settings.PYTHON_VERSION.replace('.', '')}",
    )


def host_platform() -> Platform:
    return Platform("host", (), sys.executable, sys.implementation.cache_tag)


def _digest(*parts: Any, files: Iterable[tuple[str, Path]] = ()) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(parts, sort_keys=True, default=str).encode())
    for name, path in files:
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _sources(folder: Path) -> list[tuple[str, Path]]:
    return [
        (str(p.relative_to(folder)), p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def _shipped_sources() -> list[tuple[str, Path]]:
    return [
        (f"{package}/{name}", path)
        for package, folder in SHIPPED.items()
        for name, path in _sources(folder)
    ]


def _place_shipped(platform: Platform, site: Path) -> None:
    """Copy memvault's own packages into ``site`` and compile them."""
    for package, folder in SHIPPED.items():
        shutil.copytree(
            folder, site / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        _with_bytecode(platform, site / package, LAYER_MOUNT, root=site)


def _bytecode_marker(platform: str = "lambda") -> str:
    if platform == "lambda":
        return "source-only" if bytecode_waived() else f"unchecked-hash/{PYC_MAGIC_314}"
    return f"unchecked-hash/{sys.implementation.cache_tag}"


def inputs_hash() -> str:
    """The shared layer's asset hash."""
    return _digest(
        RECIPE,
        settings.WHEEL_PLATFORM,
        settings.PYTHON_VERSION,
        _bytecode_marker(),
        [p.requirement() for p in layer_pins()],
        PRUNED,
        files=_shipped_sources(),
    )


def function_hash(name: str) -> str:
    """One function's asset hash (its code and what is bundled with it)."""
    return _digest(
        RECIPE,
        name,
        settings.WHEEL_PLATFORM,
        settings.PYTHON_VERSION,
        _bytecode_marker(),
        [p.requirement() for p in function_pins(name)],
        PRUNED,
        files=_sources(FUNCTIONS / name),
    )


def _pip_install(
    pins: Sequence[Pin], site: Path, platform: Platform, *, hashes: bool = True, binary: bool = True
) -> None:
    if not pins:
        site.mkdir(parents=True, exist_ok=True)
        return
    requirements = site.parent / f"{site.name}.requirements.txt"
    site.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text("".join(p.requirement(hashes) + "\n" for p in pins))
    subprocess.run(  # noqa: S603 - fixed arguments
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-compile",
            "--upgrade",
            *(["--require-hashes"] if hashes else []),
            *(["--only-binary=:all:"] if binary else []),
            *platform.pip_flags,
            "--target",
            str(site),
            "-r",
            str(requirements),
        ],
        check=True,
    )
    requirements.unlink()
    for pin in pins:
        for part in PRUNED.get(pin.name, ((), ""))[0]:
            target = site / part
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
    for name in _DROPPED:
        shutil.rmtree(site / name, ignore_errors=True)
    for path in site.rglob("__pycache__"):
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def _exclusive(cached: Path) -> Iterator[None]:
    """One build of ``cached`` at a time (synths and test sessions may run side by side)."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    with cached.with_name(cached.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _staging(cached: Path) -> Path:
    staging = cached.with_name(cached.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def _finish(staging: Path, cached: Path) -> Path:
    shutil.rmtree(cached, ignore_errors=True)
    staging.rename(cached)
    return cached


def _place(cached: Path, target: Path) -> None:
    """Hard links where the file system allows them (a layer is 50 MB), else copies."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(cached, target, dirs_exist_ok=True, copy_function=link)


def _packages(platform: Platform, pins: Sequence[Pin], mount: str) -> Path:
    """The pinned distributions installed for ``platform`` and compiled as seen from
    ``mount``, cached by exactly that: the layer's, api's and direct's, the runtime's.
    For this machine, each locked version it has no wheel for is replaced (the
    replacements are recorded beside the folder, see :func:`_host_install`)."""
    key = _digest(
        RECIPE,
        platform.marker,
        platform.pip_flags,
        os.uname().machine if platform.name == "host" else "",
        mount,
        [p.requirement() for p in pins],
        PRUNED,
    )
    cached = CACHE / f"packages-{platform.name}-{key}"
    with _exclusive(cached):
        if cached.exists():
            return cached
        staging = _staging(cached)
        if platform.name == "host":
            fallbacks: dict[str, str] = {}
            _host_install(pins, staging, fallbacks)
            cached.with_suffix(".fallbacks.json").write_text(json.dumps(fallbacks, indent=2))
        else:
            _pip_install(pins, staging, platform)
        if platform.python and pins:
            _compile(platform.python, staging, mount, root=staging)
        return _finish(staging, cached)


def _with_bytecode(platform: Platform, tree: Path, mount: str, *, root: Path) -> None:
    """Compile ``tree`` (inside ``root``, which Lambda mounts at ``mount``) and check it."""
    if not platform.python:
        print(
            f"WARNING: {NO_BYTECODE_ENV} is set: {tree.name} ships NO bytecode; every cold "
            "start compiles each module it imports. Never deploy this build.",
            file=sys.stderr,
        )
        return
    _compile(platform.python, tree, mount, root=root, top_level_only=tree == root)
    missing = missing_bytecode(tree, platform.tag)
    if missing:
        raise RuntimeError(f"no bytecode for {len(missing)} modules, e.g. {missing[:3]}")


def _layer_tree(platform: Platform, cached: Path, pins: Sequence[Pin]) -> Path:
    """``cached/python``: the layer's packages (linked from their cache) and memvault's
    own (``SHIPPED``), compiled."""
    packages = _packages(platform, pins, LAYER_MOUNT)
    with _exclusive(cached):
        if (cached / "python").exists():
            return cached
        staging = _staging(cached)
        site = staging / "python"
        _place(packages, site)
        _place_shipped(platform, site)
        return _finish(staging, cached)


def _function_tree(name: str, platform: Platform, cached: Path, pins: Sequence[Pin]) -> Path:
    """``cached``: a function's entry point, compiled, beside what is bundled with it."""
    packages = _packages(platform, pins, TASK_ROOT)
    with _exclusive(cached):
        if (cached / "index.py").exists():
            return cached
        staging = _staging(cached)
        _place(packages, staging)
        for _, path in _sources(FUNCTIONS / name):
            shutil.copy2(path, staging / path.relative_to(FUNCTIONS / name))
        _with_bytecode(platform, staging, TASK_ROOT, root=staging)
        return _finish(staging, cached)


def build(target: Path | None = None) -> Path:
    """Build (or reuse) the shared layer's ``python/`` tree; returns the cached folder and
    places a copy in ``target`` when given."""
    _check_lock()
    cached = _layer_tree(lambda_platform(), CACHE / inputs_hash(), layer_pins())
    if target is not None:
        _place(cached, target)
    return cached


def build_function(name: str, target: Path | None = None) -> Path:
    """Build (or reuse) one function's code folder; returns the cached folder."""
    _check_lock()
    cached = _function_tree(
        name,
        lambda_platform(),
        FUNCTION_CACHE / f"{name}-{function_hash(name)}",
        function_pins(name),
    )
    if target is not None:
        _place(cached, target)
    return cached


def build_provided(platform: Platform) -> Path:
    """What Lambda's runtime provides (boto3, botocore, s3transfer) at the locked versions,
    compiled, as the runtime has them: for the rehearsals, never deployed."""
    _check_lock()
    return _packages(platform, provided_pins(), RUNTIME_SITE)


# -- the host twin -------------------------------------------------------------------------


@dataclass
class HostTwin:
    """A twin of what Lambda runs, for this machine's Python and architecture: ``opt``
    (the layer: ``opt/python``), ``task/<function>`` (each function's code) and
    ``runtime`` (boto3, botocore, s3transfer as the runtime provides them)."""

    root: Path
    python: str
    #: Distributions not installed at their locked version here, and what was done.
    fallbacks: dict[str, str] = field(default_factory=dict)

    @property
    def opt(self) -> Path:
        return self.root / "opt"

    @property
    def runtime(self) -> Path:
        return self.root / "runtime"

    def task(self, name: str) -> Path:
        return self.root / "task" / name


def _host_install(pins: Sequence[Pin], site: Path, fallbacks: dict[str, str]) -> None:
    """The locked versions' wheels for this machine; where one has none, the locked version
    built from its sdist, else the newest wheel for this machine (both reported)."""
    platform = host_platform()
    try:
        _pip_install(pins, site, platform)
        return
    except subprocess.CalledProcessError:
        pass
    for pin in pins:
        try:
            _pip_install([pin], site, platform)
            continue
        except subprocess.CalledProcessError:
            pass
        try:
            _pip_install([pin], site, platform, binary=False)
            fallbacks[pin.name] = f"{pin.version}: no wheel for this machine, built from its sdist"
            continue
        except subprocess.CalledProcessError:
            pass
        _pip_install([Pin(pin.name, "")], site, platform, hashes=False)
        installed = next(site.glob(f"{pin.name.replace('-', '_')}-*.dist-info"), None)
        version = installed.name.split("-")[1].removesuffix(".dist-info") if installed else "?"
        fallbacks[pin.name] = (
            f"{pin.version} has no wheel or buildable sdist here: the newest wheel for this "
            f"machine, {version}, installed instead"
        )


def build_host_twin(target_dir: Path = HOST_TWIN) -> HostTwin:
    """Build (or reuse) a twin of the layer and the functions' code for this machine's
    Python and architecture, from the same lock: the same distributions at the same
    versions (each fallback reported), the same ones left out or pruned, bytecode from
    this Python (unchecked-hash, as for Lambda). The installed packages are cached by the
    lock's entries; a change to memvault or a function only recompiles that."""
    _check_lock()
    pins = locked()
    platform = host_platform()
    trees = {
        "opt": _packages(platform, layer_pins(pins), LAYER_MOUNT),
        "runtime": _packages(platform, provided_pins(pins), RUNTIME_SITE),
        **{
            name: _packages(platform, function_pins(name, pins), TASK_ROOT)
            for name in HANDLERS
            if function_pins(name, pins)
        },
    }
    fallbacks: dict[str, str] = {}
    for tree in trees.values():
        record = tree.with_suffix(".fallbacks.json")
        fallbacks |= json.loads(record.read_text()) if record.exists() else {}
    twin_hash = _digest(
        RECIPE,
        [str(t) for t in trees.values()],
        files=_shipped_sources() + [(f"functions/{k}", p) for k, p in _sources(FUNCTIONS)],
    )
    twin = HostTwin(target_dir, sys.executable, fallbacks)
    with _exclusive(target_dir):
        stamp = target_dir / "twin.json"
        recorded = json.loads(stamp.read_text()) if stamp.exists() else {}
        if recorded.get("hash") != twin_hash:
            staging = _staging(target_dir)
            site = staging / "opt" / "python"
            _place(trees["opt"], site)
            _place_shipped(platform, site)
            for name in HANDLERS:
                task = staging / "task" / name
                task.mkdir(parents=True)
                if name in trees:
                    _place(trees[name], task)
                for _, path in _sources(FUNCTIONS / name):
                    shutil.copy2(path, task / path.relative_to(FUNCTIONS / name))
                _with_bytecode(platform, task, TASK_ROOT, root=task)
            _place(trees["runtime"], staging / "runtime")
            (staging / "twin.json").write_text(
                json.dumps({"hash": twin_hash, "python": sys.version, "fallbacks": fallbacks})
            )
            shutil.rmtree(target_dir, ignore_errors=True)
            staging.rename(target_dir)
    for name, what in fallbacks.items():
        print(f"host twin: {name} {what}", file=sys.stderr)
    return twin


# -- rehearsals ----------------------------------------------------------------------------

INVOKER = ROOT / "scripts" / "lambda_invoke.py"
#: No AWS in a rehearsal: every AWS endpoint refuses at once, and nothing is retried.
_REFUSED = "http://127.0.0.1:9"
_ISSUER = "https://issuer.rehearsal.invalid"


def _proxy_get(path: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((ROOT / "events" / "api_write_memory.json").read_text())
    event.update(resource=path, path=path, httpMethod="GET", body=None, pathParameters=None)
    event["requestContext"].update(resourcePath=path, httpMethod="GET", path=f"/prod{path}")
    event["requestContext"].pop("authorizer")
    return event


def rehearsal_events() -> dict[str, list[dict[str, Any]]]:
    """Per function, the events a rehearsal invokes it with, in turn: each needs no AWS, or
    reaches AWS only to be refused (a clean error, as Lambda would report it)."""
    write = json.loads((ROOT / "events" / "api_write_memory.json").read_text())
    direct_write = json.loads((ROOT / "events" / "direct_write_memory.json").read_text())
    direct_write.pop("token")  # a silo's direct invocation may omit it
    return {
        # Health (DynamoDB unreachable: 503), then a write: its policy checks run (the
        # secrets scan, libphonenumber) before the store refuses it.
        "api": [_proxy_get("/v1/health"), write],
        "authorizer": [json.loads((ROOT / "events" / "authorizer_token.json").read_text())],
        "direct": [{"operation": "health"}, direct_write],
        "indexer": [{"Records": []}],
        # An action it does not know, after its composition is built.
        "purge": [{"action": "rehearse", "tenant_id": "acme", "deletion_id": "del_rehearsal"}],
        "sweeper": [{}],
    }


#: What only api and direct load, loaded from their code folder and used: a phone number
#: found by libphonenumber (memvault.policy.pii) and a cl100k token count (bpe-openai's
#: native tables), as a write's policy check and a context's budget would; and the
#: secrets scan (detect-secrets, every plugin loaded: without PyYAML).
_FUNCTION_ONLY_PROBE = """
from memvault.policy.pii import find_pii
from memvault.policy.secrets import find_secrets
from memvault.services.tokens import Cl100kCounter
import bpe_openai, phonenumbers
key = "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "q8Lr2Vd0XtwZ"
result = {
    "secrets": sorted({f.secret_type for f in find_secrets([("content", key)])}),
    "pii": sorted({f.pii_type for f in find_pii([("content", "call me on +44 20 7946 0958")])}),
    "tokens": Cl100kCounter().count("Internal technical documents are written in Chinese"),
    "from": [bpe_openai.__file__, phonenumbers.__file__],
}
"""


def rehearsal_probes() -> dict[str, str]:
    """Per function, code a rehearsal runs after the events (scripts/lambda_invoke.py)."""
    return {name: _FUNCTION_ONLY_PROBE for name in ("api", "direct")}


def rehearsal_env(name: str) -> dict[str, str]:
    """The environment Lambda and the CDK app give a function (infra/constructs/compute.py),
    with fake credentials and every AWS endpoint refusing."""
    issuers = {"acme": {"issuer": _ISSUER, "jwks_url": f"{_ISSUER}/jwks", "audience": "memvault"}}
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TZ": ":UTC",
        "AWS_LAMBDA_FUNCTION_NAME": f"memvault-{name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(settings.FUNCTIONS[name]["memory"]),
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.14",
        "LAMBDA_TASK_ROOT": TASK_ROOT,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "_X_AMZN_TRACE_ID": (
            "Root=1-00000000-000000000000000000000000;Parent=0000000000000000;Sampled=0"
        ),
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        "AWS_SESSION_TOKEN": "rehearsal",
        "AWS_ENDPOINT_URL": _REFUSED,
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": settings.APP,
        "POWERTOOLS_METRICS_NAMESPACE": settings.APP,
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "MEMVAULT_TABLE_PREFIX": f"{settings.APP}-",
        "MEMVAULT_AWS_REGION": "us-east-1",
        "MEMVAULT_DYNAMODB_ENDPOINT": _REFUSED,
        "MEMVAULT_SILO_TENANT_ID": "acme",
        "MEMVAULT_TENANT_ISSUERS": json.dumps(issuers),
        # What the Search construct adds (infra/constructs/search.py).
        "MEMVAULT_SEARCH_BACKEND": "opensearch",
        "MEMVAULT_SEARCH_ENDPOINT": "https://127.0.0.1:9",
        "MEMVAULT_SEARCH_AUTH": "sigv4",
        "MEMVAULT_EMBEDDING_MODEL": settings.EMBEDDING_MODEL,
        "MEMVAULT_BEDROCK_EMBEDDING_MODEL_ID": settings.BEDROCK_EMBEDDING_MODEL_ID,
    }


def invoke(
    python: Sequence[str],
    name: str,
    *,
    opt: Path,
    task: Path,
    runtime: Path,
    events: Sequence[dict[str, Any]] = (),
    probe: str | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """Import one handler in a fresh, isolated interpreter (``python``: a command) from the
    given folders and invoke it with ``events``; scripts/lambda_invoke.py's report."""
    out = task.parent / f".{name}.invoke.json"
    out.unlink(missing_ok=True)
    command = [
        *python,
        "-I",
        "-S",
        str(INVOKER),
        "--task",
        str(task),
        "--opt",
        str(opt),
        "--runtime",
        str(runtime),
        "--out",
        str(out),
    ]
    for event in events:
        command += ["--event", json.dumps(event)]
    if probe:
        command += ["--probe", probe]
    done = subprocess.run(  # noqa: S603 - fixed arguments
        command, env=rehearsal_env(name), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"{name}: the import failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    # What the handlers logged as errors (an invocation answered 500 names its cause here).
    report["logged_errors"] = [
        record.get("error") or record.get("message")
        for record in (_json_line(line) for line in done.stdout.splitlines())
        if record.get("level") in ("ERROR", "CRITICAL")
    ]
    return report


#: How each function's invocations end in a rehearsal (``returned:<statusCode>``,
#: ``returned``, or ``raised:<error type>``).
REHEARSAL_OUTCOMES: dict[str, list[str]] = {
    "api": ["returned:503", "returned:500"],  # health: DynamoDB unreachable; the write too
    "authorizer": ["raised:Exception"],  # "Unauthorized", which API Gateway maps to a 401
    "direct": ["returned:503", "returned:401"],  # health; a write with no caller named
    "indexer": ["returned"],  # {"batchItemFailures": []}
    "purge": ["raised:ValueError"],  # an unknown action, after the composition is built
    "sweeper": ["raised:EndpointConnectionError"],  # its first DynamoDB call is refused
}


def outcome(invocation: dict[str, Any]) -> str:
    if "raised" in invocation:
        return f"raised:{invocation['raised']['type']}"
    returned = invocation["returned"]
    code = returned.get("statusCode") if isinstance(returned, dict) else None
    return "returned" if code is None else f"returned:{code}"


def rehearsal_problems(name: str, report: dict[str, Any]) -> list[str]:
    """What is wrong with one function's rehearsal (scripts/lambda_invoke.py's report)."""
    problems = []
    got = [outcome(i) for i in report.get("invocations", [])]
    if got != REHEARSAL_OUTCOMES[name]:
        problems.append(f"outcomes {got}, expected {REHEARSAL_OUTCOMES[name]}")
    errors = [
        *report["logged_errors"],
        *(i.get("raised", {}).get("type") for i in report["invocations"]),
    ]
    if any(e and ("ImportError" in e or "ModuleNotFoundError" in e) for e in errors):
        problems.append(f"an import failed: {errors}")
    never = {m for modules, _ in NEVER_IMPORTED.values() for m in modules}
    if never & set(report["loaded"]):
        problems.append(
            f"loaded what the layer leaves out: {sorted(never & set(report['loaded']))}"
        )
    probe = rehearsal_probes().get(name)
    if probe is None and set(FUNCTION_ONLY_MODULES) & set(report["loaded"]):
        problems.append(f"loaded {sorted(set(FUNCTION_ONLY_MODULES) & set(report['loaded']))}")
    if probe is not None:
        result = report.get("probe", {}).get("returned")
        if not isinstance(result, dict) or (
            result.get("pii") != ["phone_number"]
            or not result.get("tokens")
            or not result.get("secrets")  # AWS's own example key reads as documentation
        ):
            problems.append(f"probe: {report.get('probe')}")
    return problems


def _json_line(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


# -- sizes ---------------------------------------------------------------------------------


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def sizes() -> dict[str, dict[str, float]]:
    """Per function, MB unzipped: the shared layer, its own code, and both together."""
    layer = tree_bytes(build()) / 1e6
    out = {}
    for name in HANDLERS:
        own = tree_bytes(build_function(name)) / 1e6
        out[name] = {
            "layer_mb": round(layer, 1),
            "function_mb": round(own, 1),
            "total_mb": round(layer + own, 1),
        }
    return out


# -- CDK -----------------------------------------------------------------------------------

#: Never pulled: local bundling always succeeds or fails loudly.
_IMAGE = "public.ecr.aws/sam/build-python3.14"


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        build(Path(output_dir))
        return True


@jsii.implements(ILocalBundling)
class FunctionLocalBundling:
    def __init__(self, name: str) -> None:
        self.name = name

    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        build_function(self.name, Path(output_dir))
        return True


def runtime_layer_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(SOURCE.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=inputs_hash(),
        bundling=BundlingOptions(image=DockerImage.from_registry(_IMAGE), local=PipLocalBundling()),
    )


def function_code(name: str) -> lambda_.Code:
    """A function's code: its entry point, compiled, with what only it loads."""
    return lambda_.Code.from_asset(
        str(FUNCTIONS / name),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=function_hash(name),
        bundling=BundlingOptions(
            image=DockerImage.from_registry(_IMAGE), local=FunctionLocalBundling(name)
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.layer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    lock = sub.add_parser("lock", help="resolve the runtime dependencies into the lock")
    lock.add_argument("--upgrade", action="store_true", help="every package to its newest")
    sub.add_parser("build", help="build the layer and every function's code (cached)")
    sub.add_parser("sizes", help="per function: the layer, its own code, both (MB)")
    twin = sub.add_parser("host-twin", help="build the host twin")
    twin.add_argument("--target", type=Path, default=HOST_TWIN)
    args = parser.parse_args(argv)
    if args.command == "lock":
        print(compile_lock(upgrade=args.upgrade).relative_to(ROOT))
    elif args.command == "build":
        print(build())
        for name in HANDLERS:
            print(build_function(name))
    elif args.command == "sizes":
        table = sizes()
        print(f"{'function':<11} {'layer MB':>9} {'own MB':>8} {'total MB':>9}  (unzipped)")
        for name, row in table.items():
            print(f"{name:<11} {row['layer_mb']:>9} {row['function_mb']:>8} {row['total_mb']:>9}")
    else:
        built = build_host_twin(args.target)
        print(json.dumps({"root": str(built.root), "fallbacks": built.fallbacks}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
