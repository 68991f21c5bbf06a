"""A throwaway PostgreSQL server for tests: Debian's binaries, a cluster in a temporary directory.

initdb refuses to run as root: as root the cluster belongs to the ``postgres`` user the package
creates, and its commands run through ``runuser``. The server listens on 127.0.0.1 at a free port
(and a unix socket in its directory), takes passwords (scram-sha-256) over TCP, and is stopped
and removed at the end.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PASSWORD = "pg-Secret-4417-xyzzy"


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    user: str
    password: str
    dbname: str = "postgres"

    def url(self, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{self.user}:{self.password}@{self.host}:{self.port}/{self.dbname}"

    def conninfo(self) -> str:
        return (
            f"host={self.host} port={self.port} user={self.user} password={self.password} "
            f"dbname={self.dbname}"
        )


def binaries() -> str | None:
    """The directory of Debian's PostgreSQL server binaries (the newest), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_server(bin_dir: str) -> Iterator[Server]:
    """Start a fresh cluster; yield how to reach it; stop it and remove its files."""
    root = tempfile.mkdtemp(prefix="qloop-pg-")
    data, pwfile, log = (os.path.join(root, name) for name in ("data", "pw", "log"))
    with open(pwfile, "w") as handle:
        handle.write(PASSWORD + "\n")
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (root, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    port = _free_port()
    run = lambda args: subprocess.run(_as_owner(args), check=True, capture_output=True)  # noqa: E731
    run([f"{bin_dir}/initdb", "-D", data, "-U", user, f"--pwfile={pwfile}",
         "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8"])  # fmt: skip
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run([f"{bin_dir}/pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start"])
    try:
        yield Server("127.0.0.1", port, user, PASSWORD)
    finally:
        run([f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
