"""How many CPUs this process may use: the default number of `create_pretraining_data` workers.

The CPUs it may run on (its affinity, which `os.cpu_count()` overstates on a shared machine), bounded by the CPU
quota of its cgroup and of the cgroups above it: a container limited to 2 CPUs of a 64-CPU host is allowed 64
CPUs by its affinity and 2 by its quota, and 64 processes sharing 2 CPUs would each start (and hold their memory)
for nothing. Both cgroup versions are read: v2's `cpu.max` ("max" or "<quota> <period>") and v1's
`cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: no quota), under the mount point systemd and container runtimes use,
`/sys/fs/cgroup`. A quota of q CPUs allows floor(q) processes, and at least one. Whatever cannot be read counts as
no limit.
"""

from __future__ import annotations

import math
import os

PROC_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"


def available_cpus(proc_cgroup: str = PROC_CGROUP, cgroup_root: str = CGROUP_ROOT) -> int:
    """The CPUs of this process's affinity (all CPUs where the system has no affinity call), limited by its cgroups'
    CPU quota; at least 1."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(proc_cgroup, cgroup_root)
    if quota is not None:
        cpus = min(cpus, math.floor(quota))
    return max(1, cpus)


def cgroup_cpu_quota(proc_cgroup: str = PROC_CGROUP, cgroup_root: str = CGROUP_ROOT) -> float | None:
    """The smallest CPU quota, in CPUs, of this process's cgroup and its ancestors, or None if none is set (or the
    system has no cgroups)."""
    try:
        with open(proc_cgroup, encoding="utf-8", errors="surrogateescape") as f:  # paths are bytes
            lines = f.read().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # v2: one unified hierarchy
            quotas += [_v2_quota(d) for d in _ancestors(cgroup_root, path)]
        elif "cpu" in controllers.split(","):  # v1: the hierarchy the cpu controller is mounted on
            mount = os.path.join(cgroup_root, controllers)
            if not os.path.isdir(mount):
                mount = os.path.join(cgroup_root, "cpu")
            quotas += [_v1_quota(d) for d in _ancestors(mount, path)]
    quotas = [q for q in quotas if q is not None]
    return min(quotas) if quotas else None


def _ancestors(mount: str, path: str) -> list[str]:
    """The directories of cgroup `path` and of each cgroup above it under `mount`, those that exist. Inside a
    container the mount is often the container's own cgroup, where `path` (the host's view) does not exist: the
    mount itself is then the process's cgroup."""
    parts = [p for p in path.split("/") if p]
    found = [os.path.join(mount, *parts[:i]) for i in range(len(parts), 0, -1)] + [mount]
    return [d for d in found if os.path.isdir(d)]


def _v2_quota(directory: str) -> float | None:
    fields = _read(os.path.join(directory, "cpu.max")).split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def _v1_quota(directory: str) -> float | None:
    return _ratio(_read(os.path.join(directory, "cpu.cfs_quota_us")),
                  _read(os.path.join(directory, "cpu.cfs_period_us")))


def _ratio(quota: str, period: str) -> float | None:
    try:
        quota_value, period_value = int(quota), int(period)
    except ValueError:
        return None
    if quota_value <= 0 or period_value <= 0:  # -1: no quota
        return None
    return quota_value / period_value


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, ValueError):  # ValueError: not text
        return ""
