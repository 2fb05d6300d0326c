"""deploy/lambda/: the container-image variant, validated offline as template.yaml is, and its Dockerfile."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("cfnlint")
pytest.importorskip("samtranslator")
pytest.importorskip("mangum")

import cfnlint.api as cfnlint_api
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from tests.support.servers import ROOT

TEMPLATE = ROOT / "deploy" / "lambda" / "template-image.yaml"
DOCKERFILE = ROOT / "deploy" / "lambda" / "Dockerfile"
IMAGE_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/oip-asgi:python3.12"


class NoManagedPolicies:
    def load(self) -> dict[str, str]:
        raise AssertionError("the template names no managed policy; the transform must not need IAM")


def lint(text: str, *, informational: bool = True) -> list[str]:
    checks = ["I"] if informational else []
    config = cfnlint_api.ManualArgs(regions=["us-east-1", "eu-west-1"], include_checks=checks)
    return [str(match) for match in cfnlint_api.lint(text, config=config)]


def transformed(parameters: dict[str, str]) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the transform asks boto3 for the partition
        template = yaml_parse(TEMPLATE.read_text())
        # What `sam build` and `sam package` do before the transform runs in AWS: the image goes to ECR.
        template["Resources"]["OIPImageFunction"]["Properties"]["ImageUri"] = IMAGE_URI
        output: dict[str, Any] = transform(template, parameters, NoManagedPolicies())  # type: ignore[arg-type]
    return output


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource for name, resource in template["Resources"].items() if resource["Type"] == kind}


def dockerfile_instructions(name: str) -> list[str]:
    return re.findall(rf"^{name} (.*)$", DOCKERFILE.read_text(), re.MULTILINE)


def test_template_lints_clean() -> None:
    assert lint(TEMPLATE.read_text()) == []


@pytest.mark.parametrize("provisioned", ["0", "2"])
def test_transformed_template_lints_clean(provisioned: str) -> None:
    assert lint(json.dumps(transformed({"ProvisionedConcurrency": provisioned})), informational=False) == []


def test_lint_would_catch_a_broken_template() -> None:
    broken = TEMPLATE.read_text().replace("PackageType: Image", "PackageType: Container")
    assert any("Container" in problem for problem in lint(broken))


def test_function_is_an_image_with_room_for_a_real_model() -> None:
    (function,) = resources(transformed({}), "AWS::Lambda::Function").values()
    properties = function["Properties"]
    assert properties["PackageType"] == "Image"
    assert properties["Code"] == {"ImageUri": IMAGE_URI}
    assert "Runtime" not in properties and "Handler" not in properties  # the image's CMD says
    assert yaml_parse(TEMPLATE.read_text())["Parameters"]["MemorySize"]["Default"] >= 2048


def test_api_invokes_the_alias_that_carries_provisioned_concurrency() -> None:
    template = transformed({"ProvisionedConcurrency": "2"})
    (alias_name, alias) = next(iter(resources(template, "AWS::Lambda::Alias").items()))
    assert alias["Properties"]["ProvisionedConcurrencyConfig"]["Fn::If"][0] == "HasProvisionedConcurrency"
    assert template["Conditions"]["HasProvisionedConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ProvisionedConcurrency"}, 0]}]
    }
    (api,) = resources(template, "AWS::ApiGatewayV2::Api").values()
    integration = api["Properties"]["Body"]["paths"]["/{proxy+}"]["x-amazon-apigateway-any-method"][
        "x-amazon-apigateway-integration"
    ]
    assert integration["payloadFormatVersion"] == "2.0"
    assert alias_name in json.dumps(integration["uri"])


def test_build_metadata_points_at_the_dockerfile_from_the_repository_root() -> None:
    metadata = yaml_parse(TEMPLATE.read_text())["Resources"]["OIPImageFunction"]["Metadata"]
    context = (TEMPLATE.parent / metadata["DockerContext"]).resolve()
    assert context == ROOT
    assert (context / metadata["Dockerfile"]).resolve() == DOCKERFILE


def test_image_is_lambdas_python_of_the_zip_function_with_its_handler_files() -> None:
    (base,) = dockerfile_instructions("FROM")
    (python,) = re.findall(r"^ARG PYTHON=(.*)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert base == "public.ecr.aws/lambda/python:${PYTHON}"
    zip_function = yaml_parse((ROOT / "template.yaml").read_text())["Resources"]["OIPFunction"]["Properties"]
    assert zip_function["Runtime"] == f"python{python}"
    # The same files the zip build ships (the Makefile's default LAMBDA_SOURCES), to the same place.
    (sources,) = re.findall(r"^LAMBDA_SOURCES \?= (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    copied = [line for line in dockerfile_instructions("COPY") if line.endswith("${LAMBDA_TASK_ROOT}/examples/")]
    assert copied == [f"{sources} ${{LAMBDA_TASK_ROOT}}/examples/"]


def test_images_handler_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The image's CMD, as Lambda's runtime interface client resolves it, answers an HTTP API event."""
    import importlib

    import oip_asgi_lambda

    (command,) = dockerfile_instructions("CMD")
    (handler_path,) = json.loads(command)
    module, attribute = handler_path.rsplit(".", 1)
    handler = getattr(importlib.import_module(module), attribute)
    assert isinstance(handler, oip_asgi_lambda.OIPHandler)
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/v2/health/ready",
        "rawQueryString": "",
        "headers": {"host": "example.execute-api.us-east-1.amazonaws.com"},
        "requestContext": {
            "http": {"method": "GET", "path": "/v2/health/ready", "sourceIp": "192.0.2.1", "protocol": "HTTP/1.1"},
            "stage": "$default",
            "domainName": "example.execute-api.us-east-1.amazonaws.com",
        },
        "isBase64Encoded": False,
    }
    response = handler(event, None)
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"ready": True}
