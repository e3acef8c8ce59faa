"""An image's config without pulling it: from the local engine, or from its registry's HTTP API.

The registry path reads the manifest (choosing the host's platform from an index) and the config
blob it names, and nothing else: no layer is downloaded. Anonymous pulls are supported, with the
bearer token a registry hands out on a 401 (Docker Hub, ghcr.io, nvcr.io public images); a
registry on loopback is spoken to over plain HTTP, and over HTTPS when it answers plain HTTP
with 400 (Docker also allows both there, as an insecure registry).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import requests

from checks.facts.model import ContainerImage
from checks.facts.parsers.containers import image_from_env, parse_image_inspect

DOCKER_HUB = "docker.io"
_HUB_API = "registry-1.docker.io"
_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_DOMAIN = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_MANIFEST_LIMIT = 4 << 20
_CONFIG_LIMIT = 8 << 20
_TIMEOUT = 15.0

ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class ImageConfigError(Exception):
    """The reference is malformed, or its config could not be read; the message says why."""


@dataclass(frozen=True)
class Reference:
    """An image reference as Docker normalises it: docker.io/library/ubuntu:latest."""

    domain: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        return _HUB_API if self.domain == DOCKER_HUB else self.domain

    @property
    def reference(self) -> str:
        """What the manifest endpoint takes: the digest when one is pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        name = f"{self.domain}/{self.repository}"
        return (
            name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")
        )


def parse_reference(text: str) -> Reference:
    """`ubuntu`, `vllm/vllm-openai:v0.23.0`, `nvcr.io/nvidia/pytorch:25.01-py3`,
    `localhost:5000/x@sha256:...`; ImageConfigError for anything Docker would refuse."""
    ref = text.strip()
    if not ref or len(ref) > 512 or any(c.isspace() for c in ref):
        raise ImageConfigError(f"{text!r} is not an image reference")
    name, _, digest = ref.partition("@")
    if digest and _DIGEST.fullmatch(digest) is None:
        raise ImageConfigError(f"{text!r}: {digest!r} is not a digest (algorithm:hex)")
    tag = None
    last = name.rfind("/")
    colon = name.rfind(":")
    if colon > last:
        name, tag = name[:colon], name[colon + 1 :]
        if _TAG.fullmatch(tag) is None:
            raise ImageConfigError(f"{text!r}: {tag!r} is not a valid tag")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        if _DOMAIN.fullmatch(first) is None:
            raise ImageConfigError(f"{text!r}: {first!r} is not a registry host")
        domain, path = first, rest
    else:
        domain, path = DOCKER_HUB, name
    if domain in (DOCKER_HUB, "index.docker.io", _HUB_API):
        domain = DOCKER_HUB
        path = path if "/" in path else f"library/{path}"
    if _PATH.fullmatch(path) is None:
        why = "must be lowercase" if path.lower() != path else "is not a repository name"
        raise ImageConfigError(f"{text!r}: the repository {path!r} {why}")
    return Reference(domain, path, tag if tag or digest else "latest", digest or None)


def from_local_engine(ref: str) -> ContainerImage | None:
    """The image as `docker image inspect` (else `podman image inspect`) shows it, if pulled."""
    for engine in ("docker", "podman"):
        path = shutil.which(engine)
        if path is None:
            continue
        try:
            done = subprocess.run(
                [path, "image", "inspect", ref],
                capture_output=True,
                text=True,
                timeout=_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            found = parse_image_inspect(done.stdout).containers.images
            if found:
                image = found[0]
                image.source = f"{engine} image inspect"
                return image
    return None


def from_registry(
    text: str, architecture: str = "amd64", session: requests.Session | None = None
) -> ContainerImage:
    """The image's config read from its registry: manifest (or index), then the config blob."""
    ref = parse_reference(text)
    client = _Client(ref, session or requests.Session())
    manifest = client.manifest(ref.reference)
    if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
        chosen = _platform(manifest, architecture, text)
        manifest = client.manifest(chosen)
    config = manifest.get("config")
    digest = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        raise ImageConfigError(f"{text}: the registry's manifest names no config blob")
    blob = client.blob(digest)
    try:
        data = json.loads(blob)
    except ValueError:
        raise ImageConfigError(f"{text}: the config blob {digest} is not JSON") from None
    inner = data.get("config") if isinstance(data, dict) else None
    env = inner.get("Env") if isinstance(inner, dict) else None
    values = [e for e in env if isinstance(e, str)] if isinstance(env, list) else []
    shown = text.strip()
    image = image_from_env(shown, [shown] if ref.tag and not ref.digest else [], values)
    image.source = f"registry {ref.api_host} ({digest[:19]})"
    return image


def _platform(index: dict[str, Any], architecture: str, text: str) -> str:
    """The digest of the linux/`architecture` manifest of an index."""
    seen = []
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") if isinstance(entry, dict) else None
        if not isinstance(platform, dict):
            continue
        os_arch = f"{platform.get('os')}/{platform.get('architecture')}"
        seen.append(os_arch)
        digest = entry.get("digest")
        if os_arch == f"linux/{architecture}" and isinstance(digest, str):
            return digest
    offered = ", ".join(sorted(set(seen))) or "none"
    raise ImageConfigError(f"{text} has no linux/{architecture} image (it has: {offered})")


class _Client:
    """GETs against one repository of one registry, with an anonymous bearer token on 401."""

    def __init__(self, ref: Reference, session: requests.Session) -> None:
        self.ref = ref
        self.session = session
        self.token: str | None = None
        self.loopback = ref.api_host.rsplit(":", 1)[0] in _LOOPBACK
        self.base = f"{'http' if self.loopback else 'https'}://{ref.api_host}"

    def manifest(self, reference: str) -> dict[str, Any]:
        accept = ", ".join((*INDEX_TYPES, *MANIFEST_TYPES))
        body = self._get(f"manifests/{reference}", accept, _MANIFEST_LIMIT)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ImageConfigError(f"{self.ref}: the registry's manifest is not a JSON object")
        if data.get("schemaVersion") == 1:
            raise ImageConfigError(f"{self.ref}: a schema 1 manifest (too old to read)")
        return data

    def blob(self, digest: str) -> bytes:
        body = self._get(f"blobs/{digest}", "*/*", _CONFIG_LIMIT)
        algorithm, _, expected = digest.partition(":")
        if algorithm == "sha256" and hashlib.sha256(body).hexdigest() != expected.lower():
            raise ImageConfigError(f"{self.ref}: the config blob does not match {digest}")
        return body

    def _get(self, path: str, accept: str, limit: int) -> bytes:
        url = f"/v2/{self.ref.repository}/{path}"
        response = self._send(url, accept)
        if response.status_code == 401 and self.token is None:
            self.token = self._token(response.headers.get("WWW-Authenticate", ""))
            response = self._send(url, accept)
        if response.status_code != 200:
            raise ImageConfigError(_status_error(self.ref, path, response.status_code))
        return _read(response, limit, str(self.ref))

    def _send(self, url: str, accept: str) -> requests.Response:
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self.session.get(
                self.base + url, headers=headers, timeout=_TIMEOUT, stream=True
            )
        except requests.exceptions.RequestException as exc:
            raise ImageConfigError(
                f"{self.ref}: cannot reach {self.ref.api_host}: {type(exc).__name__}"
            ) from None
        if response.status_code == 400 and self.loopback and self.base.startswith("http://"):
            self.base = f"https://{self.ref.api_host}"  # "an HTTP request to an HTTPS server"
            return self._send(url, accept)
        return response

    def _token(self, challenge: str) -> str:
        scheme, _, params = challenge.partition(" ")
        fields = dict(_CHALLENGE.findall(params))
        realm = fields.pop("realm", "")
        if scheme.lower() != "bearer" or not realm.startswith(("https://", "http://")):
            raise ImageConfigError(
                f"{self.ref}: the registry asks for credentials; pull the image and run "
                "`gpuprov check --image` again (the local engine's copy is read first)"
            )
        fields.setdefault("scope", f"repository:{self.ref.repository}:pull")
        try:
            response = self.session.get(realm, params=fields, timeout=_TIMEOUT)
            data = response.json() if response.status_code == 200 else None
        except (requests.exceptions.RequestException, ValueError):
            data = None
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise ImageConfigError(f"{self.ref}: the registry gave no anonymous pull token")
        return token


def _status_error(ref: Reference, path: str, status: int) -> str:
    what = "manifest" if path.startswith("manifests/") else "config blob"
    if status == 404:
        return f"{ref}: no such image on {ref.api_host} ({what} not found)"
    if status in (401, 403):
        return f"{ref}: {ref.api_host} refuses an anonymous pull ({status}); pull it first"
    return f"{ref}: {ref.api_host} answered {status} for the {what}"


def _read(response: requests.Response, limit: int, name: str) -> bytes:
    chunks = []
    size = 0
    for chunk in response.iter_content(65536):
        size += len(chunk)
        if size > limit:
            response.close()
            raise ImageConfigError(f"{name}: the registry's answer is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
