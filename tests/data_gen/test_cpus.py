"""`data_gen.cpus`: the CPUs a process may use, from its affinity and its cgroups' CPU quota, on cgroup trees laid out
as the kernel lays them out (v2's unified hierarchy, v1's per-controller mounts, a container's view of its own
cgroup)."""

import os

import pytest

from data_gen.cpus import available_cpus, cgroup_cpu_quota


def _tree(tmp_path, proc_lines, files):
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "proc_cgroup"
    proc.write_text("".join(line + "\n" for line in proc_lines))
    root = tmp_path / "cgroup"
    root.mkdir()
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content + "\n")
    return str(proc), str(root)


def _affinity():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_v2_takes_the_smallest_quota_of_the_cgroup_and_its_ancestors(tmp_path):
    proc, root = _tree(tmp_path, ["0::/user.slice/job"], {
        "cpu.max": "max 100000",
        "user.slice/cpu.max": "150000 100000",
        "user.slice/job/cpu.max": "400000 100000",
    })
    assert cgroup_cpu_quota(proc, root) == 1.5
    assert available_cpus(proc, root) == 1  # 1.5 CPUs: room for one process at full speed


def test_v2_without_a_quota_leaves_the_affinity(tmp_path):
    proc, root = _tree(tmp_path, ["0::/a"], {"a/cpu.max": "max 100000", "cpu.max": "max 100000"})
    assert cgroup_cpu_quota(proc, root) is None
    assert available_cpus(proc, root) == _affinity()


def test_v1_reads_the_cpu_controllers_mount(tmp_path):
    proc, root = _tree(tmp_path, ["5:memory:/docker/abc", "4:cpu,cpuacct:/docker/abc", "3:cpuset:/docker/abc"], {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        "cpu,cpuacct/docker/cpu.cfs_quota_us": "50000",
        "cpu,cpuacct/docker/cpu.cfs_period_us": "100000",
        "memory/docker/abc/cpu.cfs_quota_us": "10000",  # not the cpu controller's: ignored
        "memory/docker/abc/cpu.cfs_period_us": "100000",
    })
    assert cgroup_cpu_quota(proc, root) == 0.5
    assert available_cpus(proc, root) == 1  # at least one


def test_a_containers_own_cgroup_is_its_mount(tmp_path):
    """Inside a container /proc/self/cgroup names the host's path, which its mount does not have: the mount is the
    container's cgroup."""
    proc, root = _tree(tmp_path, ["0::/kubepods/pod1/c1"], {"cpu.max": "200000 100000"})
    assert cgroup_cpu_quota(proc, root) == 2.0
    assert available_cpus(proc, root) == min(_affinity(), 2)
    proc, root = _tree(tmp_path / "v1", ["2:cpu:/kubepods/pod1/c1"], {"cpu/cpu.cfs_quota_us": "300000",
                                                                       "cpu/cpu.cfs_period_us": "100000"})
    assert cgroup_cpu_quota(proc, root) == 3.0


@pytest.mark.parametrize("content", ["", "garbage", "max", "0 100000", "100000 0", "abc 100000"])
def test_an_unreadable_quota_is_no_limit(tmp_path, content):
    proc, root = _tree(tmp_path, ["0::/"], {"cpu.max": content})
    assert cgroup_cpu_quota(proc, root) is None
    assert available_cpus(proc, root) == _affinity()


def test_no_cgroups_at_all(tmp_path):
    assert cgroup_cpu_quota(str(tmp_path / "missing"), str(tmp_path)) is None
    assert available_cpus(str(tmp_path / "missing"), str(tmp_path)) == _affinity() >= 1
