"""deploy/systemd/: `systemd-analyze verify` accepts lmcc.service (with its
ExecStart pointed at this build's lmcc: verify wants the binary to exist),
the example /etc/lmcc/lmcc.yaml is a configuration `lmcc node` accepts under
the unit's command line, and the unit gives it what it needs: its data dir is
the unit's StateDirectory, and the stop timeout covers a clean stop."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess

import pytest

from lmcc_deploy import REPO, clean_stop_bound_s, dump_config, known_keys, require_binary, yaml

from conftest import BINARY  # noqa: E402

SYSTEMD = REPO / "deploy" / "systemd"
UNIT = SYSTEMD / "lmcc.service"
EXAMPLE = SYSTEMD / "lmcc.yaml"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def seconds(value: str) -> float:
    """A systemd time span: "60", "60s", "1min 30s", "2m"."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "ms": 0.001}
    total = 0.0
    for number, unit_name in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit_name]
    return total


def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    require_binary()
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is missing (Debian's systemd package has it; "
                    "deploy/install-deps.sh installs it)")
    exec_start = unit()["Service"]["ExecStart"]
    binary = shlex.split(exec_start)[0]
    copy = tmp_path / "lmcc.service"
    copy.write_text(UNIT.read_text().replace(binary, str(BINARY)))
    r = subprocess.run([tool, "verify", "--man=no", str(copy)], capture_output=True, text=True,
                       timeout=60)
    # verify also prints warnings (an unknown key, say) and still exits 0.
    output = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and not output, f"systemd-analyze verify:\n{output}"


def test_the_example_config_runs_under_the_units_command(tmp_path):
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[1] == "node"
    # %d is systemd's credentials directory, where LoadCredential puts the secret.
    credential, source = service["LoadCredential"].split(":", 1)
    assert source == "/etc/lmcc/cluster.secret"
    secret = tmp_path / credential
    secret.write_text(os.urandom(32).hex())
    args = [a.replace("%d", str(tmp_path)) for a in argv[2:]]
    assert args[args.index("--config") + 1] == "/etc/lmcc/lmcc.yaml"
    args[args.index("--config") + 1] = str(EXAMPLE)
    given = yaml.safe_load(EXAMPLE.read_text())
    keys = known_keys()
    assert set(given) <= keys, f"keys lmcc node does not know (it ignores them): {set(given) - keys}"
    cfg = dump_config(*args)
    assert cfg["lmcc_cluster_secret_file"] == str(secret)
    assert cfg["lmcc_data_dir"] == "/var/lib/" + service["StateDirectory"]
    assert cfg["lmcc_node_id"] in [m["id"] for m in cfg["lmcc_cluster_members"]]
    assert seconds(service["TimeoutStopSec"]) > clean_stop_bound_s(cfg)
    assert service["Restart"] == "on-failure"
    assert service.get("DynamicUser") == "yes" or service.get("User")
    assert int(service["LimitNOFILE"]) >= 65536


def test_the_tls_credentials_the_example_names_are_the_ones_the_unit_hands_over(tmp_path):
    """TLS between nodes is switched on by uncommenting LoadCredential= lines
    in the unit and keys in lmcc.yaml: the keys name those credentials in the
    unit's credentials directory, and the example with them uncommented runs
    under the unit's command."""
    shown = dict(re.findall(r"^#LoadCredential=([^:\s]+):(\S+)$", UNIT.read_text(), re.M))
    keys = dict(re.findall(r"^#\s*(lmcc_cluster_tls_[a-z_]+):\s*(\S+)$", EXAMPLE.read_text(), re.M))
    assert set(keys) == {"lmcc_cluster_tls_ca_file", "lmcc_cluster_tls_cert_file",
                         "lmcc_cluster_tls_key_file"}
    directory = f"/run/credentials/{UNIT.name}"
    assert {os.path.dirname(p) for p in keys.values()} == {directory}
    assert {os.path.basename(p) for p in keys.values()} == set(shown)
    assert all(source.startswith("/etc/lmcc/") for source in shown.values())
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    secret = tmp_path / "cluster.secret"
    secret.write_text(os.urandom(32).hex())
    args = [a.replace("%d", str(tmp_path)) for a in argv[2:]]
    example = tmp_path / "lmcc.yaml"
    example.write_text(re.sub(r"^#\s*(lmcc_cluster_tls_)", r"\1", EXAMPLE.read_text(), flags=re.M))
    args[args.index("--config") + 1] = str(example)
    cfg = dump_config(*args)
    for key, path in keys.items():
        assert cfg[key] == path
