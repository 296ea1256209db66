"""`host.address: local` on a machine where a user systemd manager runs (a workstation): units go to
`systemctl --user`. Run for real inside the lab host, as a non-root account with its own manager."""

from __future__ import annotations

import json

import pytest

from k26ctl.lab.host import INNER_PROJECT_DIR, LabHostState
from k26ctl.remote.ssh import SSHHost
from tests.support.hosts import ssh_host

pytestmark = pytest.mark.labhost

ACCOUNT = "k26usr"
# A copy of the package the account can read: the checkout may sit in a directory only root may enter
# (mktemp -d makes one), and its bind mounts on the host keep that mode.
USER_SRC = "/opt/k26lab/user-src"

# Runs on the lab host as ACCOUNT with the lab venv: k26ctl's LocalHost and Systemd, nothing mocked.
SCRIPT = r"""
import json, os, time
from k26ctl.profile import Profile
from k26ctl.remote import connect
from k26ctl.remote.systemd import Systemd

host = connect(Profile.model_validate({"host": {"address": "local"}}))
sd = Systemd(host, "k26t-user.service")
out = {"user_manager": host.user_manager, "systemd_user": sd.user}
unit_dir = os.path.expanduser("~/.config/systemd/user")
os.makedirs(unit_dir, exist_ok=True)
unit = b"[Service]\nExecStart=/bin/sh -c 'echo user-unit-ready; exec sleep 60'\n"
out["changed"] = host.write_file_atomic(unit_dir + "/k26t-user.service", unit).changed
cursor = sd.cursor_now()
sd.daemon_reload()
sd.restart()
out["active"] = sd.is_active()
out["main_pid_uid"] = os.stat(f"/proc/{sd.show('MainPID')['MainPID']}").st_uid
deadline = time.monotonic() + 10
messages = []
while time.monotonic() < deadline and "user-unit-ready" not in messages:
    messages = [e.message for e in sd.journal(cursor=cursor)]
    time.sleep(0.1)
out["messages"] = messages
sd.stop()
out["after_stop"] = sd.is_active()
print(json.dumps(out))
"""


@pytest.fixture
def account_with_manager(host: SSHHost) -> str:
    create = f"id {ACCOUNT} >/dev/null 2>&1 || useradd -m -s /bin/sh -p '*' {ACCOUNT}"
    host.run(["sh", "-c", create], check=True)
    uid = host.run(["id", "-u", ACCOUNT], check=True).stdout.strip()
    host.run(["systemctl", "start", f"user@{uid}.service"], check=True)
    copy = f"rm -rf {USER_SRC} && mkdir -p {USER_SRC} && cp -r {INNER_PROJECT_DIR}/k26ctl {USER_SRC}/"
    host.run(["sh", "-c", f"{copy} && chmod -R a+rX {USER_SRC}"], check=True)
    return uid


def test_local_host_uses_the_user_manager(lab_host: LabHostState, account_with_manager: str) -> None:
    with ssh_host(lab_host, user=ACCOUNT).open() as h:
        res = h.run(
            ["env", f"PYTHONPATH={USER_SRC}", "/opt/k26lab/venv/bin/python", "-c", SCRIPT], timeout=120
        )
    assert res.ok, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["user_manager"] is True and out["systemd_user"] is True
    assert out["changed"] is True
    assert out["active"] == "active"
    assert out["main_pid_uid"] == int(account_with_manager)
    assert "user-unit-ready" in out["messages"]
    assert out["after_stop"] == "inactive"
