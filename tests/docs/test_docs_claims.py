"""The docs' claims against the code, one kind of claim a test.

A sentence of a page that names an extension the server serves (or perf_analyzer, which bench/ runs)
must not also say it is not there. This caught docs/grpc.md and docs/model-configuration.md calling
the gRPC repository RPCs UNIMPLEMENTED, and docs/benchmarks.md saying perf_analyzer cannot run (issue 30).
Issue 35's kinds: the extras a page names exist, and the one it says an import needs brings it; where a
page says a name lives, it is there; Python models' instances; what Triton's BLS clients get; what
``oip-asgi --help`` says is served; the packages a page's recipes import, installed or named there. Issue 37's:
what docs/python-backend.md says of pb_utils is there, and what it says Triton's Python models do, they do.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from oip_asgi import ModelRepository, oip_app
from tests.support.servers import ROOT, child_env

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

# How the pages name each extension (Triton's names; the RPCs and paths that are the extension).
NAMES = {
    "binary_tensor_data": ["binary_tensor_data", "binary tensor"],
    "classification": ["classification"],
    "model_configuration": ["model_configuration", "model configuration", "ModelConfig RPC", "`ModelConfig`"],
    "statistics": ["statistics extension", "ModelStatistics", "/stats"],
    "model_repository": ["model_repository", "model repository extension", "RepositoryIndex", "RepositoryModelLoad"],
    "model_repository(unload_dependents)": ["unload_dependents"],
    "system_shared_memory": [
        "system_shared_memory",
        "system shared memory",
        "SystemSharedMemory",
        "systemsharedmemory",
    ],
    "logging": ["logging extension", "LogSettings", "/v2/logging", "log settings"],
    "trace": ["trace extension", "TraceSetting", "/trace/setting", "trace settings"],
    "perf_analyzer": ["perf_analyzer"],
}
ABSENT = re.compile(
    r"UNIMPLEMENTED|unserved|not supported|unsupported|not implemented|cannot run|can't run|not offered",
    re.IGNORECASE,
)


def sentences(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code is checked by running it
    parts = re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-|*] ", text)
    return [part.strip().removeprefix("- ") for part in parts if part.strip()]


def offered() -> list[str]:
    app = oip_app({}, model_repository=ModelRepository(ROOT / "examples" / "repository"))
    return [*app.core.server_metadata.extensions, "perf_analyzer"]


def test_every_extension_the_server_lists_has_names_here() -> None:
    assert set(offered()) <= set(NAMES)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_page_calls_what_the_server_offers_unsupported(page: Path) -> None:
    contradictions = [
        (extension, sentence)
        for sentence in sentences(page)
        if ABSENT.search(sentence)
        for extension in offered()
        if any(name.lower() in sentence.lower() for name in NAMES[extension])
    ]
    assert contradictions == []


def test_the_check_finds_a_contradiction(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Intro.\n\n- The RepositoryIndex RPC answers `UNIMPLEMENTED`, as every method without a handler.\n")
    assert [sentence for sentence in sentences(page) if ABSENT.search(sentence)] == [
        "The RepositoryIndex RPC answers `UNIMPLEMENTED`, as every method without a handler."
    ]


# -- Kinds of claim that disagreed with the code (issue 35) ---------------------------------------------------
# Each test checks one kind against what the code does: the extras a page names, the extra an import needs,
# where a name lives, how many instances a Python model gets, what a BLS client gets, what --help says.

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PYPROJECT["optional-dependencies"]
EXTRA_NAMED = re.compile(r"`(?P<one>[a-z0-9]+)` extras?\b|(?:\.|oip-asgi)\[(?P<several>[a-z0-9,]+)\]")


def named_extras(text: str) -> set[str]:
    found = set()
    for match in EXTRA_NAMED.finditer(text):
        found |= {match["one"]} if match["one"] else set(match["several"].split(","))
    return found


def distribution(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


def owner(module: str) -> str | None:
    """The distribution that installs `module` (of a namespace package such as google's, the one holding it)."""
    owners = importlib.metadata.packages_distributions().get(module.partition(".")[0], [])
    if len(owners) > 1:
        folder = "/".join(module.split(".")[:2]) + "/"
        owners = [name for name in owners if any(str(file).startswith(folder) for file in files(name))] or owners[:1]
    return canonicalize_name(owners[0]) if owners else None


def files(name: str) -> list[Any]:
    return list(importlib.metadata.files(name) or [])


def third_party(paths: list[Path]) -> set[str]:
    """The distributions that the modules in `paths` import (inside functions too)."""
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module)
    local = set(sys.stdlib_module_names) | {"__future__", "oip_asgi"}
    return {found for module in modules if module.partition(".")[0] not in local if (found := owner(module))}


def smallest_extra(needed: set[str]) -> str:
    """The extra with the fewest requirements that brings every distribution `needed`, beyond the base ones."""
    base = {distribution(requirement) for requirement in PYPROJECT["dependencies"]}
    bringing = [
        extra
        for extra, requirements in EXTRAS.items()
        if needed - base <= {distribution(requirement) for requirement in requirements}
    ]
    return min(bringing, key=lambda extra: len(EXTRAS[extra]))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_extra_a_page_names_is_one_the_project_has(page: Path) -> None:
    assert named_extras(page.read_text()) <= set(EXTRAS)


def test_the_check_finds_extras_in_prose_and_in_install_lines() -> None:
    text = "needs the `grpc` extra; `pip install -e '.[serve,onnx]'`, \"oip-asgi[lambda]\", `uvicorn[standard]`"
    assert named_extras(text) == {"grpc", "serve", "onnx", "lambda"}


def test_what_the_pages_say_reading_config_pbtxt_needs_is_the_extra_that_brings_its_imports() -> None:
    # What reads a config.pbtxt: the repository's config reader and the generated messages it parses into.
    readers = [ROOT / "oip_asgi" / "_declarations" / "repository" / "_config.py"]
    readers += sorted((ROOT / "oip_asgi" / "_protobuf").glob("*.py"))
    readers = [path for path in readers if path.name != "_generate.py"]  # the generator, run by hand
    needed = smallest_extra(third_party(readers))
    assert needed == "repository"  # protobuf alone: grpcio is not among the readers' imports
    claims = [
        (extras, sentence)
        for page in PAGES
        for sentence in sentences(page)
        if re.search(r"config\.pbtxt|ModelConfig", sentence) and "extra" in sentence
        for extras in [named_extras(sentence)]
        if extras and needed not in extras
    ]
    assert claims == []


LIVES_IN = re.compile(
    r"(?:`(?P<name>[\w.]+)`|(?P<bare>[A-Z]\w+))\s+(?:message\s+|class\s+|function\s+)?(?:now\s+)?lives\s+in\s+"
    r"`(?P<module>[\w.]+)`"
)


def test_where_a_page_says_a_name_lives_it_is_there() -> None:
    claims = [match for page in PAGES for match in LIVES_IN.finditer(page.read_text())]
    wrong = []
    for match in claims:
        module = importlib.import_module(match["module"])
        found: Any = module
        for part in (match["name"] or match["bare"]).split("."):
            found = getattr(found, part, None)
        if found is None:
            wrong.append(match[0])
    assert wrong == []
    # What the check is for: the generated ModelConfig message lives in the messages' package, not the gRPC one.
    assert claims  # docs/repository.md says where the ModelConfig message lives
    old = LIVES_IN.search("the generated ModelConfig message lives in\n`oip_asgi.grpc`, whose package imports grpcio")
    assert old is not None and getattr(importlib.import_module(old["module"]), old["bare"], None) is None


ONE_INSTANCE = re.compile(r"\b(?:one|a single|only one) instance\b(?! \(object\) per| per)", re.IGNORECASE)
PYTHON_MODELS = re.compile(r"Python models?\b|TritonPythonModel|Python backend", re.IGNORECASE)

GROUPED_MODEL = """
from pathlib import Path


class TritonPythonModel:
    def initialize(self, args):
        Path(args["model_repository"], args["model_instance_name"]).touch()

    def execute(self, requests):
        return []
"""


@pytest.mark.anyio
async def test_no_page_says_python_models_keep_to_one_instance_where_their_instance_group_is_served(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "grouped"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(GROUPED_MODEL)
    (folder / "config.pbtxt").write_text('backend: "python"\ninstance_group [{ count: 3, kind: KIND_CPU }]\n')
    app = oip_app(model_repository=ModelRepository(tmp_path))
    await app.load()
    assert sorted(path.name for path in folder.iterdir() if path.name.startswith("grouped_")) == [
        "grouped_0_0",
        "grouped_0_1",
        "grouped_0_2",
    ]  # three instances, each initialized
    await app.core.close()
    claims = [
        sentence
        for page in PAGES
        for sentence in sentences(page)
        if PYTHON_MODELS.search(sentence) and ONE_INSTANCE.search(sentence)
    ]
    assert claims == []
    # What the check is for: the sentence docs/repository.md's intro had.
    old = "its Python models keep to what is served of Triton's Python backend (CPU tensors, one instance: below)"
    assert PYTHON_MODELS.search(old) and ONE_INSTANCE.search(old)


ASYNC_BLS = '''
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Triton's bls example in its async form: add_sub and pytorch asked at once, one answer from both."""

    async def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, name) for name in ("INPUT0", "INPUT1")]
            pending = [
                pb_utils.InferenceRequest(
                    model_name=name, inputs=inputs, requested_output_names=["OUTPUT0"]
                ).async_exec()
                for name in ("add_sub", "pytorch")
            ]
            answers = await asyncio.gather(*pending)
            for answer in answers:
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=answers[0].output_tensors()))
        return responses
'''


@pytest.mark.anyio
async def test_what_triton_bls_clients_get_from_a_repository_without_pytorch_is_what_the_page_says(
    tmp_path: Path,
) -> None:
    import shutil

    import httpx

    models = ROOT / "examples" / "python_backend" / "models"
    for name in ("add_sub", "bls_sync"):
        shutil.copytree(models / name, tmp_path / name)
    (tmp_path / "bls_async" / "1").mkdir(parents=True)
    (tmp_path / "bls_async" / "1" / "model.py").write_text(ASYNC_BLS)
    shutil.copy(models / "bls_async" / "config.pbtxt", tmp_path / "bls_async" / "config.pbtxt")
    tensors = [{"name": name, "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]} for name in ("INPUT0", "INPUT1")]

    def named(model: str) -> dict[str, Any]:
        return {"name": "MODEL_NAME", "shape": [1], "datatype": "BYTES", "data": [model]}

    app = oip_app(model_repository=ModelRepository(tmp_path))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        # The sync client: one request per model; add_sub's is answered, pytorch's stops it.
        answered = await client.post("/models/bls_sync/infer", json={"inputs": [*tensors, named("add_sub")]})
        stopped = await client.post("/models/bls_sync/infer", json={"inputs": [*tensors, named("pytorch")]})
        # The async client: its only request asks both models, and fails with no add_sub answer.
        only = await client.post("/models/bls_async/infer", json={"inputs": tensors})
    await app.core.close()
    assert answered.status_code == 200 and stopped.status_code == 500 and "pytorch" in stopped.json()["error"]
    assert only.status_code == 500 and "outputs" not in only.json() and "pytorch" in only.json()["error"]
    page = ROOT / "docs" / "python-backend.md"
    said = [sentence for sentence in sentences(page) if "bls" in sentence and "pytorch" in sentence]
    assert said and not any(re.search(r"clients get their `add_sub` answers", sentence) for sentence in said)
    assert any("async one fails on its only request" in sentence and "no `add_sub`" in sentence for sentence in said)


def test_the_commands_help_names_every_wire_it_serves() -> None:
    from oip_asgi._hosts.cli import parser

    command = parser()
    serve = next(action for action in command._actions if isinstance(action, argparse._SubParsersAction)).choices[
        "serve"
    ]
    options = {option for action in serve._actions for option in action.option_strings}
    wires = {"REST": True, "gRPC": "--grpc-port" in options, "OpenAI": "--openai" in options}
    description = command.description or ""
    assert [wire for wire, served in wires.items() if served and wire not in description] == []
    assert "Triton REST)" not in description  # REST alone, as it said when the command served gRPC and /v1 too


# -- The packages a page's recipes use: brought by the extras it installs, or named where the recipe is --------


def brought(extras: set[str], others: frozenset[str] = frozenset()) -> set[str]:
    """What `pip install ".[extras]" *others` installs: the requirements' closure, read from what is installed."""
    wanted = [Requirement(text) for text in [*PYPROJECT["dependencies"], *others]]
    wanted += [Requirement(text) for extra in extras for text in EXTRAS[extra]]
    seen: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            inner = Requirement(text)
            markers = [{"extra": extra} for extra in ["", *requirement.extras]]
            if inner.marker is None or any(inner.marker.evaluate(marker) for marker in markers):
                wanted.append(Requirement(str(inner.name) + (f"[{','.join(inner.extras)}]" if inner.extras else "")))
    return seen


# Runs import statements where only the distributions allowed can be imported: a distribution that a module
# needs and that is not allowed fails its import (one imported only if present, as httpx imports brotli, is
# skipped as when not installed). Prints what failed. Warnings are not errors here: a deprecation is no failure.
IMPORTED = """
import importlib.abc, importlib.metadata, json, sys
from packaging.utils import canonicalize_name

statements, allowed = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
owners = importlib.metadata.packages_distributions()


def candidates(name):
    found = owners.get(name.partition(".")[0], [])
    if len(found) > 1 and "." in name:  # a namespace package (google): the distributions holding the subpackage
        folder = "/".join(name.split(".")[:2]) + "/"
        found = [d for d in found if any(str(f).startswith(folder) for f in importlib.metadata.files(d) or [])]
    return {canonicalize_name(d) for d in found}


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        found = candidates(name)
        if found and not found & allowed:
            raise ModuleNotFoundError(f"No module named {name!r} ({', '.join(sorted(found))} not installed)", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
failed = []
for statement in statements:
    try:
        exec(statement, {})
    except Exception as exc:  # ImportError, or the RuntimeError of a package that says what to install
        failed.append(f"{statement}: {type(exc).__name__}: {exc}")
print(json.dumps(failed))
"""


def failing_imports(statements: list[str], allowed: set[str], path: list[Path]) -> list[str]:
    env = {**child_env(), "PYTHONPATH": os.pathsep.join(map(str, path))}
    probe = [
        sys.executable,
        "-W",
        "ignore",
        "-c",
        IMPORTED,
        json.dumps(statements),
        json.dumps(sorted(allowed | {"oip-asgi"})),
    ]
    failed: list[str] = json.loads(subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout)
    return failed


@pytest.mark.slow
def test_the_python_backend_pages_recipes_use_only_what_its_install_line_brings_or_it_names() -> None:
    page = ROOT / "docs" / "python-backend.md"
    text = page.read_text()
    (install,) = re.findall(r"<!-- recipe: install -->\n```sh\n(.*?)```", text, re.DOTALL)
    installed = brought(named_extras(install))
    named = {
        canonicalize_name(word)
        for line in re.findall(r"pip install ([^`\n]+)", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
        for word in line.split()
        if not word.startswith(("-", ".", "'", '"'))
    }
    clients = sorted((ROOT / "examples" / "python_backend" / "clients").glob("*.py"))
    (pytest_recipe,) = re.findall(r"<!-- recipe: pytest -->\n```python\n(.*?)```", text, re.DOTALL)
    sources = [path.read_text() for path in clients] + [pytest_recipe]
    statements = [
        ast.unparse(node)
        for source in sources
        for node in ast.parse(source).body
        if isinstance(node, ast.Import)
        or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "_addresses")
    ]
    path = [ROOT, clients[0].parent]
    assert failing_imports(statements, installed | named, path) == []
    # The check finds what is missing: without the packages the page names, Starlette's TestClient cannot import.
    assert [line for line in failing_imports(statements, installed, path) if "starlette.testclient" in line]
    assert "pytest" in named - installed  # the pytest recipe is a test, which pytest runs; no extra brings it
    assert "requests" in named  # Triton's own custom_metrics client's, which this repository does not hold


# -- A walk through issue 35's four pages on a fresh clone: each says what to install for what it runs ---------

WALKED = ["streaming.md", "openai.md", "python-backend.md", "repository.md"]
CODE = re.compile(r"```(?P<kind>\w*)\n(?P<code>.*?)```", re.DOTALL)
LOCAL = {"mymodels", "_addresses"}  # what a page has you save as a file, and the examples' clients' helper


def pip_installed(text: str) -> tuple[set[str], set[str]]:
    """What a page's `pip install` lines bring: the extras they name, and every distribution they install."""
    lines = [re.split(r"\s(?:&&|;|\|)", line)[0] for line in re.findall(r"pip install ([^`\n]+)", text)]
    extras = set().union(*(named_extras(line) for line in lines))
    plain = {word for line in lines for word in line.split() if not word.startswith(("-", ".", "'", '"', "/", "$"))}
    return extras, brought(extras, frozenset(plain))


def option_extras() -> dict[str, str]:
    """The extra each option of `oip-asgi serve` needs, as the command says when it is missing ("" for the command)."""
    source = (ROOT / "oip_asgi" / "_hosts" / "cli" / "command.py").read_text()
    needs = dict(re.findall(r"_error\(f\"(--[a-z-]+) needs .*?install_line\('(\w+)'\)", source))
    (needs[""],) = re.findall(r"serving needs uvicorn: \{install_line\('(\w+)'\)", source)
    return needs


def test_the_check_reads_what_each_option_of_the_serve_command_needs() -> None:
    assert option_extras() == {"": "serve", "--grpc-port": "grpc", "--metrics-port": "metrics", "--openai": "openai"}


@pytest.mark.parametrize("name", WALKED)
def test_a_walked_page_installs_what_its_serve_commands_need(name: str) -> None:
    text = (ROOT / "docs" / name).read_text()
    extras, _ = pip_installed(text)
    needs = option_extras()
    commands = [
        line.split()
        for block in CODE.finditer(text)
        if block["kind"] in ("sh", "bash")
        for line in block["code"].splitlines()
        if line.startswith("oip-asgi serve")
    ]
    assert commands
    assert {needs[option] for command in commands for option in ["", *command] if option in needs} - extras == set()


@pytest.mark.slow
@pytest.mark.parametrize("name", WALKED)
def test_a_walked_pages_python_imports_only_what_it_installs(name: str) -> None:
    text = (ROOT / "docs" / name).read_text()
    _, installed = pip_installed(text)
    statements = [
        ast.unparse(node)
        for block in CODE.finditer(text)
        if block["kind"] == "python"
        for node in ast.parse(block["code"]).body
        if (isinstance(node, ast.Import) and not {alias.name for alias in node.names} & LOCAL)
        or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in LOCAL)
    ]
    assert statements
    assert failing_imports(statements, installed, [ROOT, ROOT / "adapters"]) == []


@pytest.mark.slow
def test_the_python_backend_pages_pytest_recipe_runs_in_a_clone_with_the_plugins_it_names(tmp_path: Path) -> None:
    # The recipe saved in a clone runs under the clone's pytest settings (--strict-config): an option of theirs
    # that a plugin the page does not name brings stops pytest before the test. Only the named plugins load here.
    text = (ROOT / "docs" / "python-backend.md").read_text()
    (recipe,) = re.findall(r"<!-- recipe: pytest -->\n```python\n(.*?)```", text, re.DOTALL)
    (tmp_path / "test_add_sub.py").write_text(recipe)
    _, installed = pip_installed(re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    plugins = [
        entry.module
        for entry in importlib.metadata.entry_points(group="pytest11")
        if entry.dist is not None and canonicalize_name(entry.dist.name) in installed
    ]
    assert plugins
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
    command += [argument for plugin in plugins for argument in ("-p", plugin)]
    env = {**child_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run([*command, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_architecture_page_names_every_module_of_the_package() -> None:
    # A module a contributor cannot find on the page that lays the package out is a job without a home there.
    page = (ROOT / "docs" / "architecture.md").read_text()
    generated = ("inference_pb2.py", "inference_pb2_grpc.py")
    modules = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "oip_asgi").rglob("*.py")
        if path.name != "__init__.py" and path.name not in generated
    )
    assert modules and [module for module in modules if Path(module).name not in page] == []


# Issue 37's kinds: what docs/python-backend.md says is served of pb_utils is there; what it says Triton's Python
# models do here (their helpers, an async execute's BLS, a decoupled model's overlapping executes) they do; and
# no page says what it said before (a blocking BLS call refused in an async execute, decoupled executes in turn).
BACKEND_PAGE = ROOT / "docs" / "python-backend.md"


def section(page: Path, title: str) -> str:
    text = page.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_name_the_python_backend_page_says_is_served_is_pb_utils_or_its_objects() -> None:
    from oip_asgi._declarations.python_backend import utils as pb_utils

    served = section(BACKEND_PAGE, "What of `pb_utils` is served").split("\n\n")[1]  # the list of names
    names = {re.match(r"[A-Za-z_][\w.]*", token).group(0) for token in re.findall(r"`([^`]+)`", served)}  # type: ignore[union-attr]
    owners = [pb_utils, pb_utils.Tensor, pb_utils.InferenceRequest, pb_utils.InferenceResponse, pb_utils.TritonError,
              pb_utils.InferenceResponseSender, pb_utils.MetricFamily, pb_utils.Metric,
              pb_utils.ModelConfig]  # fmt: skip
    # exec(decoupled=True), send(response, flags=...), and the model's own auto_complete_config
    keywords = {"decoupled", "send", "flags", "auto_complete_config"}
    missing = sorted(
        name for name in names if name not in keywords and not any(hasattr(owner, name) for owner in owners)
    )
    assert len(names) > 40 and missing == []


BLOCKING_BLS_REFUSED = re.compile(r"(?:exec\(\)|BLS).*(?:would (?:stop|block)|raises an error|refus)", re.IGNORECASE)
IN_TURN = re.compile(r"decoupled.*async.*(?:one at a time|serializ|in turn)|(?:one at a time|serializ).*decoupled")


@pytest.mark.anyio
async def test_what_the_python_backend_page_says_triton_models_do_they_do(tmp_path: Path) -> None:
    import asyncio

    import httpx

    from tests.support.triton_models import write_repository

    root = write_repository(tmp_path, ["imports_a", "overlap", "double", "count", "count_final", "bls_from_async"])
    app = oip_app(model_repository=ModelRepository(root))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        await app.load()
        x = {"inputs": [{"name": "X", "datatype": "INT32", "shape": [1], "data": [2]}]}
        bls = await client.post("/models/bls_from_async/infer", json=x)  # sync BLS from an async execute
        one = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [1]}]}
        helpers = await client.post("/models/imports_a/infer", json=one)
        overlapped = await asyncio.gather(
            *(client.post("/models/overlap/generate", json={"ROUND": 0, "KEY": key}) for key in range(4))
        )  # each execute waits for all four: run in turn, they would fail
    module = "oip_asgi_repository.imports_a.1.model_common"
    loaded = module in sys.modules
    await app.core.close()
    assert bls.status_code == 200 and helpers.status_code == 200, (bls.text, helpers.text)
    assert [answer.status_code for answer in overlapped] == [200] * 4
    assert loaded and "model_common" not in sys.modules
    differences = section(BACKEND_PAGE, "Differences that remain")
    assert "oip_asgi_repository.<model>.<version>.model_common" in differences
    assert "overlap" in section(BACKEND_PAGE, "Instances")
    said = [
        sentence
        for page in PAGES
        for sentence in sentences(page)
        if ("async def execute" in sentence and BLOCKING_BLS_REFUSED.search(sentence)) or IN_TURN.search(sentence)
    ]
    assert said == []
    # What the check is for: the sentence the page had.
    old = (
        "Inside an `async def execute`, use the async forms (`await request.async_exec()`): a blocking `exec()` "
        "there would stop the event loop every other request runs on, so it raises an error saying so."
    )
    assert BLOCKING_BLS_REFUSED.search(old)
