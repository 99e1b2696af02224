#!/bin/bash
# Packs TensorFlow 2.21 for Python 3.12, and the few packages it needs that a CUDA 13 GPU machine's own Python
# lacks, into parts of at most 60 MiB in the git-ignored folders .gpu/p0, .gpu/p1, ... of this checkout: for a GPU
# machine that reaches no package index and takes about 64 MiB of files per call (BENCHMARKS.md, "The GPU plan",
# has the calls). The wheels' C++ headers are left out and the largest libraries stripped of their symbol tables.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download() {
  local dir=$1
  shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dir" "$@"
}
download "$work/tf" tensorflow==2.21.0
download "$work/small" keras==3.15.1 optree==0.20.0 namex==0.1.0 astunparse==1.6.3 gast==0.7.0 google-pasta==0.2.0 \
  termcolor==3.3.0 protobuf==6.33.6 tblib==3.2.2 wrapt==2.5.2 ml_dtypes==0.6.0
download "$work/cuda" nvidia-cuda-runtime-cu12==12.9.79  # TensorFlow's CUDA 12 runtime, 3 MiB
mkdir "$work/tree"
(cd "$work/tree" && unzip -q "$work"/tf/tensorflow-*.whl -x 'tensorflow/include/*')
tf="$work/tree/tensorflow"
strip --strip-unneeded "$tf/libtensorflow_cc.so.2" "$tf/libtensorflow_framework.so.2" \
  "$tf/python/profiler/internal/_pywrap_profiler_plugin.so"
tar cf - -C "$work/tree" . | xz -9 -T0 > "$work/tf.tar.xz"
rm -rf .gpu/p[0-9]*
mkdir -p .gpu/p0
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qsx "/.gpu/" "$exclude" || echo "/.gpu/" >> "$exclude"
cp -r "$work/small" "$work/cuda" .gpu/p0/
head -c 52M "$work/tf.tar.xz" > .gpu/p0/part.00  # room for the wheels beside it
tail -c +$((52 * 1048576 + 1)) "$work/tf.tar.xz" | split -b 60M -d -a 2 --numeric-suffixes=1 - "$work/part."
shopt -s nullglob
for part in "$work"/part.*; do
  n=$((10#${part##*.}))
  mkdir -p ".gpu/p$n" && mv "$part" ".gpu/p$n/"
done
ls .gpu/p*/part.* | wc -l > .gpu/p0/parts  # setup.sh checks that all of them arrived
# each call carries the tracked files and one part: together under the 64 MiB a call takes
tracked=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
for dir in .gpu/p*; do
  size=$(( $(du -sb "$dir" | cut -f1) + tracked ))
  echo "$dir with the tracked files: $((size / 1048576)) MiB"
  [ $size -lt $((64 * 1048576)) ] || { echo "pack.sh: $dir is too large to carry in one call" >&2; exit 1; }
done
