"""template.yaml, validated offline: cfn-lint, the SAM transform, cfn-lint on what it produces."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("cfnlint")
pytest.importorskip("samtranslator")

import cfnlint.api as cfnlint_api
from samtranslator.parser.parser import Parser
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from ._servers import ROOT

TEMPLATE = ROOT / "template.yaml"


class NoManagedPolicies:
    """The transform looks managed policies up in IAM only for names it is given; there are none."""

    def load(self) -> dict[str, str]:
        raise AssertionError("template.yaml names no managed policy; the transform must not need IAM")


def lint(text: str, *, informational: bool = True) -> list[str]:
    checks = ["I"] if informational else []
    config = cfnlint_api.ManualArgs(regions=["us-east-1", "eu-west-1"], include_checks=checks)
    return [str(match) for match in cfnlint_api.lint(text, config=config)]


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the transform asks boto3 for the partition
        template = yaml_parse(TEMPLATE.read_text())
        # What `sam package` does before the transform runs in AWS: the built code goes to S3.
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::Serverless::Function":
                resource["Properties"]["CodeUri"] = "s3://oip-asgi-artifacts/OIPFunction.zip"
        output = transform(template, {"FunctionUrlAuthType": "NONE"}, NoManagedPolicies())  # type: ignore[arg-type]
    return output


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
