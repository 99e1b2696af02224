# Source on the GPU machine, in the checkout's root, once every part of pack.sh is in /tmp/x (stash.sh): installs
# the carried TensorFlow 2.21, which is built for CUDA 12, in /tmp/site, and gives it the machine's CUDA 13
# libraries (cuBLAS 13, cuFFT 12, cuSOLVER 12, cuSPARSE 12, cuDNN 9, nvJitLink and NVRTC 13) under the sonames it
# loads; the CUDA 12 runtime it loads is the real one, carried. XLA compiles with the machine's ptxas and libdevice.
S=/tmp/site X=/tmp/x
if [ ! -e $S/.installed ]; then
  t0=$(date +%s)
  parts=$(ls $X/part.* 2>/dev/null | wc -l)
  if [ "$parts" != "$(cat $X/parts 2>/dev/null)" ]; then
    echo "setup.sh: $parts parts in $X, pack.sh made $(cat $X/parts 2>/dev/null || echo '?'): carry the rest"
    return 1
  fi
  rm -rf $S /tmp/cudart12
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $S $X/small/*.whl \
    && cat $X/part.* | xz -d -T0 | tar x -C $S && python3 -m zipfile -e $X/cuda/*.whl /tmp/cudart12 || return 1
  touch $S/.installed
  echo "installed in $(( $(date +%s) - t0 )) s"
fi
export PYTHONPATH=$S:$PWD
SP=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
mkdir -p /tmp/shim
# shim SONAME BASE: SONAME -> the BASE.so.N of the highest version the machine has
shim() {
  local f
  f=$(find "$SP/nvidia" /usr/local/cuda/ -name "$2.so.[0-9]*" -printf "%f %p\n" 2>/dev/null | sort -V | tail -1)
  f=${f#* }
  if [ -n "$f" ]; then ln -sf "$f" /tmp/shim/$1; echo "$1 -> $f"; else echo "$1: the machine has no $2.so.N"; fi
}
shim libcublas.so.12 libcublas; shim libcublasLt.so.12 libcublasLt; shim libcufft.so.11 libcufft
shim libcusolver.so.11 libcusolver; shim libcusparse.so.12 libcusparse; shim libcudnn.so.9 libcudnn
shim libnvJitLink.so.12 libnvJitLink; shim libnvrtc.so.12 libnvrtc
LD_LIBRARY_PATH=/tmp/shim:/tmp/cudart12/nvidia/cuda_runtime/lib:$(find "$SP/nvidia" -name "lib*.so*" -printf "%h\n" \
  | sort -u | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDA_DIR=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
export LD_LIBRARY_PATH XLA_FLAGS="--xla_gpu_cuda_data_dir=$CUDA_DIR" PATH=$CUDA_DIR/bin:$PATH PYTHONUNBUFFERED=1
# the driver compiles TensorFlow's compute_90 PTX for the GPU once; keep it for the later processes
export CUDA_CACHE_PATH=/tmp/nvcache CUDA_CACHE_MAXSIZE=4294967296
