"""Protocols are a registry like agents (`xlvin.run.protocols`): a protocol added with
`register_protocol` trains through the same loop and checks as the built-in ones, and no code
outside the registry compares a protocol's name."""

import dataclasses
import json
import re
import warnings
from pathlib import Path

import pytest

import xlvin
from xlvin.cli import main
from xlvin.errors import UserError
from xlvin.io.run_dir import METRICS
from xlvin.run import protocols
from xlvin.run.config import RunConfig
from xlvin.run.protocols import PROTOCOLS, Protocol, protocol_of

SRC = Path(__file__).resolve().parents[1] / "src" / "xlvin"
RUN = ["--env", "CartPole-v1", "--agent", "ppo", "--num-envs", "2", "--num-steps", "32",
       "--total-steps", "256", "--quiet"]


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, Protocol]:
    """The registry, restored after the test."""
    copy = dict(PROTOCOLS)
    monkeypatch.setattr(protocols, "PROTOCOLS", copy)
    return copy


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in ("charts/sps", "sha256")}
            for line in (run / METRICS).read_text().splitlines()]


def test_a_registered_protocol_trains_through_its_own_data(registry, tmp_path: Path) -> None:
    """The online protocol registered under another name, its data source counted: the run
    asks it for its data and trains what the online protocol trains, bit for bit."""
    online = registry["online"]
    made = []

    def data(cfg, context):
        made.append(cfg.train.protocol)
        return online.data(cfg, context)

    xlvin.register_protocol(dataclasses.replace(online, name="online-again", data=data,
                                                help="the online protocol, counted"))
    assert main(["train", *RUN, "--out", str(tmp_path / "online")]) == 0
    assert main(["train", *RUN, "--protocol", "online-again", "--out", str(tmp_path / "again")]) == 0
    assert made == ["online-again"]
    assert rows(tmp_path / "again") == rows(tmp_path / "online") and len(rows(tmp_path / "online")) == 4


def test_what_a_protocol_says_is_what_runs_check(registry) -> None:
    """A protocol's fields, not its name, decide: one that is not counted in env steps cannot
    continue a run or take SB3's step hooks, whatever it is called."""
    registry["mine"] = dataclasses.replace(registry["low_data"], name="mine")
    cfg = RunConfig.from_json({"train": {"protocol": "mine"}}, "test")
    assert protocol_of(cfg).whole_episodes and not protocol_of(cfg).in_env_steps
    assert protocols.whole_rollouts(cfg)[1] is None  # not rounded to rollouts: not in env steps


def test_registering_again_warns_and_a_built_in_name_is_refused(registry) -> None:
    mine = dataclasses.replace(registry["online"], name="mine")
    xlvin.register_protocol(mine)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xlvin.register_protocol(mine)  # the same again (a notebook cell re-run): silent
    with pytest.warns(UserWarning, match="protocol 'mine' was registered already; replaced"):
        xlvin.register_protocol(dataclasses.replace(mine, help="another"))
    with pytest.raises(UserError, match="'online' names a built-in protocol"):
        xlvin.register_protocol(dataclasses.replace(mine, name="online"))


def test_an_unknown_protocol_names_those_known(registry) -> None:
    registry["mine"] = dataclasses.replace(registry["online"], name="mine")
    with pytest.raises(UserError, match="must be one of online, low_data, curriculum, mine, got "
                                        "'bogus'"):
        protocol_of(RunConfig.from_json({"train": {"protocol": "bogus"}}, "test"))


def test_no_code_compares_a_protocol_name() -> None:
    """What a protocol does is asked of the registry (`protocol_of`); a built-in name is
    compared nowhere else (Table 1's `--protocol paper|ours` names its convention, not this)."""
    name = r"""["'](online|low_data|curriculum)["']"""
    compared = re.compile(rf"""protocol\s*(==|!=|in|not in)\s*[(\[{{]?\s*{name}|{name}\s*(==|!=)""")
    found = [f"{path.relative_to(SRC)}:{n}" for path in SRC.rglob("*.py")
             if path.name != "protocols.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if compared.search(line)]
    assert found == []
    assert compared.search('if t.protocol != "online":')  # the scan sees what was there
    assert compared.search('if cfg.train.protocol not in ("online", "low_data"):')
