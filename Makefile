# `sam build` runs `make build-OIPFunction` here (template.yaml: BuildMethod: makefile), with
# ARTIFACTS_DIR set to the directory that becomes the function's zip.

PYTHON ?= python3
# Wheels are chosen for Lambda (template.yaml's Runtime and Architectures), not for this machine:
# for arm64, set LAMBDA_ARCH=aarch64 here and Architectures: [arm64] there.
LAMBDA_PYTHON ?= 3.12
LAMBDA_ARCH ?= x86_64
# What the function runs besides oip-asgi: the module template.yaml's Handler names and whatever it
# imports, as files or whole directories (paths from here, no trailing slash; kept as they are).
LAMBDA_SOURCES ?= examples/__init__.py examples/models.py examples/lambda_handler.py
# A model repository (docs/repository.md) is packed as one more source, a directory: its path from here,
# as the handler names it. Its model files' libraries are extras here (LAMBDA_EXTRAS=lambda,onnx), and
# config.pbtxt files need protobuf, which the repository extra brings (LAMBDA_EXTRAS=lambda,repository).
LAMBDA_EXTRAS ?= lambda
# Your models' own dependencies, one requirement a line, installed with oip-asgi's when the file exists.
LAMBDA_REQUIREMENTS ?= requirements-lambda.txt
WHEELS := $(abspath .lambda-wheels)

.PHONY: build-OIPFunction
build-OIPFunction:
	rm -rf "$(WHEELS)"
	$(PYTHON) -m pip wheel --no-deps --wheel-dir "$(WHEELS)" .
	$(PYTHON) -m pip install --target "$(ARTIFACTS_DIR)" --only-binary=:all: \
		--implementation cp --python-version $(LAMBDA_PYTHON) \
		--platform manylinux_2_28_$(LAMBDA_ARCH) --platform manylinux2014_$(LAMBDA_ARCH) \
		"$$(ls "$(WHEELS)"/oip_asgi-*.whl)[$(LAMBDA_EXTRAS)]" \
		$(if $(wildcard $(LAMBDA_REQUIREMENTS)),--requirement "$(LAMBDA_REQUIREMENTS)")
	rm -rf "$(WHEELS)"
	for source in $(LAMBDA_SOURCES); do \
		mkdir -p "$(ARTIFACTS_DIR)/$$(dirname "$$source")" && cp -R "$$source" "$(ARTIFACTS_DIR)/$$(dirname "$$source")/" || exit 1; \
	done
