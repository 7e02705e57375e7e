"""The runtime layer and the functions' code (infra/layer.py): the lock, what ships where,
the bytecode, the sizes; and every handler imported and invoked from a twin of them built
for this machine, with what the layer leaves out absent."""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from infra import layer

from tests.infrastructure.conftest import Synth, function

#: Lambda's limit on a function's code and layers together, unzipped.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
NEVER_IMPORTED_MODULES = {m for modules, _ in layer.NEVER_IMPORTED.values() for m in modules}
#: What only the clients (clients/python/) use: the SDK's HTTP stack, the MCP SDK and
#: LangGraph. The layer holds none of it.
CLIENT_ONLY = {"memvault_client", "httpx", "httpcore", "h11", "mcp", "langgraph"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


# -- the lock ------------------------------------------------------------------------------


def test_the_lock_was_resolved_from_pyprojects_runtime_dependencies() -> None:
    assert layer.lock_recorded_inputs_hash() == layer.lock_inputs_hash(), (
        "pyproject's runtime dependencies changed since infra/layer-requirements.lock was "
        "resolved: run `make layer-lock` and commit the lock"
    )


def test_a_changed_dependency_would_make_the_lock_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = layer.lock_recorded_inputs_hash()
    deps = layer.runtime_dependencies()
    monkeypatch.setattr(layer, "runtime_dependencies", lambda: [*deps[:-1], deps[-1] + ",<99"])
    assert layer.lock_inputs_hash() != recorded
    with pytest.raises(RuntimeError, match="make layer-lock"):
        layer.build()


def test_the_lock_is_resolved_from_every_shipped_projects_dependencies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wire models ship in the layer, so a dependency they add is locked too."""
    wire = tmp_path / "pyproject.toml"
    wire.write_text(
        '[project]\nname = "memvault-wire"\ndependencies = ["pydantic>=2.14", "orjson>=3"]\n'
    )
    before = layer.lock_inputs_hash()
    monkeypatch.setattr(layer, "PYPROJECTS", (layer.PYPROJECTS[0], wire))
    assert "orjson>=3" in layer.runtime_dependencies()
    assert not any(d.startswith("memvault-") for d in layer.runtime_dependencies())
    assert layer.lock_inputs_hash() != before


def test_a_change_to_a_shipped_package_changes_the_layers_asset_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(layer.NO_BYTECODE_ENV, raising=False)
    before = layer.inputs_hash()
    wire = tmp_path / "memvault_wire"
    shutil.copytree(
        layer.SHIPPED["memvault_wire"], wire, ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setitem(layer.SHIPPED, "memvault_wire", wire)
    assert layer.inputs_hash() == before
    (wire / "errors.py").write_text((wire / "errors.py").read_text() + "\n# changed\n")
    assert layer.inputs_hash() != before


def test_the_lock_pins_every_dependency_with_its_files_hashes() -> None:
    pins = layer.locked()
    for requirement in layer.runtime_dependencies():
        assert _name(requirement) in pins, requirement
    for name in (*layer.PROVIDED, *layer.NEVER_IMPORTED, *layer.FUNCTION_ONLY):
        assert name in pins, f"{name} is named in infra/layer.py but not locked"
    for pin in pins.values():
        assert re.fullmatch(r"\d[\w.+!-]*", pin.version), pin
        assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), pin


def test_the_layer_and_the_functions_split_the_lock() -> None:
    pins = layer.locked()
    shared = {p.name for p in layer.layer_pins(pins)}
    assert not shared & {*layer.PROVIDED, *layer.NEVER_IMPORTED, *layer.FUNCTION_ONLY}
    for name in layer.HANDLERS:
        bundled = {p.name for p in layer.function_pins(name, pins)}
        assert bundled == ({*layer.FUNCTION_ONLY} if name in ("api", "direct") else set())
    assert shared | {*layer.PROVIDED, *layer.NEVER_IMPORTED, *layer.FUNCTION_ONLY} == set(pins)


def test_a_source_only_build_is_refused_under_ci_and_hashed_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(layer.NO_BYTECODE_ENV, raising=False)
    with_bytecode = layer.inputs_hash()
    monkeypatch.setenv(layer.NO_BYTECODE_ENV, "1")
    monkeypatch.delenv("CI", raising=False)
    assert layer.inputs_hash() != with_bytecode
    assert layer.function_hash("api") != layer.function_hash("authorizer")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(RuntimeError, match="refused under CI"):
        layer.inputs_hash()


# -- what the source imports ---------------------------------------------------------------


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Each module ``path`` imports, and whether the import sits inside a function."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((a.name, inside) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, inside))
            visit(child, inside)

    visit(tree, False)
    return found


def _runtime_modules() -> list[Path]:
    return [p for folder in layer.SHIPPED.values() for p in sorted(folder.rglob("*.py"))]


def test_no_runtime_module_imports_what_the_layer_leaves_out() -> None:
    for path in _runtime_modules():
        for module, _ in _imports(path):
            top = module.split(".")[0]
            assert top not in NEVER_IMPORTED_MODULES, (path, module)
            assert top not in CLIENT_ONLY, (path, module)


def test_what_only_api_and_direct_ship_is_imported_on_first_use_only() -> None:
    """The other functions import these modules too (the services, the policy): an import
    of libphonenumber or bpe-openai at module level would fail their cold start."""
    for path in _runtime_modules():
        for module, in_function in _imports(path):
            if module.split(".")[0] in layer.FUNCTION_ONLY_MODULES:
                assert in_function, (path, module)


def test_no_runtime_module_imports_what_is_pruned_from_a_distribution() -> None:
    pruned = {
        part.removesuffix(".py").replace("/", ".")
        for parts, _ in layer.PRUNED.values()
        for part in parts
        if not part.endswith(".pyi")
    }
    for path in _runtime_modules():
        for module, _ in _imports(path):
            assert not module.startswith(tuple(pruned)), (path, module)
    twin = _twin()
    for name in ("api", "direct"):
        for parts, _ in layer.PRUNED.values():
            assert not [p for p in parts if (twin.task(name) / p).exists()], name


def test_opensearch_py_never_imports_its_protobufs() -> None:
    """opensearch-py 3.x requires opensearch-protobufs (and so grpcio and protobuf); its
    client imports none of them, which is why the layer can leave them out."""
    twin = _twin()
    sources = (twin.opt / "python" / "opensearchpy").rglob("*.py")
    offenders = [
        p
        for p in sources
        if re.search(r"^\s*(import|from)\s+(grpc|google|opensearch\b)", p.read_text(), re.M)
    ]
    assert not offenders


# -- the host twin: every handler imported and invoked -------------------------------------


_TWIN: list[layer.HostTwin] = []


def _twin() -> layer.HostTwin:
    if not _TWIN:
        _TWIN.append(layer.build_host_twin())
    return _TWIN[0]


def test_the_host_twin_holds_the_locked_versions_less_what_the_layer_leaves_out() -> None:
    twin = _twin()
    pins = layer.locked()

    def installed(site: Path) -> dict[str, str]:
        found = {}
        for info in site.glob("*.dist-info"):
            name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
        return found

    shared = installed(twin.opt / "python")
    assert set(shared) == {p.name for p in layer.layer_pins(pins)}
    for name, version in shared.items():
        if name not in twin.fallbacks:
            assert version == pins[name].version, name
    assert set(installed(twin.task("api"))) == set(layer.FUNCTION_ONLY)
    assert not installed(twin.task("indexer"))
    present = {p.name for p in (twin.opt / "python").iterdir()}
    assert not present & NEVER_IMPORTED_MODULES
    assert not present & set(layer.FUNCTION_ONLY_MODULES)
    _holds_no_client_code(twin.opt / "python")
    assert not layer.missing_bytecode(twin.opt / "python", sys.implementation.cache_tag)


@pytest.mark.parametrize("name", layer.HANDLERS)
def test_each_handler_imports_and_answers_from_the_host_twin(name: str) -> None:
    """Imported in a fresh interpreter isolated from this environment (``-I -S``: only the
    twin's layer, the function's code and boto3 are importable, so grpc, protobuf, httpx
    and PyYAML are absent), then invoked with events that need no AWS."""
    twin = _twin()
    report: dict[str, Any] = layer.invoke(
        [sys.executable],
        name,
        opt=twin.opt,
        task=twin.task(name),
        runtime=twin.runtime,
        events=layer.rehearsal_events()[name],
        probe=layer.rehearsal_probes().get(name),
    )
    assert layer.rehearsal_problems(name, report) == [], json.dumps(report, indent=2)


# -- the assets the CDK app deploys ----------------------------------------------------------


def _asset(synth: Synth, code: dict[str, Any]) -> Path:
    key = code.get("S3Key")
    assert isinstance(key, str), code
    folder = synth.outdir / f"asset.{key.removesuffix('.zip')}"
    assert folder.is_dir(), folder
    return folder


def _assets(synth: Synth) -> tuple[Path, dict[str, Path]]:
    (layer_version,) = synth.resources("AWS::Lambda::LayerVersion").values()
    shared = _asset(synth, layer_version["Properties"]["Content"])
    functions = {}
    for name in layer.HANDLERS:
        _, fn = function(synth, name.capitalize())
        functions[name] = _asset(synth, fn["Properties"]["Code"])
    return shared, functions


def _holds_no_client_code(site: Path) -> None:
    present = {p.name.split("-")[0].lower() for p in site.iterdir()}
    assert {"memvault", "memvault_wire"} <= present, sorted(present)
    assert not present & CLIENT_ONLY, sorted(present & CLIENT_ONLY)
    shipped = site / "memvault"
    assert not [p for p in ("client", "mcp", "langgraph") if (shipped / p).exists()]
    # No module of the layer imports the client packages, even lazily.
    assert not [
        (p, module)
        for p in site.glob("memvault*/**/*.py")
        for module, _ in _imports(p)
        if module.split(".")[0] in CLIENT_ONLY
    ]


def test_the_layer_ships_no_client_code_grpc_protobuf_httpx_or_yaml(silo: Synth) -> None:
    """The SDK, the MCP server and the LangGraph adapters are packaged apart
    (clients/python/); the layer holds the server and the wire models only."""
    shared, functions = _assets(silo)
    site = shared / "python"
    _holds_no_client_code(site)
    present = {p.name.split("-")[0].lower() for p in site.iterdir()}
    assert not present & NEVER_IMPORTED_MODULES
    assert not list(site.glob("grpc*")) and not list(site.glob("*protobuf*"))
    assert not present & set(layer.FUNCTION_ONLY_MODULES)
    for name, folder in functions.items():
        bundled = {p.name for p in folder.iterdir()} & set(layer.FUNCTION_ONLY_MODULES)
        assert bundled == (set(layer.FUNCTION_ONLY_MODULES) if name in ("api", "direct") else set())


def test_every_module_ships_cpython_314_bytecode_unchecked(silo: Synth) -> None:
    if layer.bytecode_waived():
        pytest.skip(f"{layer.NO_BYTECODE_ENV} is set: this build ships source only")
    shared, functions = _assets(silo)
    for tree in (shared / "python", *functions.values()):
        assert not layer.missing_bytecode(tree, "cpython-314"), tree
        for pyc in list(tree.rglob("*.cpython-314.pyc"))[:200]:
            header = pyc.read_bytes()[:8]
            assert int.from_bytes(header[:2], "little") == layer.PYC_MAGIC_314, pyc
            # PEP 552 flags: hash-based (bit 0), source not checked (bit 1 clear).
            assert int.from_bytes(header[4:8], "little") == 0b01, pyc
    assert not list(shared.rglob("*.cpython-311.pyc"))


def test_each_function_with_its_layer_fits_lambdas_limit(silo: Synth) -> None:
    shared, functions = _assets(silo)
    layer_bytes = layer.tree_bytes(shared)
    assert layer_bytes < LAMBDA_UNZIPPED_LIMIT
    for name, folder in functions.items():
        assert layer_bytes + layer.tree_bytes(folder) < LAMBDA_UNZIPPED_LIMIT, name
