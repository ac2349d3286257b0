#!/usr/bin/env bash
# Installs what braze needs to build and test, and only what is missing; safe to re-run.
# System packages come from apt, Python packages from pip; nothing else is downloaded.
set -euo pipefail

apt_packages=(cmake g++ make libfmt-dev nlohmann-json3-dev libssl-dev libgtest-dev libbenchmark-dev libdlpack-dev
              ccache libamdhip64-dev hipcc llvm)
# lightning-thunder (pure Python) is for tests/python/test_thunder.py, which runs Thunder on braze on a GPU.
pip_packages=(nanobind numpy ml_dtypes pytest hypothesis scikit-build-core torch lightning-thunder)

missing_apt=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_apt+=("$p")
done
if [ ${#missing_apt[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${missing_apt[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing_apt[@]}" >/dev/null
fi

python=${PYTHON:-python3}
missing_pip=()
for p in "${pip_packages[@]}"; do
  module=${p//-/_}
  [ "$p" = "scikit-build-core" ] && module=scikit_build_core
  if [ "$p" = "lightning-thunder" ]; then
    # Installed is enough: it may not import with this torch (the test says so and skips).
    "$python" -c "import importlib.metadata as m; m.version('lightning-thunder')" 2>/dev/null || missing_pip+=("$p")
    continue
  fi
  "$python" -c "import $module" 2>/dev/null || missing_pip+=("$p")
done
if [ ${#missing_pip[@]} -gt 0 ]; then
  echo "install_deps: pip install ${missing_pip[*]}"
  "$python" -m pip install -q "${missing_pip[@]}"
fi

# cuobjdump (and the nvdisasm it runs) read the SASS of compiled kernels, for the test that checks
# 128-bit loads. Some toolkit installs lack them; NVIDIA publishes both on PyPI.
if ! command -v cuobjdump >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/cuobjdump ]; then
  pip_bin="$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/nvidia/cu13/bin"
  if [ ! -x "$pip_bin/cuobjdump" ] || [ ! -x "$pip_bin/nvdisasm" ]; then
    echo "install_deps: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"
    "$python" -m pip install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm || echo "install_deps: note: no cuobjdump; SASS checks will skip"
  fi
fi

# The CUDA toolkit (headers and NVRTC) is needed to compile kernels, never to build or load braze.
if ! ls /usr/local/cuda/include/cuda.h >/dev/null 2>&1; then
  echo "install_deps: note: no CUDA toolkit under /usr/local/cuda; kernel compilation tests will skip"
fi
