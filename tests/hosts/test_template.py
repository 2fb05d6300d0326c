"""template.yaml, validated offline: cfn-lint, the SAM transform, cfn-lint on what it produces.

What CloudFormation does with the transformed template for given parameters (its Rules, Conditions
and Fn::If) is played out by `deployed` and `refusals`, so each AuthMode is checked as it would run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cfnlint")
pytest.importorskip("samtranslator")

import cfnlint.api as cfnlint_api
from samtranslator.parser.parser import Parser
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from tests.support.servers import ROOT

TEMPLATE = ROOT / "template.yaml"


class NoManagedPolicies:
    """The transform looks managed policies up in IAM only for names it is given; there are none."""

    def load(self) -> dict[str, str]:
        raise AssertionError("template.yaml names no managed policy; the transform must not need IAM")


def lint(text: str, *, informational: bool = True) -> list[str]:
    checks = ["I"] if informational else []
    config = cfnlint_api.ManualArgs(regions=["us-east-1", "eu-west-1"], include_checks=checks)
    return [str(match) for match in cfnlint_api.lint(text, config=config)]


def translate(parameters: dict[str, str]) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the transform asks boto3 for the partition
        template = yaml_parse(TEMPLATE.read_text())
        # What `sam package` does before the transform runs in AWS: the built code goes to S3.
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::Serverless::Function":
                resource["Properties"]["CodeUri"] = "s3://oip-asgi-artifacts/OIPFunction.zip"
        output: dict[str, Any] = transform(template, parameters, NoManagedPolicies())  # type: ignore[arg-type]
    return output


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    return translate({"FunctionUrlAuthType": "NONE"})


_NO_VALUE = object()


class Evaluation:
    """CloudFormation's reading of `template` under `parameters` (the rest from the defaults)."""

    def __init__(self, template: dict[str, Any], parameters: dict[str, str]) -> None:
        self.template = template
        self.parameters: dict[str, Any] = {}
        for name, declaration in template["Parameters"].items():
            value = parameters.get(name, declaration.get("Default"))
            assert value is not None, f"parameter {name} has no value"
            if declaration.get("AllowedValues"):
                assert value in declaration["AllowedValues"], f"{name}={value} is not allowed"
            is_list = declaration["Type"] == "CommaDelimitedList"
            self.parameters[name] = str(value).split(",") if is_list else value
        self.conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            self.conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self.conditions[name]

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in map(self.value, node) if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Ref" and argument == "AWS::NoValue":
                return _NO_VALUE
            if function == "Ref" and argument in self.parameters:
                return self.parameters[argument]
            if function == "Condition":
                return self.condition(argument)
            if function == "Fn::If":
                name, if_true, if_false = argument
                return self.value(if_true if self.condition(name) else if_false)
            if function == "Fn::Equals":
                left, right = self.value(argument)
                return left == right
            if function == "Fn::Not":
                return not self.value(argument[0])
            if function == "Fn::And":
                return all(self.value(argument))
            if function == "Fn::Or":
                return any(self.value(argument))
            if function == "Fn::Contains":
                items, item = self.value(argument)
                return item in items
        return {key: value for key, value in ((k, self.value(v)) for k, v in node.items()) if value is not _NO_VALUE}


def deployed(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """The resources CloudFormation would create, with conditions and parameters resolved."""
    evaluation = Evaluation(template, parameters)
    kept = {
        name: {key: value for key, value in resource.items() if key != "Condition"}
        for name, resource in template["Resources"].items()
        if "Condition" not in resource or evaluation.condition(resource["Condition"])
    }
    return {"Resources": evaluation.value(kept)}


def refusals(template: dict[str, Any], parameters: dict[str, str]) -> list[str]:
    """What CloudFormation's Rules say against `parameters`, before it creates anything."""
    evaluation = Evaluation(template, parameters)
    refused = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not evaluation.value(rule["RuleCondition"]):
            continue
        refused += [
            assertion["AssertDescription"]
            for assertion in rule["Assertions"]
            if not evaluation.value(assertion["Assert"])
        ]
    return refused


ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE"
AUTH_MODES = {
    "NONE": {"AuthMode": "NONE"},
    "AWS_IAM": {"AuthMode": "AWS_IAM", "FunctionUrlAuthType": "AWS_IAM"},
    "JWT": {
        "AuthMode": "JWT",
        "JwtIssuer": ISSUER,
        "JwtAudience": "client-a,client-b",
        "FunctionUrlAuthType": "AWS_IAM",
    },
}


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource for name, resource in template["Resources"].items() if resource["Type"] == kind}


def test_template_lints_clean() -> None:
    assert lint(TEMPLATE.read_text()) == []


def test_transformed_template_lints_clean(transformed: dict[str, Any]) -> None:
    # Errors and warnings only: the transform itself writes the partition into ARNs (I3042).
    assert lint(json.dumps(transformed), informational=False) == []


def test_lint_would_catch_a_broken_template() -> None:
    broken = TEMPLATE.read_text().replace("Runtime: python3.12", "Runtime: python2.7")
    assert any("python2.7" in problem for problem in lint(broken))


def test_function(transformed: dict[str, Any]) -> None:
    (function,) = resources(transformed, "AWS::Lambda::Function").values()
    properties = function["Properties"]
    runtime = re.fullmatch(r"python3\.(\d+)", properties["Runtime"])
    assert runtime and int(runtime.group(1)) >= 12
    assert properties["Handler"] == "examples.lambda_handler.handler"
    assert properties["MemorySize"] == {"Ref": "MemorySize"}
    assert transformed["Parameters"]["MemorySize"]["Default"] >= 512  # numpy needs room; CPU follows memory
    assert 10 <= properties["Timeout"] <= 30
    assert properties["Code"] == {"S3Bucket": "oip-asgi-artifacts", "S3Key": "OIPFunction.zip"}


def test_http_api_catch_all_route(transformed: dict[str, Any]) -> None:
    (api,) = resources(transformed, "AWS::ApiGatewayV2::Api").values()
    paths = api["Properties"]["Body"]["paths"]
    assert list(paths) == ["/{proxy+}"]
    assert list(paths["/{proxy+}"]) == ["x-amazon-apigateway-any-method"]
    integration = paths["/{proxy+}"]["x-amazon-apigateway-any-method"]["x-amazon-apigateway-integration"]
    assert integration["payloadFormatVersion"] == "2.0"


def test_rest_api_takes_every_media_type_as_binary(transformed: dict[str, Any]) -> None:
    (api,) = resources(transformed, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["BinaryMediaTypes"] == ["*~1*"]
    assert list(api["Properties"]["Body"]["paths"]) == ["/{proxy+}"]
    (stage,) = resources(transformed, "AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["StageName"] == "Prod"


def test_function_url_is_optional_and_public_only_on_request(transformed: dict[str, Any]) -> None:
    (url,) = resources(transformed, "AWS::Lambda::Url").values()
    assert url["Condition"] == "HasFunctionUrl"
    conditions = transformed["Conditions"]
    assert conditions["HasFunctionUrl"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "OFF"]}]}
    assert transformed["Parameters"]["FunctionUrlAuthType"]["Default"] == "OFF"
    public = {name: r for name, r in resources(transformed, "AWS::Lambda::Permission").items() if "FunctionUrl" in name}
    assert {r["Condition"] for r in public.values()} == {"PublicFunctionUrl"}
    assert {r["Properties"]["Action"] for r in public.values()} == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}


def test_build_is_the_makefile_target_and_points_at_the_example_handler() -> None:
    template = yaml_parse(TEMPLATE.read_text())
    Parser.validate_datatypes(template)
    functions = {name: r for name, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    (name, function) = next(iter(functions.items()))
    assert function["Metadata"]["BuildMethod"] == "makefile"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^build-{name}:", makefile, re.MULTILINE)
    assert "manylinux" in makefile and "--only-binary=:all:" in makefile
    module, attribute = function["Properties"]["Handler"].rsplit(".", 1)
    assert f"{module.replace('.', '/')}.py" in makefile  # the build ships the handler's file

    import oip_asgi_lambda

    handler = getattr(__import__(module, fromlist=[attribute]), attribute)
    assert isinstance(handler, oip_asgi_lambda.OIPHandler)


# Stands in for Python under `make`: logs each pip command and makes the wheel the next one installs.
FAKE_PYTHON = """
import json, os, pathlib, sys

with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:4] == ["-m", "pip", "wheel"]:
    wheels = pathlib.Path(sys.argv[sys.argv.index("--wheel-dir") + 1])
    wheels.mkdir(parents=True)
    (wheels / "oip_asgi-0.1.0-py3-none-any.whl").touch()
"""


def make_build(tmp_path: Path, *variables: str) -> tuple[list[list[str]], Path]:
    """Run the build target offline, pip faked: pip's argument lists, and the artifact directory."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed: the Lambda build target (SAM's makefile builder) runs through it")
    python, log, artifact = tmp_path / "python", tmp_path / "pip.log", tmp_path / "artifact"
    python.write_text(f"#!{sys.executable}\n{FAKE_PYTHON}")
    python.chmod(0o755)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    command = ["make", "--no-print-directory", "-C", str(ROOT), "build-OIPFunction", f"PYTHON={python}"]
    command += [f"ARTIFACTS_DIR={artifact}", f"WHEELS={tmp_path / 'wheels'}", *variables]
    subprocess.run(command, env={**environment, "FAKE_PIP_LOG": str(log)}, check=True, capture_output=True, timeout=60)
    return [json.loads(line) for line in log.read_text().splitlines()], artifact


@pytest.mark.slow
def test_makefile_ships_the_example_and_installs_for_lambda(tmp_path: Path) -> None:
    absent = tmp_path / "requirements-lambda.txt"
    (wheel, install), artifact = make_build(tmp_path, f"LAMBDA_REQUIREMENTS={absent}")
    assert wheel[:3] == ["-m", "pip", "wheel"]
    assert install[:3] == ["-m", "pip", "install"]
    assert install[-1] == f"{tmp_path / 'wheels'}/oip_asgi-0.1.0-py3-none-any.whl[lambda]"
    for flag in ["--only-binary=:all:", "manylinux2014_x86_64", "3.12"]:
        assert flag in install
    shipped = sorted(str(path.relative_to(artifact)) for path in artifact.rglob("*.py"))
    assert shipped == ["examples/__init__.py", "examples/lambda_handler.py", "examples/models.py"]


@pytest.mark.slow
def test_makefile_takes_your_own_sources_and_requirements(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements-lambda.txt"
    requirements.write_text("msgpack\n")
    sources = "LAMBDA_SOURCES=examples/models.py adapters/oip_asgi_lambda"
    (_, install), artifact = make_build(tmp_path, f"LAMBDA_REQUIREMENTS={requirements}", sources)
    # One pip run for oip-asgi and your requirements: one resolution, the same wheels-for-Lambda flags.
    assert install[-3].endswith("[lambda]")
    assert install[-2:] == ["--requirement", str(requirements)]
    assert "--only-binary=:all:" in install
    assert (artifact / "examples" / "models.py").is_file()
    assert (artifact / "adapters" / "oip_asgi_lambda" / "_handler.py").is_file()
    assert not (artifact / "examples" / "lambda_handler.py").exists()


def _any_method(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (api,) = resources(template, kind).values()
    method: dict[str, Any] = api["Properties"]["Body"]["paths"]["/{proxy+}"]["x-amazon-apigateway-any-method"]
    return method


def _security_schemes(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (api,) = resources(template, kind).values()
    body = api["Properties"]["Body"]
    schemes: dict[str, Any] = (
        body["components"]["securitySchemes"] if "components" in body else body["securityDefinitions"]
    )
    return schemes


def test_apis_are_public_by_default() -> None:
    parameters = translate({})["Parameters"]
    assert parameters["AuthMode"]["Default"] == "NONE"
    assert parameters["FunctionUrlAuthType"]["Default"] == "OFF"


@pytest.mark.parametrize("mode", AUTH_MODES)
def test_each_auth_mode_transforms_and_lints_clean(mode: str) -> None:
    output = translate(AUTH_MODES[mode])
    assert refusals(output, AUTH_MODES[mode]) == []
    assert lint(json.dumps(output), informational=False) == []
    # Every resource CloudFormation would create is still a well-formed template on its own.
    assert lint(json.dumps({"Resources": deployed(output, AUTH_MODES[mode])["Resources"]}), informational=False) == []


@pytest.mark.parametrize(
    ("mode", "http_api", "rest_api", "function_url"),
    [
        ("NONE", [], [], "NONE"),
        ("AWS_IAM", [{"AWS_IAM": []}], [{"AWS_IAM": []}], "AWS_IAM"),
        # JWT is no REST API authorizer type: that API then takes IAM-signed callers only, never anyone.
        ("JWT", [{"Jwt": []}], [{"AWS_IAM": []}], "AWS_IAM"),
    ],
)
def test_auth_mode_reaches_every_entrance(
    mode: str, http_api: list[dict[str, list[str]]], rest_api: list[dict[str, list[str]]], function_url: str
) -> None:
    parameters = {"FunctionUrlAuthType": "NONE", **AUTH_MODES[mode]}
    template = deployed(translate(parameters), parameters)

    http_method = _any_method(template, "AWS::ApiGatewayV2::Api")
    assert http_method["security"] == http_api
    assert http_method["x-amazon-apigateway-integration"]["payloadFormatVersion"] == "2.0"
    rest_method = _any_method(template, "AWS::ApiGateway::RestApi")
    assert rest_method["security"] == rest_api
    assert rest_method["x-amazon-apigateway-integration"]["type"] == "aws_proxy"
    assert "${OIPFunction.Arn}" in rest_method["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    # Every scheme a method names is defined; IAM means SigV4.
    for api, security in [("AWS::ApiGatewayV2::Api", http_api), ("AWS::ApiGateway::RestApi", rest_api)]:
        schemes = _security_schemes(template, api)
        for (name,) in security:
            assert name in schemes
            if name == "AWS_IAM":
                assert schemes[name]["x-amazon-apigateway-authtype"] == "awsSigv4"
    (url,) = resources(template, "AWS::Lambda::Url").values()
    assert url["Properties"]["AuthType"] == function_url
    public = resources(template, "AWS::Lambda::Permission")
    assert any(p["Properties"].get("FunctionUrlAuthType") == "NONE" for p in public.values()) == (mode == "NONE")


def test_jwt_mode_checks_the_issuer_and_audience_given() -> None:
    template = deployed(translate(AUTH_MODES["JWT"]), AUTH_MODES["JWT"])
    scheme = _security_schemes(template, "AWS::ApiGatewayV2::Api")["Jwt"]
    authorizer = scheme["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "jwt"
    assert authorizer["identitySource"] == "$request.header.Authorization"
    assert authorizer["jwtConfiguration"] == {"issuer": ISSUER, "audience": ["client-a", "client-b"]}


def test_no_jwt_authorizer_outside_jwt_mode() -> None:
    for mode in ["NONE", "AWS_IAM"]:
        template = deployed(translate(AUTH_MODES[mode]), AUTH_MODES[mode])
        assert "Jwt" not in _security_schemes(template, "AWS::ApiGatewayV2::Api")


def test_rest_api_redeploys_on_every_update() -> None:
    # The security conditions leave the definition's text alone, so SAM's hash alone would keep the
    # old deployment (and the old authorisation) on Prod after AuthMode changes.
    template = yaml_parse(TEMPLATE.read_text())
    assert template["Resources"]["RestApi"]["Properties"]["AlwaysDeploy"] is True


@pytest.mark.parametrize(
    ("parameters", "refused"),
    [
        ({"AuthMode": "JWT"}, ["JwtIssuer", "JwtAudience"]),
        ({"AuthMode": "JWT", "JwtIssuer": ISSUER}, ["JwtAudience"]),
        ({"AuthMode": "JWT", "JwtIssuer": ISSUER, "JwtAudience": "a,"}, ["JwtAudience"]),
        ({"AuthMode": "AWS_IAM", "FunctionUrlAuthType": "NONE"}, ["public Function URL"]),
        ({**AUTH_MODES["JWT"], "FunctionUrlAuthType": "NONE"}, ["public Function URL"]),
        ({"AuthMode": "NONE", "FunctionUrlAuthType": "NONE"}, []),
        ({"AuthMode": "AWS_IAM", "FunctionUrlAuthType": "OFF"}, []),
    ],
    ids=["jwt-bare", "jwt-no-audience", "jwt-empty-audience", "iam-public-url", "jwt-public-url", "public", "iam"],
)
def test_rules_refuse_incoherent_parameters(parameters: dict[str, str], refused: list[str]) -> None:
    problems = refusals(translate(parameters), parameters)
    assert len(problems) == len(refused), problems
    for problem, words in zip(problems, refused, strict=True):
        assert words in problem


@pytest.mark.slow
def test_makefile_packs_a_model_repository_with_the_extras_it_needs(tmp_path: Path) -> None:
    absent = tmp_path / "requirements-lambda.txt"
    sources = "LAMBDA_SOURCES=examples/__init__.py examples/lambda_repository.py examples/repository"
    (_, install), artifact = make_build(
        tmp_path, f"LAMBDA_REQUIREMENTS={absent}", sources, "LAMBDA_EXTRAS=lambda,repository"
    )
    assert install[-1].endswith("oip_asgi-0.1.0-py3-none-any.whl[lambda,repository]")
    packed = sorted(str(path.relative_to(artifact)) for path in (artifact / "examples" / "repository").rglob("*"))
    expected = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "examples" / "repository").rglob("*")
        if "__pycache__" not in str(path)
    )
    assert [name for name in packed if "__pycache__" not in name] == expected
    assert (artifact / "examples" / "lambda_repository.py").is_file()
