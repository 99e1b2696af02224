"""Whether this machine's CPU has arithmetic for a 16-bit float type, and the warning for a run that asks for a type
its CPU only emulates.

Mixed precision pays on a CPU only where the CPU computes the 16-bit type: bfloat16 with AVX512_BF16 or AMX,
float16 with AVX512_FP16 or AMX-FP16. Elsewhere it is converted and computed in software, and slower than float32,
most of all on AVX-512 CPUs, where TensorFlow hands bfloat16 to oneDNN's emulation (BENCHMARKS.md, "Mixed precision
on a CPU without 16-bit arithmetic", has the figures that the warning quotes). A run that asks for it there is not
refused (it computes in the type it asked for, only slower), but told in one line what it costs.
"""

from __future__ import annotations

import platform

# The CPU flags (as Linux's /proc/cpuinfo spells them) of hardware arithmetic for each 16-bit Keras policy.
NATIVE_FLAGS = {"mixed_bfloat16": ("avx512_bf16", "amx_bf16"), "mixed_float16": ("avx512_fp16", "amx_fp16")}
_TYPE = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}
_MEASURED = {"mixed_bfloat16": "BERT-Base's training steps ran 1.2x (AVX2) to 4.3x (AVX-512) slower than in float32",
             "mixed_float16": "BERT-Base's pretraining step ran 1.3x slower than in float32 on an AVX-512 CPU"}


def cpuinfo(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields in Linux's /proc/cpuinfo (`model name`, `flags`, ...); {} where it cannot be
    read."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, colon, value = line.partition(":")
                if not colon and fields:  # the blank line after the first processor
                    break
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return {}
    return fields


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """This x86 CPU's feature flags as Linux lists them, or None where they are not known (another OS or
    architecture, an unreadable file)."""
    flags = cpuinfo(path).get("flags")
    if platform.machine().lower() not in ("x86_64", "amd64") or flags is None:
        return None
    return frozenset(flags.split())


def emulation_warning(dtype: str, policy: str, flags: frozenset[str] | None, jit_compile: bool = False) -> str | None:
    """The one-line warning for `--dtype=dtype` (Keras policy `policy`) on a CPU with these `flags`, or None where
    the CPU has the arithmetic, the policy is float32, or the flags are not known. None too for bfloat16 under XLA
    (`jit_compile`), whose CPU kernels compute it in float32 from bfloat16 storage: there it was sometimes slower
    and sometimes faster than float32 (BENCHMARKS.md), so no one advice holds."""
    if policy not in NATIVE_FLAGS or flags is None or flags & set(NATIVE_FLAGS[policy]):
        return None
    if jit_compile and policy == "mixed_bfloat16":
        return None
    names = " or ".join(flag.upper() for flag in NATIVE_FLAGS[policy])
    return (f"--dtype={dtype}: this CPU has no {_TYPE[policy]} arithmetic ({names}), so it is emulated: "
            f"{_MEASURED[policy]} on CPUs without it (BENCHMARKS.md); use --dtype=fp32 on this machine")


def warn_if_emulated(dtype: str, policy: str, jit_compile: bool = False) -> None:
    """Logs `emulation_warning` for a run on this machine's CPU: not where TensorFlow sees a GPU or TPU, which
    then computes the model."""
    import tensorflow as tf
    from absl import logging

    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return
    message = emulation_warning(dtype, policy, cpu_flags(), jit_compile)
    if message:
        logging.warning(message)
