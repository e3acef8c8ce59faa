"""Hostile inventory values: stack.from_data accepts a value or names it in a StackError, and what
it accepts renders into the units, EnvironmentFiles, the canary's table and nginx's config with
every value quoted, as both engines write them (provision.templates, provision.nginx.render).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from provision import nginx, stack, templates
from provision.settings import read
from provision.settings.read import StackError
from tests.support.hostile import CONTROL, UNICODE_DIGITS, hostile_text, json_values

DEFAULTS = stack.defaults()
PROFILE = {"name": "main", "model": "/models/m.gguf", "port": 8001}
REPLICA = {"name": "rep", "model": "org/model", "port": 8101, "gpus": [0]}
PROFILE_KEYS = sorted({*DEFAULTS["llama_server_defaults"], *PROFILE, "alias"})
REPLICA_KEYS = sorted({*DEFAULTS["vllm_defaults"], *REPLICA})
IMAGE = "vllm/vllm-openai:v0.21.0"
FACTS = {"systemd_version": 255, "nvidia_persistenced": False}

QUOTED = r'"(?:[^"\\]|\\.)*"'
EXEC = re.compile(
    rf"(?:ExecStart|ExecStop|ExecStartPre)=-?(?:/\S+ [a-z0-9 -]+ )?{QUOTED}(?: {QUOTED})*"
)
ENV_LINE = re.compile(rf"[A-Za-z_][A-Za-z0-9_]*={QUOTED}")


def near(value: Any) -> st.SearchStrategy[Any]:
    """A valid value with hostile text around it: a trailing newline, DEL, spaces, odd digits."""
    text = str(value)
    return st.one_of(
        st.sampled_from(CONTROL + " ").map(lambda c: text + c),
        st.sampled_from(CONTROL + " ").map(lambda c: c + text),
        st.sampled_from(UNICODE_DIGITS).map(lambda d: text + d),
        st.tuples(hostile_text(3), hostile_text(3)).map(lambda t: t[0] + text + t[1]),
    )


def hostile(value: Any) -> st.SearchStrategy[Any]:
    return st.one_of(json_values, hostile_text(), near(value), st.just(value))


DEFAULTS_OF = {**DEFAULTS["llama_server_defaults"], **DEFAULTS["vllm_defaults"]}
# Where a hostile value goes: a top-level key, or a key of the profile or of the replica.
PLACES = [
    *((None, k) for k in sorted(DEFAULTS)),
    *(("llama_server_profiles", k) for k in PROFILE_KEYS),
    *(("vllm_replicas", k) for k in REPLICA_KEYS),
]


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Any]:
    """A good inventory (a profile, a replica, maybe the balancer) with a few values hostile."""
    replicas = draw(st.booleans())
    data: dict[str, Any] = {
        "llama_server_profiles": [dict(PROFILE)] if draw(st.booleans()) else [],
        "vllm_replicas": [dict(REPLICA)] if replicas else [],
        "nginx_lb_enabled": replicas and draw(st.booleans()),
    }
    for entry, key in draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=3)):
        if entry is None:
            data[key] = draw(hostile(DEFAULTS[key]))
        elif data[entry] and isinstance(data[entry], list) and isinstance(data[entry][0], dict):
            base = {**PROFILE, **REPLICA, **DEFAULTS_OF}
            data[entry][0][key] = draw(hostile(base.get(key, "")))
    return data


def rendered(data: dict[str, Any]) -> dict[str, str] | None:
    """Every file gpuprov writes for `data`, by name; None when the inventory is refused."""
    try:
        found = stack.from_data(data)
        v = stack.variables(data)
        out = {"nginx": nginx.render(v)} if found.balancer.enabled else {}
    except StackError:
        return None
    profiles = [dataclasses.asdict(p) for p in found.profiles]
    replicas = [dataclasses.asdict(r) for r in found.vllm.replicas]
    for p in profiles:
        unit = templates.render("llama_server", "llama-server.service.j2", profile=p, **v, **FACTS)
        env = templates.render("llama_server", "llama-server.env.j2", profile=p, api_key="k")
        out[f"llama {p['name']} unit"], out[f"llama {p['name']} env"] = unit, env
    for r in replicas:
        unit = templates.render("vllm", "vllm.service.j2", replica=r, image=IMAGE, **v, **FACTS)
        env = templates.render("vllm", "vllm.env.j2", replica=r, hf_token="t", api_key="k")
        out[f"vllm {r['name']} unit"], out[f"vllm {r['name']} env"] = unit, env
    for name in ("canary.tsv", "gpuprov-canary.service", "gpuprov-canary.timer"):
        out[name] = templates.render(
            "canary", f"{name}.j2", profiles=profiles, replicas=replicas, **v
        )
    tsv = [line for line in out["canary.tsv"].splitlines() if not line.startswith("#")]
    balancer = bool(replicas) and found.balancer.enabled
    assert len(tsv) == len(profiles) + len(replicas) + balancer, out["canary.tsv"]
    assert len({line.count("\t") for line in tsv}) <= 1, tsv  # one field count for every line
    return out


def assert_quoted(files: dict[str, str]) -> None:
    """Each value sits where the template puts it: no line added, every argument quoted."""
    for name, text in files.items():
        lines = text.splitlines()
        assert len(lines) == text.count("\n"), name  # no line break but the template's own
        assert not any(read.unwritable(x.replace("\t", " ")) for x in lines), name
        if name.endswith("env"):
            assert all(ENV_LINE.fullmatch(x) for x in lines if not x.startswith("#")), text
        if name.endswith("unit"):
            assert all(EXEC.fullmatch(x) for x in lines if x.startswith("Exec")), text


@given(inventories())
def test_property_inventory_values_are_refused_or_written_quoted(data: dict[str, Any]) -> None:
    files = rendered(data)
    event("refused" if files is None else "written")
    if files is not None:
        assert_quoted(files)


@given(st.sampled_from(sorted(stack.PATH_SETTINGS)), hostile_text())
def test_property_a_path_setting_is_refused_or_written(key: str, value: str) -> None:
    data = {"llama_server_profiles": [PROFILE], "vllm_replicas": [REPLICA], key: f"/a{value}"}
    files = rendered(data)
    event("refused" if files is None else "written")
    if files is not None:
        assert_quoted(files)


BAD = [
    ("llama_server_config_dir", "/etc/gpu prov", "must not contain spaces"),
    ("canary_script", "/usr/local/lib/my canary.py", "must not contain spaces"),
    ("canary_state_dir", "/var/lib/gpuprov\u3000canary", "must not contain spaces"),
    ("vllm_config_dir", "/etc/gpuprov/vllm\x7f", "control characters"),
    ("canary_config", "/etc/gpuprov/canary.tsv\n", "control characters"),
    ("llama_server_user", "gpuprov-llama\n", "control characters"),
    ("nginx_lb_bind", "127.0.0.1\n", "control characters"),
    ("llama_cpp_cuda_architectures", "86\n", "expected e.g."),
    ("llama_cpp_cuda_architectures", "\u0668\u0666", "expected e.g."),
    ("vllm_version", "v0.21.0\u2028", "control characters"),
    ("vllm_version", "v\u0660.21.0", "a release like"),
    ("llama_cpp_tarball", " " * 300, "no such file"),  # too long a name for the system
]


@pytest.mark.parametrize(("key", "value", "reason"), BAD)
def test_a_value_that_would_break_a_file_is_refused(key: str, value: str, reason: str) -> None:
    data = {"llama_server_profiles": [PROFILE], key: value}
    with pytest.raises(StackError) as caught:
        stack.from_data(data)
    assert caught.value.field == key
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"host": "any host"}, "host"),
        ({"host": "127.0.0.1\n"}, "host"),
        ({"host": "127.0.0.1\t"}, "host"),
        ({"alias": "main\u2028x"}, "alias"),
        ({"alias": "main\x85"}, "alias"),
        ({"alias": "main\x7f"}, "alias"),
        ({"alias": "main\ud800"}, "alias"),
        ({"gpu_layers": "\u0663\u0662"}, "gpu_layers"),
        ({"extra_args": ["--x\x7f"]}, "extra_args"),
        ({"api_key_env": "KEY\n"}, "api_key_env"),
        ({"name": "main\n"}, "name"),
    ],
)
def test_a_profile_value_that_would_break_a_file_is_refused(
    entry: dict[str, Any], field: str
) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data({"llama_server_profiles": [{**PROFILE, **entry}]})
    assert caught.value.field == f"llama_server_profiles[0].{field}"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"shm_size": "16g\n"}, "shm_size"),
        ({"shm_size": "\u0661\u0666g"}, "shm_size"),
        ({"env": {"A": "x\u2029"}}, "env.A"),
        ({"env": {"A\n": "x"}}, "env"),
        ({"model": "org/model\n"}, "model"),
        ({"kv_cache_dtype": "fp8\n"}, "kv_cache_dtype"),
        ({"speculative_config": {"method": float("nan")}}, "speculative_config"),
        ({"speculative_config": {"method": {1, 2}}}, "speculative_config"),
        ({"speculative_config": {"x": [[[[]]]] * 2, ("a",): 1}}, "speculative_config"),
    ],
)
def test_a_replica_value_that_would_break_a_file_is_refused(
    entry: dict[str, Any], field: str
) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data({"vllm_replicas": [{**REPLICA, **entry}]})
    assert caught.value.field == f"vllm_replicas[0].{field}"


def test_a_profile_host_is_an_address() -> None:
    for host in ("0.0.0.0", "::", "localhost", "192.168.1.5"):
        found = stack.from_data({"llama_server_profiles": [{**PROFILE, "host": host}]})
        assert found.profiles[0].host == host
