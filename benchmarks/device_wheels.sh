#!/usr/bin/env bash
# Puts the wheels that the package needs on the lent GPU machine into .whl/ (ignored by git): run it
# here (the GPU machine reaches no package index), carry .whl, and install them there as printed
# at the end, or let `run_gpu.sh notebooks` install them.
# That machine's own numpy (2.5.x) breaks numba-cuda's compiler ("module 'numpy' has no attribute
# 'row_stack'"); numpy 2.4.x works. Extra wheels can be named as arguments: NAME==VERSION ...
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
mkdir -p "$(git rev-parse --git-dir)/info"
grep -qx '/.whl/' "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-dir)/info/exclude"
mkdir -p .whl
# greenlet, cloudpickle and ipywidgets (with its two front-end packages; its ipython, comm and
# traitlets come with --nbval): the package imports them; the GPU image lacks them.
# cuda-cccl: NVIDIA's CUB for Python (cuda.compute), the benchmarks' baseline (the bench extra); its
# dependencies (cuda-core, cuda-bindings, cuda-pathfinder, NVRTC) are on the GPU image already.
# --nbval: also nbval, nbclient and the Jupyter kernel they drive (the GPU image has none of them); this set
# installed cleanly there and ran every notebook under nbval (the image's own pytest, pluggy,
# packaging, psutil, attrs, pygments, dateutil are kept: do not shadow them).
specs=(numpy==2.4.6 greenlet cloudpickle cuda-cccl==1.2.1 ipywidgets==8.1.9 widgetsnbextension==4.0.16 jupyterlab_widgets==3.0.17)
if [ "${1:-}" = "--nbval" ]; then
  shift
  specs+=(nbval==0.11.0 nbclient==0.10.2 ipykernel==7.4.0 ipython==9.18.1 ipython_pygments_lexers jupyter_client==8.10.0
          jupyter_core==5.9.1 nbformat==5.11.1 fastjsonschema jsonschema jsonschema_specifications referencing
          rpds_py traitlets comm debugpy executing asttokens pure_eval stack_data jedi parso pexpect ptyprocess
          prompt_toolkit wcwidth matplotlib_inline nest_asyncio2 platformdirs pyzmq tornado)
fi
for spec in "${specs[@]}" "$@"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$spec"
done
ls -la .whl
cat <<'MSG'
On the GPU machine, name .whl in carry and start the command with:
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit;
MSG
