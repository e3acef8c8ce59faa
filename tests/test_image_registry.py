"""`gpuprov check --image` against a real registry on loopback, and a real local engine.

A Distribution registry (Debian's docker-registry package) serves images that skopeo pushes from
OCI layouts this test writes: real manifests, indexes and config blobs whose environment is that
of the published vLLM images (tests/fixtures/images/). No layer is ever fetched by the code under
test. A second registry process over the same storage demands bearer tokens, as Docker Hub and
ghcr.io do; its token server is the test's own (it signs the JWT the registry verifies against
its root certificate). podman's local storage stands in for the local engine (docker reads the
same way).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import uuid
from base64 import b64encode, urlsafe_b64encode
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from typer.testing import CliRunner

from checks.facts import image_config
from checks.facts.model import FACTS_SCHEMA_VERSION, HostFacts, from_dict, to_dict
from checks.matrix import images
from provision.cli import app

IMAGES = Path(__file__).parent / "fixtures" / "images"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _tool(name: str) -> str:
    """The binary; skip without it, unless GPUPROV_E2E=required (then fail)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (apt install docker-registry skopeo)"
        if os.environ.get("GPUPROV_E2E") == "required":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _env(name: str) -> list[str]:
    data = json.loads((IMAGES / f"vllm-openai_{name}.json").read_text())
    return list(data[0]["Config"]["Env"])


def _host(name: str, machine: str = "x86_64") -> HostFacts:
    facts = from_dict(HostFacts, json.loads((IMAGES / f"host_{name}.json").read_text())["facts"])
    facts.system.machine = machine
    return facts


class Layout:
    """An OCI image layout on disk (what `skopeo copy oci:DIR:TAG` reads)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs" / "sha256").mkdir(parents=True)
        (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        self.refs: list[dict[str, Any]] = []
        self.layer = self._layer()

    def blob(self, data: bytes, media_type: str) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / "sha256" / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    def _layer(self) -> tuple[dict[str, Any], str]:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            info = tarfile.TarInfo("etc/os-release")
            body = b"ID=test\n"
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
        packed = gzip.compress(raw.getvalue(), mtime=0)
        return self.blob(packed, "application/vnd.oci.image.layer.v1.tar+gzip"), diff_id

    def image(self, env: list[str], arch: str = "amd64") -> dict[str, Any]:
        layer, diff_id = self.layer
        config = {
            "architecture": arch,
            "os": "linux",
            "config": {"Env": env, "Entrypoint": ["/bin/true"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
        config_desc = self.blob(
            json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json"
        )
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": config_desc,
            "layers": [layer],
        }
        desc = self.blob(json.dumps(manifest).encode(), OCI_MANIFEST)
        return {**desc, "platform": {"architecture": arch, "os": "linux"}}

    def tag(self, tag: str, desc: dict[str, Any]) -> None:
        annotations = {"org.opencontainers.image.ref.name": tag}
        self.refs.append({**desc, "annotations": annotations})
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": self.refs}
        (self.root / "index.json").write_text(json.dumps(index))

    def index(self, manifests: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
        return self.blob(json.dumps(body).encode(), OCI_INDEX)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(
    binary: str, root: Path, name: str, auth: str = ""
) -> tuple[subprocess.Popen[bytes], str]:
    """A registry process over root/data on a free loopback port."""
    port = _free_port()
    config = root / f"{name}.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}"
    )
    server = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return server, f"127.0.0.1:{port}"


class TokenServer:
    """A token endpoint as Docker Hub's: it grants pull on what `scope` asks, signed RS256."""

    def __init__(self, root: Path) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuprov test token issuer")])
        now = datetime.now(timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.bundle = root / "token-root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.asked: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.asked.append(self.path)
                query = dict(
                    p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p
                )
                scope = unquote(query.get("scope", ""))
                body = json.dumps({"token": outer.token(scope)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, scope: str) -> str:
        kind, _, rest = scope.partition(":")
        repo, _, actions = rest.rpartition(":")
        access = [{"type": kind, "name": repo, "actions": actions.split(",")}] if repo else []
        now = int(time.time())
        claims = {"iss": "gpuprov-test", "sub": "", "aud": "gpuprov-test-registry",
                  "exp": now + 300, "nbf": now - 10, "iat": now, "jti": str(uuid.uuid4()),
                  "access": access}  # fmt: skip
        der = self.cert.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "RS256", "x5c": [b64encode(der).decode()]}
        signed = ".".join(_b64url(json.dumps(part).encode()) for part in (header, claims))
        signature = self.key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{_b64url(signature)}"

    def auth(self) -> str:
        return (
            "auth:\n  token:\n"
            f"    realm: {self.realm}\n    service: gpuprov-test-registry\n"
            f"    issuer: gpuprov-test\n    rootcertbundle: {self.bundle}\n"
        )


def _b64url(data: bytes) -> str:
    return urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, TokenServer]]:
    """Two registries on 127.0.0.1 over one storage loaded with vLLM-like images: an open one
    and one that demands bearer tokens; yields both host:ports and the token server."""
    binary = _tool("docker-registry")
    skopeo = _tool("skopeo")
    root = tmp_path_factory.mktemp("registry")
    tokens = TokenServer(root)
    server, host = _serve(binary, root, "open")
    locked, locked_host = _serve(binary, root, "token", tokens.auth())
    try:
        _wait(f"http://{host}/v2/", 200)
        _wait(f"http://{locked_host}/v2/", 401)
        layout = Layout(root / "layout")
        for name in ("v0.23.0", "v0.16.0"):
            layout.tag(name, layout.image(_env(name)))
        arm = [*_env("v0.23.0-cu129"), "NVARCH=sbsa"]
        both = [layout.image(_env("v0.23.0")), layout.image(arm, "arm64")]
        layout.tag("multi", layout.index(both))
        pushes = [
            ("v0.23.0", "vllm/vllm-openai:v0.23.0"),
            ("v0.16.0", "vllm/vllm-openai:v0.16.0"),
            ("multi", "vllm/vllm-openai:v0.23.0-multi"),
        ]
        for tag, target in pushes:
            subprocess.run(
                [skopeo, "--insecure-policy", "copy", "--quiet", "--all",
                 "--dest-tls-verify=false", f"oci:{layout.root}:{tag}",
                 f"docker://{host}/{target}"],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        yield host, locked_host, tokens
    finally:
        for process in (server, locked):
            process.terminate()
            process.wait(timeout=10)
        tokens.server.shutdown()


@pytest.fixture(scope="module")
def registry(registries: tuple[str, str, TokenServer]) -> str:
    return registries[0]


def _wait(url: str, status: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=1).status_code == status:
                return
        except requests.exceptions.ConnectionError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the registry did not answer at {url}")


def _check(tmp_path: Path, host: HostFacts, *refs: str) -> Any:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"schema_version": FACTS_SCHEMA_VERSION, **to_dict(host)}))
    args = ["check", "--from", str(facts), "--json", "--fail-on", "never"]
    for ref in refs:
        args += ["--image", ref]
    return CliRunner().invoke(app, args)


# ---------------------------------------------------------------------------------------------
# The registry


def test_the_config_is_read_without_pulling(registry: str) -> None:
    image = image_config.from_registry(f"{registry}/vllm/vllm-openai:v0.23.0")
    assert (image.cuda_version, image.compat_setting) == ("13.0.2", "0")
    assert image.require_cuda is not None and image.require_cuda.startswith("cuda>=13.0 brand=")
    assert image.source is not None and image.source.startswith(f"registry {registry} (sha256:")
    assert image.tags == [f"{registry}/vllm/vllm-openai:v0.23.0"]


def test_a_registry_that_wants_a_token_gets_an_anonymous_one(
    registries: tuple[str, str, TokenServer],
) -> None:
    """The 401's challenge names the realm, service and scope; the token answers it."""
    _, locked, tokens = registries
    image = image_config.from_registry(f"{locked}/vllm/vllm-openai:v0.16.0")
    assert image.cuda_version == "12.9.1"
    asked = [p for p in tokens.asked if "vllm%2Fvllm-openai" in p or "vllm/vllm-openai" in p]
    assert asked and "service=gpuprov-test-registry" in asked[-1]
    assert "scope=repository%3Avllm%2Fvllm-openai%3Apull" in asked[-1]


def test_an_index_gives_the_host_platforms_image(registry: str) -> None:
    ref = f"{registry}/vllm/vllm-openai:v0.23.0-multi"
    amd64 = image_config.from_registry(ref, "amd64")
    arm64 = image_config.from_registry(ref, "arm64")
    assert (amd64.cuda_version, arm64.cuda_version) == ("13.0.2", "12.9.1")
    with pytest.raises(image_config.ImageConfigError, match=r"no linux/ppc64le image.*amd64"):
        image_config.from_registry(ref, "ppc64le")


def test_a_digest_pin_reads_that_manifest(registry: str) -> None:
    head = requests.get(
        f"http://{registry}/v2/vllm/vllm-openai/manifests/v0.16.0",
        headers={"Accept": OCI_MANIFEST},
        timeout=5,
    )
    digest = head.headers["Docker-Content-Digest"]
    image = image_config.from_registry(f"{registry}/vllm/vllm-openai@{digest}")
    assert image.cuda_version == "12.9.1"
    assert image.tags is None  # a digest names no release: compat is what the image sets
    assert images.loads_compat(image) is (image.compat_setting in ("1", "true"))


def test_an_unknown_image_is_a_clear_error(registry: str) -> None:
    with pytest.raises(image_config.ImageConfigError, match="no such image"):
        image_config.from_registry(f"{registry}/vllm/vllm-openai:v9.9.9")


@pytest.mark.parametrize(
    ("host", "ref", "outcome", "rules"),
    [
        # As the preflight of the pulled images predicts (tests/test_vllm_images.py).
        ("dual3090_570", "v0.23.0", "refused", ["CTR-001"]),
        ("dual3090_570", "v0.16.0", "refused", ["CTR-001", "CTR-002"]),
        ("dual3090_535", "v0.16.0", "refused", ["CTR-001", "CTR-002"]),
        ("h100_570", "v0.23.0", "no known problem", []),
        ("dual3090_580", "v0.23.0", "no known problem", []),
    ],
)
def test_check_image_predicts_the_outcome(
    tmp_path: Path, registry: str, host: str, ref: str, outcome: str, rules: list[str]
) -> None:
    result = _check(tmp_path, _host(host), f"{registry}/vllm/vllm-openai:{ref}")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["schema_version"] == 2
    [verdict] = report["images"]
    assert (verdict["outcome"], verdict["rules"]) == (outcome, rules)
    assert verdict["source"].startswith(f"registry {registry}")


def test_check_image_on_an_arm_host_judges_the_arm_image(tmp_path: Path, registry: str) -> None:
    """A DGX Spark (aarch64) gets the arm64 manifest of an index: CUDA 12.9, not 13.0."""
    ref = f"{registry}/vllm/vllm-openai:v0.23.0-multi"
    result = _check(tmp_path, _host("dual3090_570", machine="aarch64"), ref)
    [verdict] = json.loads(result.stdout)["images"]
    assert verdict["cuda_version"] == "12.9.1"


def test_check_image_text_shows_the_outcome(tmp_path: Path, registry: str) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"schema_version": 1, **to_dict(_host("dual3090_570"))}))
    ref = f"{registry}/vllm/vllm-openai:v0.23.0"
    result = CliRunner().invoke(
        app, ["check", "--from", str(facts), "--image", ref], env={"COLUMNS": "240"}
    )
    assert result.exit_code == 1  # CTR-001 is an error
    assert "refused (CTR-001)" in result.stdout
    assert "cuda>=13.0 (+60 brand/driver alternatives)" in result.stdout


def test_a_bad_or_missing_image_exits_2_with_the_reason(tmp_path: Path, registry: str) -> None:
    missing = _check(tmp_path, _host("dual3090_570"), f"{registry}/vllm/vllm-openai:v9.9.9")
    assert missing.exit_code == 2
    assert "no such image" in missing.stderr and missing.stdout == ""
    bad = _check(tmp_path, _host("dual3090_570"), "Vllm/Vllm-Openai:v0.23.0")
    assert bad.exit_code == 2 and "must be lowercase" in bad.stderr


# ---------------------------------------------------------------------------------------------
# The local engine


def test_a_pulled_image_is_read_from_the_local_engine(registry: str, tmp_path: Path) -> None:
    """This machine's check judges its own copy; another machine's capture is judged against
    what that machine would pull (the registry), this copy only when the registry is out of
    reach (localhost:9 here, a name the pulled image is tagged with)."""
    podman = _tool("podman")
    ref = f"{registry}/vllm/vllm-openai:v0.16.0"
    offline = "localhost:9/vllm/vllm-openai:v0.16.0"
    subprocess.run(
        [podman, "pull", "--quiet", "--tls-verify=false", ref],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    subprocess.run([podman, "tag", ref, offline], check=True, capture_output=True, timeout=60)
    try:
        image = image_config.from_local_engine(ref)
        assert image is not None and image.source == "podman image inspect"
        assert image.cuda_version == "12.9.1"
        here = CliRunner().invoke(app, ["check", "--json", "--fail-on", "never", "--image", ref])
        [verdict] = json.loads(here.stdout)["images"]
        assert verdict["source"] == "podman image inspect"
        result = _check(tmp_path, _host("dual3090_570"), ref)
        [verdict] = json.loads(result.stdout)["images"]
        assert verdict["source"].startswith(f"registry {registry} (sha256:")
        assert verdict["rules"] == ["CTR-001", "CTR-002"]
        result = _check(tmp_path, _host("dual3090_570"), offline)
        [verdict] = json.loads(result.stdout)["images"]
        assert verdict["source"] == "podman image inspect"
        assert verdict["rules"] == ["CTR-001", "CTR-002"]
        assert f"judging this machine's copy of {offline}" in result.stderr
    finally:
        for name in (ref, offline):
            subprocess.run([podman, "rmi", "--force", name], capture_output=True, timeout=60)


# ---------------------------------------------------------------------------------------------
# References


@pytest.mark.parametrize(
    ("text", "domain", "repository", "reference"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest"),
        ("vllm/vllm-openai:v0.23.0", "docker.io", "vllm/vllm-openai", "v0.23.0"),
        ("docker.io/vllm/vllm-openai:v0.23.0-cu129", "docker.io", "vllm/vllm-openai", "v0.23.0-cu129"),  # noqa: E501
        ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io", "nvidia/pytorch", "25.01-py3"),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda", "ghcr.io", "ggml-org/llama.cpp", "server-cuda"),
        ("localhost:5000/team/img", "localhost:5000", "team/img", "latest"),
        ("reg.lan/a/b@sha256:" + "ab" * 32, "reg.lan", "a/b", "sha256:" + "ab" * 32),
        ("reg.lan/a/b:v1@sha256:" + "ab" * 32, "reg.lan", "a/b", "sha256:" + "ab" * 32),
    ],
)  # fmt: skip
def test_references_normalise_as_docker_does(
    text: str, domain: str, repository: str, reference: str
) -> None:
    ref = image_config.parse_reference(text)
    assert (ref.domain, ref.repository, ref.reference) == (domain, repository, reference)


def test_docker_hub_is_read_through_its_api_host() -> None:
    assert image_config.parse_reference("ubuntu").api_host == "registry-1.docker.io"


@pytest.mark.parametrize(
    "text",
    ["", "  ", "Ubuntu", "a b", "img:", "img:-bad", "img@sha256:xyz", "reg.lan/", "a//b", ":tag"],
)
def test_malformed_references_are_refused(text: str) -> None:
    with pytest.raises(image_config.ImageConfigError):
        image_config.parse_reference(text)
