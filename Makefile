# The two commands a newcomer needs: `make run` (the demo) and `make test` (every test).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
PYTHON ?= python3
export PYTHONPATH := $(CURDIR)/$(BUILD_DIR)/python:$(PYTHONPATH)
# cuobjdump and nvdisasm from PyPI (scripts/install_deps.sh) when the toolkit has none.
export PATH := $(PATH):$(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null)/nvidia/cu13/bin

.PHONY: deps build test test-cpp test-python run bench clean

deps:
	bash scripts/install_deps.sh

$(BUILD_DIR)/build.ninja $(BUILD_DIR)/Makefile:
	cmake -S . -B $(BUILD_DIR) -DPython_EXECUTABLE=$$(command -v $(PYTHON))

build: $(BUILD_DIR)/Makefile
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: deps build
	$(PYTHON) tools/check_layering.py
	bash tools/run_tests.sh $(BUILD_DIR) $(PYTHON)

run: deps build
	$(PYTHON) examples/layer_norm_demo.py

bench: deps build
	$(BUILD_DIR)/braze_benchmarks

clean:
	rm -rf $(BUILD_DIR)
