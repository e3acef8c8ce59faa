"""`gpuprov bench`: statistics, knee and verdict on synthetic timings; the client against a real
local HTTP server that streams chat completions the way llama-server does (chunked SSE, usage in
the last chunk, a fixed number of slots); the command line on both, and its JSON and HTML."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest
from typer.testing import CliRunner

from checks.reporting import schema
from provision import bench, bench_cli
from provision.bench import Level, Percentiles, Sample
from provision.cli import app

GOAL = 500.0
ROOT = Path(__file__).resolve().parents[1]


def level(concurrency: int, tok_s: float, ttft_p90: float | None, failed: int = 0) -> Level:
    ok = 8 - failed
    return Level(
        concurrency=concurrency,
        requests=8,
        succeeded=ok,
        failed=failed,
        errors=["HTTP 503: busy"] if failed else [],
        wall_seconds=1.0,
        ttft_ms=Percentiles(ttft_p90, ttft_p90, ttft_p90),
        itl_ms=Percentiles(10.0, 10.0, 10.0),
        latency_ms=Percentiles(1.0, 1.0, 1.0),
        stream_tok_s=Percentiles(100.0, 100.0, 100.0),
        aggregate_tok_s=tok_s,
        output_tokens=int(tok_s),
        tokens_from="usage" if ok else "none",
        prompt_tokens=None,
        meets_goal=ok == 8 and ttft_p90 is not None and ttft_p90 <= GOAL,
    )


# --- statistics on synthetic timings -------------------------------------------------------


def test_percentiles_interpolate_between_closest_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert bench.percentile(values, 50) == pytest.approx(50.5)
    assert bench.percentile(values, 90) == pytest.approx(90.1)
    assert bench.percentile(values, 99) == pytest.approx(99.01)
    assert bench.percentile([7.0], 99) == 7.0
    assert bench.percentile([], 50) is None


def test_summarize_measures_ttft_itl_and_throughput() -> None:
    # two requests side by side over 2 s: 11 tokens each, first token after 0.2 s / 0.4 s
    samples = [
        Sample(0.0, 1.2, first=0.2, last=1.2, chunks=11, usage_tokens=11, prompt_tokens=250),
        Sample(0.0, 2.0, first=0.4, last=2.0, chunks=11, usage_tokens=11, prompt_tokens=252),
    ]
    got = bench.summarize(2, samples, wall=2.0, goal_ms=GOAL)
    assert (got.succeeded, got.failed, got.output_tokens) == (2, 0, 22)
    assert got.ttft_ms.p50 == pytest.approx(300.0)
    assert got.ttft_ms.p90 == pytest.approx(380.0)
    assert got.itl_ms.p50 == pytest.approx(130.0)  # 100 ms and 160 ms per token after the first
    assert got.stream_tok_s.p50 == pytest.approx(8.125)  # 10 and 6.25 tok/s
    assert got.latency_ms.p90 == pytest.approx(1920.0)
    assert got.aggregate_tok_s == 11.0
    assert got.tokens_from == "usage" and got.prompt_tokens == 251.0
    assert got.meets_goal


def test_summarize_counts_chunks_without_usage_and_keeps_errors() -> None:
    samples = [
        Sample(0.0, 1.0, first=0.1, last=1.0, chunks=10),
        Sample(0.0, 0.1, error="HTTP 503: busy"),
        Sample(0.0, 0.1, error="HTTP 503: busy"),
    ]
    got = bench.summarize(3, samples, wall=1.0, goal_ms=GOAL)
    assert got.tokens_from == "chunks" and got.output_tokens == 10
    assert (got.succeeded, got.failed, got.errors) == (1, 2, ["HTTP 503: busy"])
    assert not got.meets_goal  # TTFT is fine, but requests failed


def test_a_level_where_every_request_failed_has_no_latencies() -> None:
    got = bench.summarize(4, [Sample(0.0, 0.1, error="timed out")] * 4, wall=0.1, goal_ms=GOAL)
    assert got.succeeded == 0 and got.tokens_from == "none" and got.ttft_ms.p90 is None
    assert got.aggregate_tok_s == 0.0 and not got.meets_goal


def test_knee_is_the_first_level_where_throughput_stalls_while_ttft_climbs() -> None:
    levels = [level(1, 50, 100), level(2, 95, 120), level(4, 100, 400), level(8, 101, 2100)]
    assert bench.knee(levels) == 2  # +5% tok/s, +233% TTFT


def test_no_knee_while_throughput_grows_or_ttft_holds() -> None:
    growing = [level(1, 50, 100), level(2, 95, 300), level(4, 105, 900)]  # +10.5%: still grows
    assert bench.knee(growing) is None
    flat_ttft = [level(1, 50, 100), level(2, 52, 149)]  # stalls, but TTFT +49%
    assert bench.knee(flat_ttft) is None
    assert bench.knee([level(1, 50, 100)]) is None


def test_verdict_names_the_users_within_the_goal_and_the_knee() -> None:
    levels = [level(1, 50, 100), level(2, 95, 120), level(4, 100, 400), level(8, 101, 2100)]
    text = bench.verdict(levels, GOAL, bench.knee(levels))
    assert text.startswith(
        "4 users at once with first token under 500 ms (p90); at 8 the first token takes 2.1 s "
        "(p90), over 500 ms"
    )
    assert "knee at 4: aggregate throughput +5% over 2 (100.0 tok/s)" in text


def test_verdict_without_a_limit_or_a_knee() -> None:
    levels = [level(1, 50, 100), level(2, 100, 110)]
    assert bench.verdict(levels, GOAL, None) == (
        "2 users at once with first token under 500 ms (p90): the goal held across the sweep; "
        "no knee within the sweep"
    )


def test_verdict_reports_failed_levels() -> None:
    levels = [level(1, 50, 900), level(2, 0, None, failed=8)]
    text = bench.verdict(levels, GOAL, None)
    assert text.startswith("even 1 user at once: the first token takes 900 ms (p90), over 500 ms")
    assert "at 2 8 of 8 failed" in text
    first = [level(1, 0, None, failed=8)]
    assert bench.verdict(first, GOAL, None).startswith(
        "even 1 user at once: every request failed (HTTP 503: busy)"
    )


@pytest.mark.parametrize(
    "line",
    ["", "data:", "data: {", "data: []", "data: 5", 'data: {"choices": 3}', "event: x",
     'data: {"choices": [{"delta": "x"}]}', 'data: {"usage": {"completion_tokens": true}}',
     "data: \x00\xff", 'data: {"choices": [null]}'],
)  # fmt: skip
def test_sse_lines_that_are_no_event_are_ignored(line: str) -> None:
    stream = bench.Stream()
    assert bench.read_line(stream, line) is False
    assert stream == bench.Stream()


def test_sse_events() -> None:
    stream = bench.Stream()
    assert bench.read_line(stream, 'data: {"choices":[{"delta":{"content":"Hi"}}]}')
    assert bench.read_line(stream, 'data:{"choices":[{"delta":{"reasoning_content":"so"}}]}')
    assert not bench.read_line(stream, 'data: {"choices":[{"delta":{"content":""}}]}')
    usage = '{"choices":[],"usage":{"completion_tokens":7,"prompt_tokens":3}}'
    assert not bench.read_line(stream, f"data: {usage}")
    assert (stream.chunks, stream.usage_tokens, stream.prompt_tokens) == (2, 7, 3)
    bench.read_line(stream, "data: [DONE]")
    assert stream.done
    failed = bench.Stream()
    bench.read_line(failed, 'data: {"error": {"message": "context exceeded", "code": 400}}')
    assert failed.error == "context exceeded"


def test_prompts_differ_per_request_and_have_the_asked_length_in_words() -> None:
    a, b = bench.prompt(256, 1), bench.prompt(256, 2)
    assert a != b and a.split(": ", 1)[0] == "Request 1"
    assert len(a.split()) == pytest.approx(256, abs=8)


def test_requests_per_level() -> None:
    assert bench.Load().count(8) == 32
    assert bench.Load(requests_per_level=5).count(8) == 8  # at least one per stream
    assert bench.Load(requests_per_level=5, duration=10).count(2) is None


# --- a real server ---------------------------------------------------------------------------


@dataclass
class Script:
    """How the local server behaves."""

    slots: int = 2  # requests decoded at once; the rest wait, as in llama-server's slots
    prefill: float = 0.002
    per_token: float = 0.004
    usage: bool = True
    fail_after: int | None = None  # answer 503 to every request after this many
    key: str = ""


class Handler(BaseHTTPRequestHandler):
    """llama-server's /v1/chat/completions as it streams: chunked SSE, usage last, [DONE]."""

    protocol_version = "HTTP/1.1"
    script = Script()
    seen = Path()  # each request's body, one JSON line each
    slots = threading.Semaphore(2)
    lock = threading.Lock()
    count: ClassVar[list[int]] = [0]

    def log_message(self, *_: Any) -> None:
        pass

    def reply(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self.reply(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    def chunk(self, data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        raw = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(raw):X}\r\n".encode() + raw + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        s = self.script
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.count[0] += 1
            number = self.count[0]
            with self.seen.open("a") as out:
                out.write(json.dumps(request) + "\n")
        if s.key and self.headers.get("Authorization") != f"Bearer {s.key}":
            self.reply(401, {"error": {"message": "Invalid API Key", "code": 401}})
            return
        if s.fail_after is not None and number > s.fail_after:
            self.reply(503, {"error": {"message": "Loading model", "code": 503}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with self.slots:
            time.sleep(s.prefill)
            for _ in range(request["max_tokens"]):
                time.sleep(s.per_token)
                self.chunk({"choices": [{"index": 0, "delta": {"content": "ok"}}]})
        self.chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        if s.usage and request.get("stream_options", {}).get("include_usage"):
            words = len(request["messages"][0]["content"].split())
            usage = {"completion_tokens": request["max_tokens"], "prompt_tokens": words}
            self.chunk({"choices": [], "usage": usage})
        self.chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")


def serve(settings: str, seen: str) -> None:
    """The server process: prints its port, serves until killed."""
    Handler.script = Script(**json.loads(settings))
    Handler.seen = Path(seen)
    Handler.slots = threading.Semaphore(Handler.script.slots)
    ThreadingHTTPServer.request_queue_size = 64
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


@dataclass
class Served:
    url: str
    log: Path

    def seen(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


Start = Callable[..., Served]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Start]:
    """start(**Script fields) -> Served: the server in a process of its own (a real socket, and
    no thread of it in this process, which loading an inventory monkey-patches with gevent)."""
    procs: list[subprocess.Popen[str]] = []

    def start(**settings: Any) -> Served:
        log = tmp_path / f"seen-{len(procs)}.jsonl"
        log.touch()
        argv = [sys.executable, "-m", "tests.test_bench", json.dumps(settings), str(log)]
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return Served(f"http://127.0.0.1:{port}/v1", log)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def run(url: str, levels: tuple[int, ...] = (1, 2, 4), **load: Any) -> bench.Bench:
    where = bench.endpoint(url, load.pop("key", ""))
    shape = {"prompt_tokens": 40, "output_tokens": 8, "requests_per_level": 8, **load}
    return bench.sweep(bench.Target(url, "tiny"), where, bench.Load(levels, **shape))


def test_sweep_against_a_streaming_server(server: Start) -> None:
    # A 30 ms prefill in the slot: each request holds a slot for 62 ms, so the few ms a stream
    # spends between its requests (more on a loaded machine) cannot lift 4 streams' throughput
    # 10% above 2's by filling those gaps.
    served = server(prefill=0.03)
    result = run(served.url)
    assert [lv.concurrency for lv in result.levels] == [1, 2, 4]
    for lv in result.levels:
        assert (lv.requests, lv.succeeded, lv.tokens_from) == (8, 8, "usage")
        assert lv.output_tokens == 8 * 8
        assert lv.prompt_tokens == pytest.approx(40, abs=8)
        assert lv.itl_ms.p50 is not None and lv.itl_ms.p50 >= 3.5  # 4 ms per token
    one, two, four = result.levels
    # two slots: 2 streams double the throughput, 4 only make half of them wait
    assert two.aggregate_tok_s > one.aggregate_tok_s * 1.5
    assert four.aggregate_tok_s < two.aggregate_tok_s * 1.2
    assert four.ttft_ms.p90 is not None and two.ttft_ms.p90 is not None
    assert four.ttft_ms.p90 > two.ttft_ms.p90 * 2 and four.ttft_ms.p90 >= 25
    assert result.knee == 4 and four.knee and not two.knee
    # every request streamed, asked for usage and exactly its output, with its own prompt
    posted = served.seen()
    assert len(posted) == 1 + 24  # the warm-up, then 8 per level
    assert all(p["stream"] and p["stream_options"] == {"include_usage": True} for p in posted)
    assert all(p["ignore_eos"] and p["max_tokens"] == 8 and p["model"] == "tiny" for p in posted)
    assert len({p["messages"][0]["content"] for p in posted}) == len(posted)


def test_without_usage_the_chunks_are_counted(server: Start) -> None:
    result = run(server(usage=False).url, (2,))
    assert result.levels[0].tokens_from == "chunks" and result.levels[0].output_tokens == 64


def test_a_level_for_a_duration(server: Start) -> None:
    result = run(server().url, (2,), requests_per_level=None, duration=1.0)
    lv = result.levels[0]
    assert lv.wall_seconds >= 1.0 and lv.requests >= 10 and lv.failed == 0


def test_a_level_where_every_request_failed_is_reported(server: Start) -> None:
    result = run(server(fail_after=1 + 8).url, (1, 2))  # the warm-up and the first level
    ok, failed = result.levels
    assert ok.succeeded == 8 and (failed.succeeded, failed.failed) == (0, 8)
    assert failed.errors == ['HTTP 503: {"error": {"message": "Loading model", "code": 503}}']
    assert result.broken and "at 2 every request failed (HTTP 503" in result.verdict


def test_the_api_key_is_sent(server: Start) -> None:
    url = server(key="s3cret").url
    with pytest.raises(bench.BenchError, match="the first request failed: HTTP 401"):
        run(url, (1,))
    assert run(url, (1,), key="s3cret").levels[0].succeeded == 8


# --- the command line --------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["bench", *args], env=env)


def test_cli_json_validates_and_html_is_self_contained(server: Start, tmp_path: Path) -> None:
    url = server().url
    page = tmp_path / "bench.html"
    args = ["--url", url, "--concurrency", "1,2", "--requests-per-level", "4"]
    done = cli(
        *args, "--output-tokens", "6", "--prompt-tokens", "30", "--json", "--html", str(page)
    )
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema.committed("bench"))
    assert data["schema_version"] == bench.BENCH_SCHEMA_VERSION
    assert data["target"]["model"] == "tiny"  # the first model GET /v1/models lists
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "extra": 1}, schema.committed("bench"))
    text = page.read_text()
    assert (
        "<svg" in text
        and "<script" not in text
        and "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(url, "")
    )
    assert text.count("<rect") == 2


def test_cli_text_view_shows_each_level_and_the_verdict(server: Start) -> None:
    url = server().url
    done = cli("--url", url, "--concurrency", "1,2", "--requests-per-level", "2")
    assert done.exit_code == 0, done.output
    assert re.search(r"^\s+1\s+2/2\s", done.stdout, re.M)
    assert re.search(r"^\s+2\s+2/2\s", done.stdout, re.M)
    assert "verdict   2 users at once with first token under 500 ms" in done.stdout
    assert "tokens    from the server's usage" in done.stdout
    assert "concurrency 2: 2 requests ..." in done.stderr  # progress per level


def test_cli_exits_1_when_a_level_failed_entirely(server: Start) -> None:
    url = server(fail_after=1).url
    done = cli("--url", url, "--concurrency", "1", "--requests-per-level", "2")
    assert done.exit_code == 1
    assert "every request failed" in done.stdout


def test_cli_unreachable_url_exits_2_with_the_reason() -> None:
    done = cli("--url", "http://127.0.0.1:9/v1", "--model", "x")
    assert done.exit_code == 2
    assert "http://127.0.0.1:9/v1: the first request failed: ConnectionRefusedError" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://x/v1"], "not an http(s) URL"),
        (["--url", "http://h:1/v1", "--concurrency", "1,x"], "numbers 1-4096"),
        (["--url", "http://h:1/v1", "--duration", "5", "--requests-per-level", "3"], "not both"),
        ([], "give INVENTORY SERVICE, or --url"),
        (["--url", "http://h:1/v1", "--api-key-env", "GPUPROV_NO_SUCH_VAR"], "not set here"),
    ],
)
def test_cli_bad_input_exits_2(args: list[str], message: str) -> None:
    done = cli(*args)
    assert done.exit_code == 2 and message in done.stderr, done.output


# --- services of an inventory ------------------------------------------------------------------


def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own: loading an inventory imports pyinfra_cli, whose
    import monkey-patches this process with gevent for good."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "gpuprov"), "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def inventory(tmp_path: Path, port: int, **extra: Any) -> Path:
    data = {
        "llama_server_profiles": [
            {"name": "alpha", "model": "/srv/m.gguf", "port": port, "alias": "tiny"},
            {"name": "beta", "model": "/srv/m.gguf", "port": port + 1},
        ],
        **extra,
    }
    path = tmp_path / "inv.py"
    path.write_text(f"hosts = [('@local', {data!r})]\n")
    return path


def test_cli_measures_a_service_of_the_inventory(server: Start, tmp_path: Path) -> None:
    url = server().url
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    path = inventory(tmp_path, port)
    done = cli_process(
        str(path), "alpha", "--concurrency", "1", "--requests-per-level", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    target = json.loads(done.stdout)["target"]
    assert target == {
        "url": f"http://127.0.0.1:{port}/v1",
        "model": "tiny",
        "service": "alpha",
        "host": "@local",
        "reached_through": None,
    }


def test_cli_unknown_service_exits_2_naming_the_services(tmp_path: Path) -> None:
    path = inventory(tmp_path, 8081, nginx_lb_enabled=True, nginx_lb_servers=["127.0.0.1:8081"])
    done = cli_process(str(path), "gamma")
    assert done.returncode == 2
    assert "no service 'gamma'; the inventory has: alpha (@local), balancer (@local), beta" in (
        done.stderr
    )


def test_services_of_a_stack() -> None:
    from provision import stack

    data = {
        "vllm_replicas": [
            {"name": "q1", "model": "org/m", "port": 8500, "gpus": [0], "served_model_name": "q"},
            {"name": "q2", "model": "org/m", "port": 8501, "gpus": [1], "api_key_env": "K"},
        ],
        "nginx_lb_enabled": True,
        "nginx_lb_listen": 8400,
    }
    found = bench_cli.services("gpu1", stack.from_data(data))
    assert [(s.name, s.kind, s.bind, s.port, s.model) for s in found] == [
        ("q1", "vllm", "127.0.0.1", 8500, "q"),
        ("q2", "vllm", "127.0.0.1", 8501, "org/m"),
        ("balancer", "balancer", "127.0.0.1", 8400, "org/m"),
    ]
    assert found[-1].api_key_env == "K"


def test_a_loopback_service_of_a_remote_host_is_reached_through_ssh() -> None:
    remote = bench_cli.Service("gpu1.lan", "alpha", "llama", "127.0.0.1", 8081, "m")
    assert bench_cli.needs_tunnel(remote)
    data = {"ssh_user": "root", "ssh_port": 2222, "ssh_key": "/k", "ssh_known_hosts_file": "/kh"}
    argv = bench_cli.ssh_command(remote, data, 40000)
    assert argv[:2] == ["ssh", "-N"] and argv[-1] == "root@gpu1.lan"
    assert "127.0.0.1:40000:127.0.0.1:8081" in argv
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/k"
    assert "UserKnownHostsFile=/kh" in argv
    everywhere = bench_cli.Service("gpu1.lan", "alpha", "llama", "0.0.0.0", 8081, "m")
    assert not bench_cli.needs_tunnel(everywhere) and bench_cli.reach(everywhere) == "gpu1.lan"
    local = bench_cli.Service("@local", "alpha", "llama", "127.0.0.1", 8081, "m")
    assert not bench_cli.needs_tunnel(local) and bench_cli.reach(local) == "127.0.0.1"


def test_the_schema_follows_the_dataclasses() -> None:
    assert schema.committed("bench") == schema.bench_schema()
    assert schema.committed("bench")["properties"]["schema_version"] == {
        "const": bench.BENCH_SCHEMA_VERSION
    }


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
