"""A real S3-compatible server for tests: moto's server mode (``moto[server]``, the ``dev`` extra) in a
subprocess on 127.0.0.1, and the standard ``AWS_*`` environment that points pyarrow's S3 file system at
it (Ray workers started while it is set inherit it, as a cluster's nodes get theirs from their own
environment or instance profile)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pyarrow.fs as pafs

#: The secret key the server is given: no file kifqa writes may hold it.
SECRET = "kifqa-s3cret-0123456789"


@dataclass(frozen=True)
class S3Server:
    """A running server with one bucket."""

    endpoint: str
    bucket: str

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def fs(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(endpoint_override=self.endpoint, access_key="kifqa-test", secret_key=SECRET,
                                 region="us-east-1", allow_bucket_creation=True)

    def objects(self, prefix: str) -> dict[str, bytes]:
        """Every object under ``prefix`` of the bucket, by key."""
        fs = self.fs()
        selector = pafs.FileSelector(f"{self.bucket}/{prefix}", recursive=True, allow_not_found=True)
        found = {}
        for info in fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                with fs.open_input_stream(info.path) as stream:
                    found[info.path.removeprefix(f"{self.bucket}/")] = stream.read()
        return found

    def put(self, key: str, data: bytes) -> None:
        with self.fs().open_output_stream(f"{self.bucket}/{key}") as stream:
            stream.write(data)


@contextmanager
def s3_server(bucket: str = "kifqa") -> Iterator[S3Server]:
    """Starts the server, sets the ``AWS_*`` environment for it and creates ``bucket``; undoes all three."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(endpoint, timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "moto's server did not start"
                time.sleep(0.2)
        with aws_environment(endpoint):
            running = S3Server(endpoint, bucket)
            running.fs().create_dir(bucket)
            yield running
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def aws_environment(endpoint: str, *, key: str = "kifqa-test", secret: str = SECRET) -> Iterator[None]:
    """The standard ``AWS_*`` environment that points S3 clients (pyarrow's, a Ray worker's started meanwhile) at
    ``endpoint`` with the credentials ``key`` and ``secret``, never at AWS's metadata service; the earlier
    environment comes back after."""
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
