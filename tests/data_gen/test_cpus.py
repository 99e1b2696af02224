"""`data_gen.cpus`: the CPUs a process may use, from its affinity and its cgroups' CPU quota, on cgroup trees laid out
as the kernel lays them out (v2's unified hierarchy, v1's per-controller mounts, both at once, a container's view of
its own cgroup), with the affinity set to 8 CPUs so that every quota below it shows."""

import os

import pytest

from data_gen import cpus
from data_gen.cpus import available_cpus, cgroup_cpu_quota


@pytest.fixture(autouse=True)
def eight_cpus(monkeypatch):
    """An affinity of 8 CPUs, and a `cpu_count` that differs from it (the affinity is the one that counts)."""
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 64)


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


def test_v2_takes_the_smallest_quota_of_the_cgroup_and_its_ancestors(tmp_path):
    proc, root = _tree(tmp_path, ["0::/user.slice/job"], {
        "cpu.max": "max 100000",
        "user.slice/cpu.max": "350000 100000",
        "user.slice/job/cpu.max": "1600000 100000",
    })
    assert cgroup_cpu_quota(proc, root) == 3.5
    assert available_cpus(proc, root) == 3  # 3.5 CPUs: room for three processes at full speed
    proc, root = _tree(tmp_path / "wide", ["0::/job"], {"job/cpu.max": "1600000 100000"})
    assert available_cpus(proc, root) == 8  # a quota above the affinity leaves the affinity


def test_v2_without_a_quota_leaves_the_affinity_not_the_cpu_count(tmp_path):
    proc, root = _tree(tmp_path, ["0::/a"], {"a/cpu.max": "max 100000", "cpu.max": "max 100000"})
    assert cgroup_cpu_quota(proc, root) is None
    assert available_cpus(proc, root) == 8


def test_without_an_affinity_call_the_cpu_count(tmp_path, monkeypatch):
    monkeypatch.delattr(cpus.os, "sched_getaffinity")
    assert available_cpus(str(tmp_path / "missing"), str(tmp_path)) == 64


def test_v1_reads_the_cpu_controllers_mount_and_no_other(tmp_path):
    proc, root = _tree(tmp_path, ["5:memory:/docker/abc", "4:cpu,cpuacct:/docker/abc", "3:cpuset:/docker/abc"], {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        "cpu,cpuacct/docker/cpu.cfs_quota_us": "250000",
        "cpu,cpuacct/docker/cpu.cfs_period_us": "100000",
        "memory/docker/abc/cpu.cfs_quota_us": "10000",  # not the cpu controller's hierarchies: ignored
        "memory/docker/abc/cpu.cfs_period_us": "100000",
        "cpuset/docker/abc/cpu.cfs_quota_us": "10000",
        "cpuset/docker/abc/cpu.cfs_period_us": "100000",
    })
    assert cgroup_cpu_quota(proc, root) == 2.5
    assert available_cpus(proc, root) == 2


def test_v1_with_cpu_and_cpuacct_on_lines_of_their_own(tmp_path):
    """`cpu` mounted alone (`2:cpuacct:/`, `1:cpu:/`), and a joint mount reached through its `cpu` link."""
    proc, root = _tree(tmp_path, ["2:cpuacct:/", "1:cpu:/"], {"cpu/cpu.cfs_quota_us": "300000",
                                                              "cpu/cpu.cfs_period_us": "100000"})
    assert available_cpus(proc, root) == 3
    proc, root = _tree(tmp_path / "link", ["3:cpuacct,cpu:/slice"], {"cpu,cpuacct/slice/cpu.cfs_quota_us": "100000",
                                                                    "cpu,cpuacct/slice/cpu.cfs_period_us": "100000"})
    os.symlink("cpu,cpuacct", os.path.join(root, "cpu"))  # the mount is named in the kernel's order, the line not
    assert available_cpus(proc, root) == 1


def test_a_hybrid_system_reads_the_v1_cpu_controller(tmp_path):
    """v1 controllers with the unified v2 hierarchy beside them (mounted at .../unified, without the cpu controller):
    the `0::` line finds no cpu.max at the root and adds no limit."""
    proc, root = _tree(tmp_path, ["1:cpu:/", "0::/"], {"cpu/cpu.cfs_quota_us": "400000",
                                                       "cpu/cpu.cfs_period_us": "100000", "unified/cgroup.procs": ""})
    assert available_cpus(proc, root) == 4


def test_a_containers_own_cgroup_is_its_mount(tmp_path):
    """Inside a container /proc/self/cgroup names the host's path, which its mount does not have: the mount is the
    container's cgroup."""
    proc, root = _tree(tmp_path, ["0::/kubepods/pod1/c1"], {"cpu.max": "200000 100000"})
    assert available_cpus(proc, root) == 2
    proc, root = _tree(tmp_path / "v1", ["2:cpu:/kubepods/pod1/c1"], {"cpu/cpu.cfs_quota_us": "300000",
                                                                       "cpu/cpu.cfs_period_us": "100000"})
    assert available_cpus(proc, root) == 3


@pytest.mark.parametrize("content", ["", "garbage", "max", "0 100000", "100000 0", "abc 100000", "-1 100000"])
def test_an_unreadable_quota_is_no_limit(tmp_path, content):
    proc, root = _tree(tmp_path, ["0::/"], {"cpu.max": content})
    assert cgroup_cpu_quota(proc, root) is None
    assert available_cpus(proc, root) == 8


def test_a_cgroup_path_that_is_not_utf8(tmp_path):
    proc, root = _tree(tmp_path, [], {"cpu.max": "100000 100000"})
    with open(proc, "wb") as f:
        f.write(b"0::/caf\xe9\n")
    assert available_cpus(proc, root) == 1


def test_no_cgroups_at_all(tmp_path):
    assert cgroup_cpu_quota(str(tmp_path / "missing"), str(tmp_path)) is None
    assert available_cpus(str(tmp_path / "missing"), str(tmp_path)) == 8


def test_a_quota_under_one_cpu_still_allows_one_process(tmp_path):
    proc, root = _tree(tmp_path, ["0::/"], {"cpu.max": "50000 100000"})
    assert cgroup_cpu_quota(proc, root) == 0.5
    assert available_cpus(proc, root) == 1


def test_the_default_number_of_workers_is_capped_by_what_one_tokenizing_process_feeds(monkeypatch):
    from data_gen import generate

    monkeypatch.setattr(generate, "available_cpus", lambda: 64)
    assert [generate.default_num_workers(generate.Options(dupe_factor=d)) for d in (1, 2, 10, 40)] == [2, 4, 20, 64]
    monkeypatch.setattr(generate, "available_cpus", lambda: 1)
    assert generate.default_num_workers(generate.Options(dupe_factor=10)) == 1
