"""`gpuprov bench`: a concurrency sweep of streamed chat completions, and what it says.

A small client of gpuprov's own (http.client, one thread per concurrent stream) and not GuideLLM
or `vllm bench serve`: those need a Hugging Face tokenizer for their synthetic prompts, and the
second the whole vLLM package, where gpuprov must measure a llama-server serving a GGUF file from
a machine with neither. Both llama-server and vLLM serve /v1/chat/completions with `stream: true`,
`stream_options.include_usage` and `ignore_eos`, so every request asks for exactly the output it
measures and the server's own token count comes back in the last chunk.

Definitions (each over the level's successful requests): TTFT is the time from sending a request
to the first chunk with generated text; inter-token latency (ITL) is a request's time from its
first to its last text chunk over its output tokens less one; a stream's tok/s is the inverse
of its ITL; aggregate tok/s is every output token of the level over its wall time. Output tokens
are the server's `usage.completion_tokens`, else the text chunks counted (`tokens_from` says
which). Everything but the HTTP request is pure and takes recorded timings.
"""

from __future__ import annotations

import http.client
import itertools
import json
import math
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

BENCH_SCHEMA_VERSION = 1
CONCURRENCY = (1, 2, 4, 8)
# GuideLLM's documented synthetic workload, "prompt_tokens=256,output_tokens=128"
# (https://blog.vllm.ai/guidellm/main/getting-started/benchmark).
PROMPT_TOKENS = 256
OUTPUT_TOKENS = 128
TTFT_GOAL_MS = 500.0
REQUESTS_PER_STREAM = 4  # a level's requests when neither --requests-per-level nor --duration
KNEE_THROUGHPUT_GROWTH = 0.10  # aggregate tok/s growing less than this ...
KNEE_TTFT_GROWTH = 0.50  # ... while TTFT p90 grows at least this much: the knee
ERRORS_KEPT = 3
# Common words that most BPE vocabularies hold as one token each (with their leading space).
_WORDS = (
    "the of and to in is was for on are with as at be by this had not but from or have an they "
    "which one you were all we her she there would their will when who him been has more if no "
    "out so said what up its about into than them can only other new some time could these two "
    "may first then do any like my now over such our man me even most made after also did many "
    "before must through back years where much your way well down should because each just those"
)
WORDS = tuple(_WORDS.split())


class BenchError(Exception):
    """The target cannot be measured (unreachable, refused the first request): exit 2."""


@dataclass(frozen=True)
class Sample:
    """One request as the client saw it; times in seconds from the level's start."""

    start: float
    end: float
    error: str = ""
    first: float | None = None  # the first chunk with generated text
    last: float | None = None  # the last one
    chunks: int = 0  # chunks with generated text
    usage_tokens: int | None = None  # usage.completion_tokens, when the server sent it
    prompt_tokens: int | None = None  # usage.prompt_tokens

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else self.chunks


@dataclass(frozen=True)
class Percentiles:
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass(frozen=True)
class Level:
    """One concurrency level of the sweep; latencies in ms, throughput in output tok/s."""

    concurrency: int
    requests: int
    succeeded: int
    failed: int
    errors: list[str]  # the first few distinct errors
    wall_seconds: float
    ttft_ms: Percentiles
    itl_ms: Percentiles
    latency_ms: Percentiles
    stream_tok_s: Percentiles
    aggregate_tok_s: float
    output_tokens: int
    tokens_from: str  # usage, chunks, mixed, none
    prompt_tokens: float | None  # the mean of the server's usage.prompt_tokens
    meets_goal: bool  # TTFT p90 within the goal and no request failed
    knee: bool = False


@dataclass(frozen=True)
class Target:
    """What was measured: the OpenAI base URL and, from an inventory, which service where."""

    url: str
    model: str | None
    service: str | None = None
    host: str | None = None
    reached_through: str | None = None  # "ssh -L ..." when the service listens on loopback


@dataclass(frozen=True)
class Bench:
    """`gpuprov bench`: the load, each level, the knee and the verdict."""

    target: Target
    engine: str
    prompt_tokens: int
    output_tokens: int
    requests_per_level: int | None
    duration_seconds: float | None
    ttft_goal_ms: float
    levels: list[Level] = field(default_factory=list)
    knee: int | None = None  # the concurrency of the knee
    verdict: str = ""

    @property
    def broken(self) -> bool:
        """Some level where every request failed."""
        return any(level.succeeded == 0 for level in self.levels)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": BENCH_SCHEMA_VERSION, **asdict(self)}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between closest ranks; None if none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(values: Sequence[float]) -> Percentiles:
    return Percentiles(*(_round(percentile(values, q)) for q in (50, 90, 99)))


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def itl(sample: Sample) -> float | None:
    """Seconds per output token after the first; None with fewer than two tokens."""
    if sample.first is None or sample.last is None or sample.tokens < 2:
        return None
    return (sample.last - sample.first) / (sample.tokens - 1)


def summarize(concurrency: int, samples: Sequence[Sample], wall: float, goal_ms: float) -> Level:
    """One level's statistics from its requests and its wall time in seconds."""
    good = [s for s in samples if s.ok]
    ttft = [(s.first - s.start) * 1000 for s in good if s.first is not None]
    gaps = [g for g in (itl(s) for s in good) if g is not None]
    tokens = sum(s.tokens for s in good)
    usage = sum(s.usage_tokens is not None for s in good)
    source = "none" if not good else "usage" if usage == len(good) else "chunks"
    if good and 0 < usage < len(good):
        source = "mixed"
    prompts = [s.prompt_tokens for s in good if s.prompt_tokens is not None]
    errors: list[str] = []
    for s in samples:
        if s.error and s.error not in errors and len(errors) < ERRORS_KEPT:
            errors.append(s.error)
    ttft_ms = percentiles(ttft)
    return Level(
        concurrency=concurrency,
        requests=len(samples),
        succeeded=len(good),
        failed=len(samples) - len(good),
        errors=errors,
        wall_seconds=round(wall, 3),
        ttft_ms=ttft_ms,
        itl_ms=percentiles([g * 1000 for g in gaps]),
        latency_ms=percentiles([(s.end - s.start) * 1000 for s in good]),
        stream_tok_s=percentiles([1 / g for g in gaps if g > 0]),
        aggregate_tok_s=round(tokens / wall, 2) if wall > 0 else 0.0,
        output_tokens=tokens,
        tokens_from=source,
        prompt_tokens=round(sum(prompts) / len(prompts), 1) if prompts else None,
        meets_goal=bool(good) and len(good) == len(samples) and _within(ttft_ms.p90, goal_ms),
    )


def _within(value: float | None, goal: float) -> bool:
    return value is not None and value <= goal


def knee(levels: Sequence[Level]) -> int | None:
    """Index of the first level whose aggregate tok/s grew less than 10% over the level before
    while its TTFT p90 grew 50% or more; None when no level of the sweep does."""
    for i in range(1, len(levels)):
        before, now = levels[i - 1], levels[i]
        if not before.aggregate_tok_s or before.ttft_ms.p90 is None or now.ttft_ms.p90 is None:
            continue
        throughput = now.aggregate_tok_s / before.aggregate_tok_s - 1
        ttft = now.ttft_ms.p90 / max(before.ttft_ms.p90, 1e-9) - 1
        if throughput < KNEE_THROUGHPUT_GROWTH and ttft >= KNEE_TTFT_GROWTH:
            return i
    return None


def duration(ms: float) -> str:
    """0.4 ms, 420 ms, 2.1 s."""
    if ms < 10:
        return f"{ms:.1f} ms"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _users(n: int) -> str:
    return f"{n} user{'s' if n != 1 else ''} at once"


def verdict(levels: Sequence[Level], goal_ms: float, knee_at: int | None) -> str:
    """The sweep in plain words: how many users get the first token within the goal, the knee,
    and every level where requests failed."""
    if not levels:
        return "nothing was measured"
    goal = duration(goal_ms)
    first_miss = next((i for i, level in enumerate(levels) if not level.meets_goal), None)
    if first_miss is None:
        top = levels[-1].concurrency
        words = [
            f"{_users(top)} with first token under {goal} (p90): the goal held across the sweep"
        ]
    else:
        miss = levels[first_miss]
        how = _miss(miss, goal)
        if first_miss == 0:
            words = [f"even {_users(miss.concurrency)}: {how}"]
        else:
            ok = levels[first_miss - 1].concurrency
            words = [
                f"{_users(ok)} with first token under {goal} (p90); at {miss.concurrency} {how}"
            ]
    if knee_at is None:
        words.append("no knee within the sweep")
    else:
        before, now = levels[knee_at - 1], levels[knee_at]
        grew = (now.aggregate_tok_s / before.aggregate_tok_s - 1) * 100
        words.append(
            f"knee at {now.concurrency}: aggregate throughput {grew:+.0f}% over "
            f"{before.concurrency} ({now.aggregate_tok_s:.1f} tok/s) while the first token "
            f"takes {duration(now.ttft_ms.p90 or 0)} (p90)"
        )
    told = levels[first_miss].concurrency if first_miss is not None else None
    for level in levels:
        if level.failed and level.concurrency != told:
            words.append(f"at {level.concurrency} {level.failed} of {level.requests} failed")
    return "; ".join(words)


def _miss(level: Level, goal: str) -> str:
    """Why a level misses the goal, in words."""
    if level.succeeded == 0:
        reason = f" ({level.errors[0]})" if level.errors else ""
        return f"every request failed{reason}"
    if level.failed:
        return f"{level.failed} of {level.requests} requests failed"
    return f"the first token takes {duration(level.ttft_ms.p90 or 0)} (p90), over {goal}"


def prompt(tokens: int, seed: int) -> str:
    """A chat prompt of about `tokens` tokens (one common word each), different per `seed` so
    no request hits another's prefix cache."""
    rng = random.Random(seed)
    head = f"Request {seed}: write a long story using these words. "
    words = max(tokens - 12, 1)
    return head + " ".join(rng.choice(WORDS) for _ in range(words))


def body(model: str | None, text: str, output_tokens: int) -> dict[str, Any]:
    """A streamed chat completion of exactly `output_tokens` tokens (ignore_eos: llama-server's
    tools/server/README.md and vLLM's extra sampling parameters), usage in its last chunk."""
    out: dict[str, Any] = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0,
    }
    if model:
        out["model"] = model
    return out


@dataclass
class Stream:
    """What the SSE lines of one response said so far."""

    chunks: int = 0
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str = ""
    done: bool = False


def read_line(stream: Stream, line: str) -> bool:
    """Take one SSE line; True when it carried generated text. Never raises: a line that is not
    a JSON event is ignored, an `error` event ends the request as failed."""
    line = line.strip()
    if not line.startswith("data:"):
        if line.startswith("error:"):
            stream.error = line[6:].strip()[:200] or "error event"
        return False
    data = line[5:].strip()
    if data == "[DONE]":
        stream.done = True
        return False
    try:
        event = json.loads(data)
    except ValueError:
        return False
    if not isinstance(event, dict):
        return False
    if "error" in event:
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else error
        stream.error = str(message)[:200] or "error event"
        return False
    usage = event.get("usage")
    if isinstance(usage, dict):
        stream.usage_tokens = _count(usage.get("completion_tokens"), stream.usage_tokens)
        stream.prompt_tokens = _count(usage.get("prompt_tokens"), stream.prompt_tokens)
    choices = event.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (delta.get("content") or delta.get("reasoning_content")):
            stream.chunks += 1
            return True
    return False


def _count(value: object, old: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else old


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: the chat completions URL of an OpenAI base URL."""

    scheme: str
    host: str
    port: int
    path: str  # the base path, e.g. /v1
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0

    def connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)


def endpoint(url: str, api_key: str = "", timeout: float = 120.0) -> Endpoint:
    """The Endpoint of an OpenAI base URL (http://host:port/v1); BenchError for another URL."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(f"{url}: not an http(s) URL like http://127.0.0.1:8080/v1")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise BenchError(f"{url}: the port is not a number 1-65535") from None
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    path = parts.path.rstrip("/") or "/v1"
    return Endpoint(parts.scheme, parts.hostname, port, path, headers, timeout)


def send(where: Endpoint, payload: dict[str, Any], origin: float) -> Sample:
    """One streamed chat completion, timed from `origin` (a perf_counter value)."""
    start = time.perf_counter() - origin
    stream, first, last = Stream(), None, None
    conn = where.connection()
    try:
        conn.request("POST", f"{where.path}/chat/completions", json.dumps(payload), where.headers)
        response = conn.getresponse()
        if response.status != 200:
            text = response.read(300).decode("utf-8", "replace")
            error = f"HTTP {response.status}: {' '.join(text.split())[:160]}"
            return Sample(start, time.perf_counter() - origin, error=error)
        while not stream.done and not stream.error:
            raw = response.readline(1 << 20)
            if not raw:
                break
            if read_line(stream, raw.decode("utf-8", "replace")):
                last = time.perf_counter() - origin
                first = last if first is None else first
        if stream.done:
            response.read(1 << 16)  # the end of the chunked body: closing early resets it
    except (OSError, http.client.HTTPException) as exc:
        stream.error = _reason(exc)
    finally:
        conn.close()
    end = time.perf_counter() - origin
    if not stream.error and first is None:
        stream.error = "no generated text in the response"
    return Sample(
        start=start,
        end=end,
        error=stream.error,
        first=first,
        last=last,
        chunks=stream.chunks,
        usage_tokens=stream.usage_tokens,
        prompt_tokens=stream.prompt_tokens,
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:200]


def models(where: Endpoint) -> list[str]:
    """The model ids GET <base>/models lists; [] when it lists none or cannot be read."""
    conn = where.connection()
    try:
        conn.request("GET", f"{where.path}/models", headers=where.headers)
        response = conn.getresponse()
        data = json.loads(response.read(1 << 20)) if response.status == 200 else {}
    except (OSError, http.client.HTTPException, ValueError):
        return []
    finally:
        conn.close()
    listed = data.get("data") if isinstance(data, dict) else None
    return [m["id"] for m in listed or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def run_level(
    request: Callable[[int, float], Sample],
    concurrency: int,
    count: int | None,
    seconds: float | None,
) -> tuple[list[Sample], float]:
    """`concurrency` streams, each sending one request after another, until `count` requests
    were sent or `seconds` passed (requests under way then finish); the samples and wall time."""
    lock = threading.Lock()
    sent = [0]
    origin = time.perf_counter()

    def stream() -> list[Sample]:
        out: list[Sample] = []
        while True:
            with lock:
                number = sent[0]
                sent[0] += 1
            if count is not None and number >= count:
                return out
            if seconds is not None and time.perf_counter() - origin >= seconds:
                return out
            out.append(request(number, origin))

    with ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(stream) for _ in range(concurrency)]
        samples = [s for f in futures for s in f.result()]
    return sorted(samples, key=lambda s: s.start), time.perf_counter() - origin


@dataclass(frozen=True)
class Load:
    """The load of a sweep."""

    concurrency: tuple[int, ...] = CONCURRENCY
    prompt_tokens: int = PROMPT_TOKENS
    output_tokens: int = OUTPUT_TOKENS
    requests_per_level: int | None = None
    duration: float | None = None
    ttft_goal_ms: float = TTFT_GOAL_MS

    def count(self, concurrency: int) -> int | None:
        """Requests of a level: as asked (at least one per stream), else 4 per stream, none
        when the level runs for a duration."""
        if self.duration is not None:
            return None
        if self.requests_per_level is not None:
            return max(self.requests_per_level, concurrency)
        return REQUESTS_PER_STREAM * concurrency


def sweep(
    target: Target,
    where: Endpoint,
    load: Load,
    progress: Callable[[str], None] = lambda _: None,
) -> Bench:
    """Warm up with one request (BenchError if it fails), then run every level in order."""
    seeds = itertools.count()  # next() is atomic: every request of the sweep its own prompt

    def request(_: int, origin: float) -> Sample:
        text = prompt(load.prompt_tokens, next(seeds))
        return send(where, body(target.model, text, load.output_tokens), origin)

    warm = request(0, time.perf_counter())
    if not warm.ok:
        raise BenchError(f"{target.url}: the first request failed: {warm.error}")
    levels = []
    for concurrency in load.concurrency:
        count = load.count(concurrency)
        size = f"{count} requests" if count is not None else f"{load.duration:g} s"
        progress(f"concurrency {concurrency}: {size} ...")
        samples, wall = run_level(request, concurrency, count, load.duration)
        level = summarize(concurrency, samples, wall, load.ttft_goal_ms)
        levels.append(level)
        progress(
            f"concurrency {concurrency}: {level.succeeded}/{level.requests} ok, "
            f"{level.aggregate_tok_s:.1f} tok/s, TTFT p90 {_ms(level.ttft_ms.p90)}"
        )
    return judged(target, "gpuprov", load, levels)


def _ms(value: float | None) -> str:
    return "-" if value is None else duration(value)


def judged(target: Target, engine: str, load: Load, levels: Sequence[Level]) -> Bench:
    """The Bench of measured levels: the knee marked, the verdict written."""
    at = knee(levels)
    return Bench(
        target=target,
        engine=engine,
        prompt_tokens=load.prompt_tokens,
        output_tokens=load.output_tokens,
        requests_per_level=load.requests_per_level,
        duration_seconds=load.duration,
        ttft_goal_ms=load.ttft_goal_ms,
        levels=[replace(level, knee=i == at) for i, level in enumerate(levels)],
        knee=None if at is None else levels[at].concurrency,
        verdict=verdict(levels, load.ttft_goal_ms, at),
    )
