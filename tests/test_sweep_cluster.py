"""`xlvin sweep --address` on a real two-node Ray cluster on this machine, as a user starts one:
a head (`ray start --head`, no CPUs, so every cell runs on the other node) and a second node
(`ray start --address`) with its own temporary folder, scratch folder and xlvin cache, token
authentication on. The nodes share no folder with the driver: the run directories and results
must come back through Ray, and be those `xlvin reproduce` makes on the driver itself."""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from safetensors.numpy import load_file

from xlvin.cli import main
from xlvin.experiments.ray_reaper import kill_session

SRC = str(Path(__file__).resolve().parents[1] / "src")
RAY_CLI = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]
AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")
CELLS = ["table1", "--seeds", "2", "--envs", "CartPole-v0", "--agents", "ppo"]

#: The driver: `xlvin sweep` whose table1 cells also note where they ran (in node.json).
DRIVER = textwrap.dedent("""
    import dataclasses, json, sys, tempfile
    from xlvin.cli import main
    from xlvin.experiments import registry, table1

    def run_cell(cell, root):
        record = table1.run_cell(cell, root)
        where = {"root": str(root), "tmp": tempfile.gettempdir()}
        (cell.run_dir(root) / "node.json").write_text(json.dumps(where))
        return record

    if __name__ == "__main__":
        registry.EXPERIMENTS["classic"] = dataclasses.replace(registry.CLASSIC, run_cell=run_cell)
        sys.exit(main(sys.argv[1:]))
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_auth(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in AUTH_VARIABLES}


def stop_nodes(folder: Path) -> None:
    """Kill the processes of the Ray nodes whose temporary folders are under `folder` (and only
    those: `ray stop` would stop every Ray on this machine)."""
    kill_session(str(folder))


@pytest.fixture(scope="module")
def cluster():
    """A token-authenticated head without CPUs and a second node with 2, each with its own
    folders under a short path (Ray's sockets live there): (address, token, second node's
    folder)."""
    pytest.importorskip("ray")
    base = Path(tempfile.mkdtemp(prefix="xlvin-cluster-"))
    token = secrets.token_hex(32)
    port = free_port()
    env = {**without_auth(os.environ), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
           "PYTHONPATH": SRC}
    node = base / "node2"
    (node / "tmp").mkdir(parents=True)
    node_env = {**env, "TMPDIR": str(node / "tmp"), "XLVIN_CACHE": str(node / "cache")}
    starts = [
        (["--head", "--port", str(port), "--num-cpus", "0", "--temp-dir", str(base / "head"),
          "--include-dashboard", "false"], env),
        (["--address", f"127.0.0.1:{port}", "--num-cpus", "2", "--temp-dir", str(node / "ray")],
         node_env),
    ]
    try:
        for args, node_vars in starts:
            subprocess.run([*RAY_CLI, "start", *args, "--disable-usage-stats"],
                           env=node_vars, check=True, timeout=120,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield f"127.0.0.1:{port}", token, node
    finally:
        stop_nodes(base)
        shutil.rmtree(base, ignore_errors=True)


def driver(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """`xlvin sweep ARGS` (through DRIVER) in a process of its own; returns it and its seconds."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", DRIVER, *args],
                          env={**env, "PYTHONPATH": SRC}, capture_output=True, text=True,
                          timeout=300, check=False)
    return done, time.monotonic() - start


def without_wall_times(data):
    """JSON data without the fields that measure time (they differ from run to run)."""
    if isinstance(data, dict):
        return {k: without_wall_times(v) for k, v in data.items() if "wall" not in k}
    if isinstance(data, list):
        return [without_wall_times(v) for v in data]
    return data


@pytest.mark.slow
def test_a_sweep_on_a_two_node_cluster_equals_reproduce_on_the_driver(
    cluster, tmp_path: Path
) -> None:
    address, token, node = cluster
    runs, results = tmp_path / "runs", tmp_path / "results"
    args = ["sweep", *CELLS, "--address", address, "--runs", str(runs), "--results", str(results)]
    plain = without_auth(os.environ)

    # without the token, and with a wrong one: one line at once, nothing written
    for env, says in (
        (plain, (f"the Ray cluster at {address} requires token authentication: set "
                 "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the output of `ray get-auth-token` on "
                 "the head node>, then run again")),
        ({**plain, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "wrong"},
         f"the Ray cluster at {address} refused this machine's authentication token"),
    ):
        done, seconds = driver(args, env)
        assert done.returncode == 2 and seconds < 60
        assert done.stderr.startswith(f"xlvin: error: {says}") and done.stderr.count("\n") == 1
        assert not runs.exists() and not results.exists()

    # with the token: every cell ran on the second node, in its scratch folder
    done, _ = driver(args, {**plain, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 trained, 0 skipped (finished earlier), 0 failed" in done.stdout
    cell_dirs = sorted(runs.glob("paper/standard/CartPole-v0/ppo/seed*"))
    assert [d.name for d in cell_dirs] == ["seed0", "seed1"]
    for run_dir in cell_dirs:
        where = json.loads((run_dir / "node.json").read_text())
        assert where["tmp"] == str(node / "tmp") and where["root"].startswith(where["tmp"])
    assert list((node / "tmp").iterdir()) == []  # the scratch folders are gone

    # the same cells reproduced on the driver: the same weights, evaluations and table
    assert main(["reproduce", "classic", *CELLS[1:], "--jobs", "1", "--runs",
                 str(tmp_path / "local"), "--results", str(tmp_path / "local-results")]) == 0
    for run_dir in cell_dirs:
        local = tmp_path / "local" / run_dir.relative_to(runs)
        assert (run_dir / "eval.json").read_bytes() == (local / "eval.json").read_bytes()
        ours, theirs = load_file(run_dir / "model.safetensors"), load_file(local / "model.safetensors")
        assert ours.keys() == theirs.keys()
        assert all((ours[k] == theirs[k]).all() for k in ours)
    table = json.loads((results / "table1-paper.json").read_text())
    local_table = json.loads((tmp_path / "local-results" / "table1-paper.json").read_text())
    assert len(table["runs"]) == 2
    assert without_wall_times(table) == without_wall_times(local_table)
