"""A real second host on this machine: a private OpenSSH server for a throwaway user.

:class:`LoopbackSshd` creates an unprivileged user of its own (unique name, HOME in a temporary
directory, no usable password), a host key and a client key made by ``ssh-keygen``, the
user's ``authorized_keys``, a ``known_hosts`` file with the host key, and an ``sshd_config`` of
its own (public key only, no PAM, ``StrictModes`` on, SFTP, no forwarding), then runs ``sshd -D``
on a free port of ``127.0.0.2`` (loopback, but not the address every other test server uses).
It stops that sshd, and every per-connection process it forked, by their own pids; at the end it
kills what the user left running (reporting it), removes the user with its HOME, and deletes the
directory.

It needs root (to create a user and to run an sshd that can log another user in), ``sshd``,
``ssh-keygen``, ``useradd`` and ``userdel``: CI has them (``.ci/run`` installs
``openssh-server``). :func:`unavailable` says why not, for a skip.

Also used by ``bench/ssh_host.py``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

SSHD = "/usr/sbin/sshd"
ADDRESS = "127.0.0.2"
#: sshd's privilege-separation directory (compiled in); Debian's service makes it at boot,
#: a container without an init system has none.
PRIVSEP_DIR = Path("/run/sshd")

_CONFIG = """\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile {pid_file}
AllowUsers {user}
AuthorizedKeysFile .ssh/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
StrictModes yes
PermitUserEnvironment no
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitTTY no
PrintMotd no
MaxSessions 10
Subsystem sftp internal-sftp
LogLevel VERBOSE
"""


def unavailable() -> str | None:
    """Why a :class:`LoopbackSshd` cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to create a test user and run sshd for it (CI runs as root)"
    for tool in (SSHD, "ssh-keygen", "useradd", "userdel"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install openssh-server)"
    return None


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


class LoopbackSshd:
    """See the module docstring. A context manager; :meth:`stop` and :meth:`start` cut the
    host off and bring it back (same address, port, keys and user)."""

    def __init__(self, address: str = ADDRESS) -> None:
        self.address = address
        self.user = f"bt{secrets.token_hex(5)}"
        self.root = Path(tempfile.mkdtemp(prefix="baton-sshd-"))
        self.root.chmod(0o755)  # the user's HOME is inside it
        self.home = self.root / "home"
        self.keys = self.root / "keys"
        self.port = _free_port(address)
        self.identity_file = self.keys / "client_ed25519"
        self.known_hosts_file = self.keys / "known_hosts"
        self.host_key = self.keys / "host_ed25519"
        self.config_file = self.keys / "sshd_config"
        self.log_file = self.keys / "sshd.log"
        self.uid = -1
        self.host_public_key = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._user_made = False

    # -- setup ----------------------------------------------------------------------------------

    def __enter__(self) -> LoopbackSshd:
        try:
            self._make()
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        self.keys.mkdir(mode=0o700)
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        subprocess.run(
            ["useradd", "--no-create-home", "--home-dir", str(self.home), "--shell", "/bin/bash",
             "--password", "*", "--comment", "baton test host user", self.user],
            check=True, capture_output=True,
        )  # fmt: skip
        self._user_made = True
        entry = pwd.getpwnam(self.user)
        self.uid = entry.pw_uid
        # StrictModes: HOME, ~/.ssh and authorized_keys must be the user's and not writable by
        # anyone else, or sshd ignores the keys.
        ssh_dir = self.home / ".ssh"
        ssh_dir.mkdir(parents=True)
        client_public = _keygen(self.identity_file, "baton-test-client")
        (ssh_dir / "authorized_keys").write_text(client_public + "\n")
        for path, mode in (
            (self.home, 0o700),
            (ssh_dir, 0o700),
            (ssh_dir / "authorized_keys", 0o600),
        ):
            os.chown(path, entry.pw_uid, entry.pw_gid)
            path.chmod(mode)
        self.host_public_key = _keygen(self.host_key, "baton-test-host")
        self.known_hosts_file.write_text(f"{self.known_hosts_entry(self.host_public_key)}\n")
        self.known_hosts_file.chmod(0o600)
        self.config_file.write_text(
            _CONFIG.format(
                address=self.address, port=self.port, host_key=self.host_key,
                pid_file=self.keys / "sshd.pid", user=self.user,
            )
        )  # fmt: skip

    def known_hosts_entry(self, public_key: str) -> str:
        """A ``known_hosts`` line binding ``public_key`` (``type base64 [comment]``) to this
        server's address and port."""
        kind, blob = public_key.split()[:2]
        return f"[{self.address}]:{self.port} {kind} {blob}"

    def ssh_config(self, **overrides: Any) -> dict[str, Any]:
        """The ``ssh`` object of a ``spawnea.hosts`` entry for this server."""
        return {
            "host": self.address,
            "port": self.port,
            "user": self.user,
            "identityFile": str(self.identity_file),
            "knownHostsFile": str(self.known_hosts_file),
            **overrides,
        }

    def secrets_in(self, text: str) -> list[str]:
        """Which of this host's address, port, user and key paths occur in ``text``."""
        needles = [self.address, str(self.port), self.user, str(self.identity_file),
                   str(self.known_hosts_file), str(self.keys)]  # fmt: skip
        return [needle for needle in needles if needle in text]

    # -- the server -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run sshd and wait until it answers with its SSH banner.

        Raises
        ------
        RuntimeError
            If sshd exits or does not answer within 10 s (with its log's tail).
        """
        assert self._proc is None, "sshd is running"
        log = open(self.log_file, "ab")  # noqa: SIM115 (handed to the child, closed below)
        try:
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config_file)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.address, self.port), timeout=1) as probe,
            ):
                if probe.recv(8).startswith(b"SSH-2.0"):
                    return
            time.sleep(0.05)
        tail = self.log_file.read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"sshd did not start: {tail}")

    @property
    def pid(self) -> int | None:
        """The listening sshd's pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    def connection_pids(self) -> list[int]:
        """The per-connection sshd processes (the listener forks one per client connection)."""
        if self._proc is None:
            return []
        with contextlib.suppress(psutil.NoSuchProcess):
            return [child.pid for child in psutil.Process(self._proc.pid).children()]
        return []

    def stop(self) -> None:
        """Cut the host off: stop the listener and every process it forked (its connections),
        by pid. Processes the user daemonised (a tmux server) are not its descendants and keep
        running, as on a host whose network went away."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        try:
            forked = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            forked = []
        for child in forked:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)
        psutil.wait_procs(forked, timeout=10)

    # -- teardown -------------------------------------------------------------------------------

    def user_processes(self) -> list[psutil.Process]:
        """Every process running as the test user."""
        found = []
        for proc in psutil.process_iter(["uids", "status"]):
            with contextlib.suppress(psutil.Error):
                if proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue  # already dead, waiting for its (killed) parent's reaper
                if proc.info["uids"] is not None and proc.info["uids"].real == self.uid:
                    found.append(proc)
        return found

    def close(self) -> list[str]:
        """Stop sshd, kill what the user left running, remove the user and the directory.
        Returns a description of each process that had been left (a test should leave none)."""
        self.stop()
        left: list[str] = []
        if self._user_made:
            stray = self.user_processes()
            for proc in stray:
                with contextlib.suppress(psutil.Error):
                    left.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
                    proc.kill()
            psutil.wait_procs(stray, timeout=10)
            subprocess.run(["userdel", "--remove", self.user], capture_output=True, check=False)
            self._user_made = False
        shutil.rmtree(self.root, ignore_errors=True)
        return left
