"""Issue 47, `lengthwise serve` used as a careless or hostile user would: key files that are a device, a FIFO or a
large file; the `[serve]` extra missing; a file given as the index; a host that is no address; and, over HTTP,
bodies the JSON parser trips on, a lexical query of stop words, what `/info` and `/docs` show, and a client stalled
when SIGTERM comes.

The HTTP cases run the real server: the setup builds a tiny index and starts a driver process that finds the
server's port (psutil: the listening socket of the `serve` process of this case's folder), sends its requests,
writes what it got to ``answers.json`` and stops the server with SIGTERM; the case is the server's exit and what
the driver saw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context

NO_INDEX = "{tmp}/missing"  # the key file, the host and the extra are checked before the index is opened

_DRIVER = r"""
import json, os, signal, socket, sys, time
from pathlib import Path
import psutil

folder = Path(sys.argv[1])
mode = sys.argv[2]


def server():
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        for process in psutil.process_iter(["cmdline"]):
            line = process.info["cmdline"] or []
            if "serve" in line and str(folder / "i") in line:
                try:
                    ports = [c.laddr.port for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
                except psutil.Error:
                    ports = []
                if ports:
                    return process, ports[0]
        time.sleep(0.3)
    raise SystemExit("no server")


def ask(port, method, path, body=b"", timeout=60):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(head.encode() + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = payload.partition(b"\r\n")
        payload = rest[: int(size, 16)]
    return status, payload.decode("utf-8", "replace")


process, port = server()
time.sleep(3)  # the ready line, and the model's warm-up
answers = {}
stopped = False  # one SIGTERM only: a second one during the shutdown forces the exit
try:
    if mode == "bodies":
        bodies = {"invalid-utf8": b'{"queries": ["the old \xff bridge"]}',
                  "deep": b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                  "digits": b'{"queries": ["river"], "k": ' + b"9" * 5000 + b"}",
                  "stop-words-second": b'{"queries": ["river", "the of and"], "mode": "lexical"}'}
        for name, body in bodies.items():
            status, text = ask(port, "POST", "/search", body)
            answers[name] = [status, json.loads(text).get("field")]
    elif mode == "info":
        for path in ("/info", "/docs", "/redoc", "/openapi.json"):
            status, text = ask(port, "GET", path)
            answers[path] = [status, text]
    elif mode == "ids-and-top-k":  # issue 62.9
        bodies = {"duplicate-ids": {"queries": [{"id": "a", "text": "river"}, {"id": "a", "text": "bridge"}]},
                  "top_k": {"queries": ["river"], "top_k": 2}, "k": {"queries": ["river"], "k": 2},
                  "both": {"queries": ["river"], "top_k": 2, "k": 2}}
        for name, body in bodies.items():
            status, text = ask(port, "POST", "/search", json.dumps(body).encode())
            got = json.loads(text)
            answers[name] = [status, got.get("field"), got.get("detail")] if status != 200 else [
                status, [len(result["hits"]) for result in got["results"]]]
    elif mode == "stalled":
        with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
            sock.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"queries\"")
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            stopped = True
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        answers["stalled"] = [int(head.split()[1]) if head else None, body.decode("utf-8", "replace")]
finally:
    (folder / "answers.json").write_text(json.dumps(answers))
    if not stopped and process.is_running():
        process.send_signal(signal.SIGTERM)
"""


def _run(tmp: Path, argv: list[str], context: Context) -> None:
    argv = [part.format(tmp=tmp, tiny=context.tiny_model) for part in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], cwd=tmp, env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"setup `lengthwise {' '.join(argv)}` failed: {done.stdout}{done.stderr}")


def _driven(mode: str):
    """A setup: a tiny index with its text at {tmp}/i, and the driver of `mode` started beside the server."""

    def setup(tmp: Path, context: Context) -> None:
        rows = [{"_id": f"d{i}", "text": f"document {i} about the river and the old bridge"} for i in range(6)]
        (tmp / "c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        _run(tmp, ["encode", "-d", "c.jsonl", "-o", "e", "-m", "{tiny}", "--long", "multi-vector", "--window", "16"],
             context)  # fmt: skip
        _run(tmp, ["index", "build", "e", "--out", "i"], context)
        (tmp / "driver.py").write_text(_DRIVER, encoding="utf-8")
        log = (tmp / "driver.log").open("w")
        subprocess.Popen([sys.executable, str(tmp / "driver.py"), str(tmp), mode], stdout=log, stderr=log,
                         start_new_session=True)  # fmt: skip

    return setup


def _answers(tmp: Path) -> dict:
    path = tmp / "answers.json"
    if not path.is_file():
        log = tmp / "driver.log"
        return {"error": log.read_text()[-300:] if log.is_file() else "the driver wrote nothing"}
    return json.loads(path.read_text())


def _bodies_named(tmp: Path, _: str) -> str | None:
    got = _answers(tmp)
    wanted = {"invalid-utf8": [422, "body"], "deep": [422, "body"], "digits": [422, "body"],
              "stop-words-second": [422, "queries[1]"]}  # fmt: skip
    return None if got == wanted else f"got {got}"


def _info_private(tmp: Path, _: str) -> str | None:
    got = _answers(tmp)
    if "/info" not in got:
        return f"got {got}"
    if got["/info"][0] != 200 or str(tmp) in got["/info"][1]:
        return f"/info: {got['/info'][0]}, {'shows the server paths' if str(tmp) in got['/info'][1] else ''}"
    if got["/docs"][0] != 404 or got["/redoc"][0] != 404 or got["/openapi.json"][0] != 200:
        return f"/docs {got['/docs'][0]}, /redoc {got['/redoc'][0]}, /openapi.json {got['/openapi.json'][0]}"
    return None


def _stalled_503(tmp: Path, output: str) -> str | None:
    got = _answers(tmp).get("stalled")
    if not got or got[0] != 503:
        return f"the stalled client got {got}"
    return "the log has a CancelledError" if "CancelledError" in output else None


def _fifo(tmp: Path, _: Context) -> None:
    os.mkfifo(tmp / "key")


def _large_key(tmp: Path, _: Context) -> None:
    (tmp / "key").write_bytes(b"x" * 1_000_000)


def _blocked(module: str):
    """A setup: `module` made unimportable for the case (a file of its name first on the path, in the cwd)."""

    def setup(tmp: Path, _: Context) -> None:
        message = f"No module named {module!r}"
        (tmp / f"{module}.py").write_text(f"raise ModuleNotFoundError({message!r}, name={module!r})\n")
        (tmp / "c.jsonl").write_text('{"_id": "a", "text": "some text"}\n', encoding="utf-8")

    return setup


def _a_file(tmp: Path, _: Context) -> None:
    (tmp / "index.json").write_text("{}\n", encoding="utf-8")


def _no_warning(tmp: Path, output: str) -> str | None:
    return "a warning was printed before the error" if "warning" in output else None


CASES: list[Case] = [
    Case(
        "serve-api-key-file-dev-zero",
        "47.7",
        ["serve", NO_INDEX, "--api-key-file", "/dev/zero"],
        2,
        "is not a regular file",
        timeout=60,
    ),
    Case(
        "serve-api-key-file-fifo",
        "47.7",
        ["serve", NO_INDEX, "--api-key-file", "{tmp}/key"],
        2,
        "is not a regular file",
        _fifo,
        timeout=60,
    ),
    Case(
        "serve-api-key-file-large",
        "47.7",
        ["serve", NO_INDEX, "--api-key-file", "{tmp}/key"],
        2,
        "1,000,000 bytes",
        _large_key,
        timeout=60,
    ),
    Case(
        "serve-without-fastapi",
        "47.8",
        ["serve", NO_INDEX],
        2,
        "pip install 'lengthwise[serve]'",
        _blocked("fastapi"),
        timeout=60,
    ),
    Case(
        "encode-ray-without-ray",
        "47.8",
        ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/o", "-m", "/nonexistent/m", "--runner", "ray"],
        2,
        "pip install 'lengthwise[ray]'",
        _blocked("ray"),
        timeout=60,
    ),
    Case("serve-a-file", "47", ["serve", "{tmp}/index.json"], 2, "not a folder", _a_file, timeout=60),
    Case(
        "serve-host-no-address",
        "47",
        ["serve", NO_INDEX, "--host", "no-such-host.invalid"],
        2,
        "error: --host",
        check=_no_warning,
        timeout=60,
    ),
    Case(
        "serve-malformed-bodies",
        "47.10",
        ["serve", "{tmp}/i", "--port", "0"],
        0,
        "stopped",
        _driven("bodies"),
        _bodies_named,
    ),
    Case(
        "serve-info-and-docs", "47", ["serve", "{tmp}/i", "--port", "0"], 0, "stopped", _driven("info"), _info_private
    ),
    Case(
        "serve-sigterm-stalled-client",
        "47.9",
        ["serve", "{tmp}/i", "--port", "0"],
        0,
        "stopped",
        _driven("stalled"),
        _stalled_503,
    ),
]
