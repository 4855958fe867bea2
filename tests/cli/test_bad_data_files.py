"""Hostile data files: poisoned profile caches, hardware profiles and platform files.

Every numeric field of each format gets NaN, infinity, a negative number or a denormal where
those make no sense, and every structural field the wrong type. Through the command line each
case must end with exit status 2, exactly one stderr line naming the file and the field, and the
directory exactly as it was (:func:`test_bad_input.assert_clean_failure`); through the API the same
data raises the format's :class:`~partition_lab.errors.PartitionLabError` subclass. The same
rules hold whichever way a file comes in: ``partition-lab profile --cache``, ``--profile-cache``
and ``profile_cache=`` (a dict too) share one validation. Behind it, the cost evaluation refuses
a price that is NaN, infinite or negative, so a plan's total never is.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from test_bad_input import (
    RELAY_TEXT,
    assert_clean_failure,
    bundle_data,  # noqa: F401 (a fixture)
    tampered,
    tiny_onnx,
)

from partition_lab.cli import main
from partition_lab.cost_models import get_cost_model
from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.profiles import load_profile
from partition_lab.errors import CostModelError, ProfileError, TargetSpecError
from partition_lab.targets import get_platform

PLATFORM = "neuron@2020"


# ---------------------------------------------------------------------------- profile caches
@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> dict:
    """A real cache: the tiny ONNX model profiled on this CPU for ``neuron@2020``."""
    folder = tmp_path_factory.mktemp("profiled")
    cache = folder / "cache.json"
    code = main(["profile", str(tiny_onnx(folder)), "--platform", PLATFORM, "--device", "cpu",
                 "--cache", str(cache)])
    assert code == 0
    return json.loads(cache.read_text())


def _entry(data: dict) -> dict:
    return next(iter(data["devices"].values()))


def _op(data: dict) -> dict:
    return next(iter(_entry(data)["ops"].values()))


def _run(data: dict) -> dict:
    return next(iter(_entry(data)["graphs"].values()))


def _setter(get: Callable[[dict], dict], key: str, value: Any) -> Callable[[dict], None]:
    return lambda data: get(data).__setitem__(key, value)


def _first_in_graph(data: dict) -> dict:
    return _op(data)["in_graph_s"]


# (edit of the decoded cache, what the one error line must name)
CACHE_CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    "region-s-nan": (_setter(lambda d: _entry(d)["overheads"], "region_s", math.nan),
                     "overheads.region_s"),
    "island-wakeup-negative": (_setter(lambda d: _entry(d)["overheads"], "island_wakeup_s", -1),
                               "overheads.island_wakeup_s"),
    "per-op-s-inf": (_setter(lambda d: _entry(d)["overheads"], "per_op_s", math.inf),
                     "overheads.per_op_s"),
    "overhead-huge": (_setter(lambda d: _entry(d)["overheads"], "region_s", 1e300),
                      "overheads.region_s"),
    "overheads-list": (_setter(_entry, "overheads", [1]), "overheads must be"),
    "in-graph-nan": (lambda d: _first_in_graph(d).update(net=math.nan), "in_graph_s.net"),
    "in-graph-negative": (lambda d: _first_in_graph(d).update(net=-1), "in_graph_s.net"),
    "in-graph-list": (_setter(_op, "in_graph_s", [1.0]), "in_graph_s"),
    "median-denormal": (_setter(_op, "median_s", 5e-324), "median_s"),
    "p10-nan": (_setter(_op, "p10_s", math.nan), "p10_s"),
    "p90-negative": (_setter(_op, "p90_s", -5), "p90_s"),
    "p10-above-median": (lambda d: _op(d).update(p10_s=_op(d)["median_s"] * 2), "p10_s <= median_s"),
    "runs-zero": (_setter(_op, "runs", 0), ".runs must be a positive integer"),
    "runs-float": (_setter(_op, "runs", 7.5), ".runs"),
    "class-bogus": (_setter(_op, "class", "bogus"), ".class must be one of"),
    "flops-negative": (_setter(_op, "flops", -1e12), ".flops"),
    "bytes-inf": (_setter(_op, "bytes", math.inf), ".bytes"),
    "dtype-number": (_setter(_op, "dtype", 4), ".dtype"),
    "op-record-string": (lambda d: _entry(d)["ops"].update({next(iter(_entry(d)["ops"])): "x"}),
                         "must be an object"),
    "ops-list": (_setter(_entry, "ops", [1]), ".ops must be an object"),
    "devices-list": (lambda d: d.update(devices=[]), "'devices' must be an object"),
    "device-string": (lambda d: d["devices"].update({next(iter(d["devices"])): "x"}),
                      "must be an object"),
    "kind-bogus": (_setter(_entry, "kind", "gpu"), ".kind must be one of"),
    "copy-point-nan": (_setter(lambda d: _entry(d)["copies"], "host->accel", [[1024, math.nan]]),
                       "copies['host->accel']"),
    "copies-list": (_setter(_entry, "copies", [[1, 1]]), ".copies must be"),
    "graph-total-nan": (_setter(_run, "total_s", math.nan), ".total_s"),
    "graph-outside-string": (_setter(_run, "outside_s", "x"), ".outside_s"),
    "graph-outside-negative": (_setter(_run, "outside_s", -1.0), ".outside_s"),
    "graph-inputs-negative": (_setter(_run, "inputs_bytes", [-1]), ".inputs_bytes"),
    "graph-device-number": (_setter(_run, "device", 3), ".device"),
    "graph-run-list": (lambda d: _entry(d)["graphs"].update(
        {next(iter(_entry(d)["graphs"])): [1]}), "must be an object"),
    "binding-list": (lambda d: d["bindings"][PLATFORM].update(cpu=[1]), "bindings["),
    "binding-unknown-key": (lambda d: d["bindings"][PLATFORM].update(cpu="nope"),
                            "which has no entry"),
}


def _poisoned(good: dict, name: str) -> dict:
    data = copy.deepcopy(good)
    CACHE_CASES[name][0](data)
    return data


def _write_cache(folder: Path, data: dict) -> Path:
    path = folder / "bad.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as JSON's extension writes them
    return path


@pytest.mark.parametrize("name", sorted(CACHE_CASES))
@pytest.mark.parametrize("command", ["partition", "profile"])
def test_a_poisoned_profile_cache_is_one_line(name, command, good_cache, tmp_path, monkeypatch,
                                              capsys):
    monkeypatch.chdir(tmp_path)
    model = tiny_onnx(tmp_path)
    cache = _write_cache(tmp_path, _poisoned(good_cache, name))
    argv = (["partition", model, "-t", PLATFORM, "--profile-cache", cache,
             "-o", tmp_path / "plan.json"] if command == "partition" else
            ["profile", model, "--platform", PLATFORM, "--device", "cpu", "--cache", cache])
    line = assert_clean_failure(argv, CACHE_CASES[name][1], tmp_path, capsys)
    assert "bad.json" in line
    assert "measure again with 'partition-lab profile'" in line  # the fix


@pytest.mark.parametrize("name", sorted(CACHE_CASES))
def test_the_api_refuses_a_poisoned_cache_dict(name, good_cache):
    with pytest.raises(ProfileError, match=re.escape(CACHE_CASES[name][1])):
        get_cost_model(get_platform(PLATFORM), profile=_poisoned(good_cache, name))


def test_a_cache_dict_with_keys_that_are_not_strings_is_refused(good_cache):
    data = copy.deepcopy(good_cache)
    entry = _entry(data)
    entry["ops"][7] = entry["ops"].pop(next(iter(entry["ops"])))
    with pytest.raises(ProfileError, match=r"ops: keys must be strings, got 7"):
        get_cost_model(get_platform(PLATFORM), profile=data)


def test_a_deeply_nested_cache_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "bad.json"
    cache.write_text('{"schema": "partition_lab.profile_cache/1", "devices": '
                     + "[" * 100_000 + "]" * 100_000 + "}")
    assert_clean_failure(["partition", tiny_onnx(tmp_path), "-t", PLATFORM, "--profile-cache",
                          cache, "-o", tmp_path / "plan.json"], "nests", tmp_path, capsys)


def test_the_good_cache_still_plans(good_cache, tmp_path, monkeypatch, capsys):
    """The cases above differ from a cache that works in their one field."""
    monkeypatch.chdir(tmp_path)
    cache = _write_cache(tmp_path, good_cache)
    assert main(["partition", str(tiny_onnx(tmp_path)), "-t", PLATFORM, "--profile-cache",
                 str(cache), "-o", str(tmp_path / "plan.json")]) == 0
    assert (tmp_path / "plan.json").is_file()


# ---------------------------------------------------------------------------- hardware profiles
T4 = (resources.files("partition_lab.cost_models") / "profiles" / "t4.toml").read_text()


def _figure(key: str, value: str) -> Callable[[str], str]:
    """Set the value of the figure ``key`` (``key = { value = ... }``) to the TOML ``value``."""
    def edit(text: str) -> str:
        edited, count = re.subn(rf"(?m)^({key} = \{{ value = )[^,]+", rf"\g<1>{value}", text)
        assert count == 1, key
        return edited
    return edit


PROFILE_CASES: dict[str, tuple[Callable[[str], str], str]] = {
    **{f"{key}-{label}": (_figure(key, value), f"figures.{key}")
       for key in ("matrix_flops", "vector_flops", "memory_bandwidth", "matrix_efficiency",
                   "op_overhead", "region_overhead")
       for label, value in (("denormal", "5e-324"), ("nan", "nan"), ("inf", "inf"),
                            ("negative", "-1"))
       # a fixed cost may be zero, so a denormal one is harmless (it prices as zero)
       if not (label == "denormal" and key.endswith("overhead"))},
    "memory-bandwidth-huge": (_figure("memory_bandwidth", "1e300"), "figures.memory_bandwidth"),
    "efficiency-tiny": (_figure("data_efficiency", "1e-9"), "figures.data_efficiency"),
    "overhead-huge": (_figure("op_overhead", "1e300"), "figures.op_overhead"),
    "link-bandwidth-denormal": (_figure("bandwidth", "5e-324"), "host_link.bandwidth"),
    "link-latency-huge": (_figure("latency", "1e300"), "host_link.latency"),
    "link-latency-nan": (_figure("latency", "nan"), "host_link.latency"),
    "float-bytes-huge": (lambda t: t.replace("[host_link]", 'float_bytes = { value = 1e9, '
                                             'unit = "B", source = "x" }\n\n[host_link]'),
                         "figures.float_bytes"),
    "achieved-not-a-table": (lambda t: t.replace("[figures]", "achieved_matrix_flops = 5\n\n"
                                                 "[figures]"), "achieved_matrix_flops"),
    "achieved-denormal": (lambda t: t + '\n[achieved_matrix_flops]\nfloat32 = { value = 5e-324, '
                          'unit = "FLOP/s", source = "x" }\n', "achieved_matrix_flops.float32"),
    "deeply-nested": (lambda t: t + "\nx = " + "[" * 50_000 + "]" * 50_000 + "\n", "nest"),
}


@pytest.mark.parametrize("name", sorted(PROFILE_CASES))
def test_a_poisoned_hardware_profile_is_one_line(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    edit, needle = PROFILE_CASES[name]
    profile = tmp_path / "bad.toml"
    profile.write_text(edit(T4))
    line = assert_clean_failure(["partition", tiny_onnx(tmp_path), "-t", PLATFORM, "--profile",
                                 profile, "-o", tmp_path / "plan.json"], needle, tmp_path, capsys)
    assert "bad.toml" in line
    with pytest.raises(ProfileError, match=re.escape(needle)):
        get_cost_model(get_platform(PLATFORM), accel_profile=str(profile))


def test_the_shipped_profile_edited_nowhere_loads(tmp_path):
    (tmp_path / "t4.toml").write_text(T4)
    assert load_profile(tmp_path / "t4.toml").memory_bandwidth == load_profile("t4").memory_bandwidth


def test_a_target_whose_profile_is_unknown_names_it(tmp_path, monkeypatch, capsys):
    """Was: "target 'npu' names no hardware profile for ; pass --profile" (no name at all)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "npu.toml").write_text('name = "npu"\ndefault_profile = "no_such_chip"\n'
                                       'supported = ["nn.conv2d", "nn.relu"]\n')
    line = assert_clean_failure(["partition", tiny_onnx(tmp_path), "-t", tmp_path / "npu.toml",
                                 "-o", tmp_path / "plan.json"], "'no_such_chip'", tmp_path, capsys)
    assert "default_profile" in line and "for ;" not in line


# ---------------------------------------------------------------------------- platform files
NPU = 'name = "npu"\ntarget = "neuron@2020"\nmemory = "npu"\n'
HOST = 'name = "cpu"\nrole = "host"\n'


def _platform(npu: str = NPU, host: str = HOST, links: str = "") -> str:
    return f'name = "two"\n[[devices]]\n{npu}[[devices]]\n{host}{links}'


# (file text, the place the one error line must name); TOML unless the name says JSON
PLATFORM_CASES: dict[str, tuple[str, str]] = {
    "matrix-engine-string": (_platform(NPU + 'matrix_engine = "false"\n'),
                             "devices[0].matrix_engine"),
    "memories-a-string": (_platform(links='[[links]]\nmemories = "npu"\n'),
                          "links[0].memories"),
    "memories-unknown": (_platform(links='[[links]]\nmemories = ["npu", "dsp"]\n'),
                         "links[0].memories"),
    "memories-three": (_platform(links='[[links]]\nmemories = ["npu", "host", "npu"]\n'),
                       "links[0].memories"),
    "link-profile-without-link": (_platform(links='[[links]]\nmemories = ["npu", "host"]\n'
                                                  'profile = "xeon_gold_6130"\n'),
                                  "links[0].profile"),
    "link-unknown-key": (_platform(links='[[links]]\nmemories = ["npu", "host"]\nspeed = 1\n'),
                         "links[0]: unknown key 'speed'"),
    "precision-float7": (_platform(NPU + 'precision = "float7"\n'), "devices[0].precision"),
    "host-precision-float7": (_platform(host=HOST + 'precision = "float7"\n'),
                              "devices[1].precision"),
    "host-named-gpu": (_platform(host='name = "gpu"\nrole = "host"\n'), "devices[1].name"),
    "host-with-memory": (_platform(host=HOST + 'memory = "gpu"\n'), "devices[1].memory"),
    "device-named-CPU": (_platform('name = "CPU"\ntarget = "neuron@2020"\n'), "devices[0].name"),
    "device-named-empty": (_platform('name = ""\ntarget = "neuron@2020"\n'), "devices[0].name"),
    "device-name-a-number": (_platform('name = 3\ntarget = "neuron@2020"\n'), "devices[0].name"),
    "compiler-with-quotes": (_platform(NPU + "compiler = 'np\"u\\'\n"), "devices[0].compiler"),
    "compiler-on-main": (_platform(NPU + 'role = "main"\ncompiler = "x"\n'),
                         "devices[0].compiler"),
    "compiler-from-a-digit-name": (_platform('name = "1npu"\ntarget = "neuron@2020"\n'),
                                   "devices[0].compiler"),
    "preference-inf": (_platform(NPU + "preference = inf\n"), "devices[0].preference"),
    "preference-float": (_platform(NPU + "preference = 2.5\n"), "devices[0].preference"),
    "preference-string": (_platform(NPU + 'preference = "x"\n'), "devices[0].preference"),
    "preference-huge": (_platform(NPU + "preference = 99999999999999999\n"),
                        "devices[0].preference"),
    "role-unknown": (_platform(NPU + 'role = "gpu"\n'), "devices[0].role"),
    "unknown-device-key": (_platform(NPU + 'memry = "x"\n'), "devices[0]: unknown key 'memry'"),
    "unknown-top-key": ("version = 2\n" + _platform(), "unknown key 'version'"),
    "target-unknown": (_platform('name = "npu"\ntarget = "no_such_target"\n'),
                       "devices[0].target"),
    "target-missing": (_platform('name = "npu"\n'), "needs a target"),
    "profile-unknown": (_platform(NPU + 'profile = "no_such_chip"\n'), "devices[0].profile"),
    "host-profile-unknown": (_platform(host=HOST + 'profile = "no_such_chip"\n'),
                             "devices[1].profile"),
    "colour-not-a-colour": (_platform(NPU + "colour = 'red\" ]; x [\"'\n"), "devices[0].colour"),
    "memory-empty": (_platform('name = "npu"\ntarget = "neuron@2020"\nmemory = ""\n'),
                     "devices[0].memory"),
    "devices-repeat": (_platform(host=NPU + "[[devices]]\n" + HOST), "repeat"),
    "json-preference-overflow": (json.dumps({"devices": [
        {"name": "npu", "target": "neuron@2020", "preference": 1e400},
        {"name": "cpu", "role": "host"}]}).replace("Infinity", "1e400"), "devices[0].preference"),
    "json-matrix-engine-string": (json.dumps({"devices": [
        {"name": "npu", "target": "neuron@2020", "matrix_engine": "false"},
        {"name": "cpu", "role": "host"}]}), "devices[0].matrix_engine"),
    "json-device-a-list": (json.dumps({"devices": [[1], {"name": "cpu", "role": "host"}]}),
                           "devices[0]: expected a table"),
    "json-deeply-nested": ('{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}", "nest"),
}


def _platform_file(folder: Path, name: str) -> Path:
    path = folder / ("two.json" if name.startswith("json-") else "two.toml")
    path.write_text(PLATFORM_CASES[name][0])
    return path


@pytest.mark.parametrize("name", sorted(PLATFORM_CASES))
def test_a_bad_platform_file_is_one_line(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _platform_file(tmp_path, name)
    line = assert_clean_failure(["partition", tiny_onnx(tmp_path), "-t", path,
                                 "-o", tmp_path / "plan.json"], PLATFORM_CASES[name][1],
                                tmp_path, capsys)
    assert path.name in line


@pytest.mark.parametrize("name", sorted(PLATFORM_CASES))
def test_the_api_refuses_a_bad_platform_file(name, tmp_path):
    with pytest.raises(TargetSpecError, match=re.escape(PLATFORM_CASES[name][1])):
        get_platform(_platform_file(tmp_path, name))


def test_the_base_platform_file_plans(tmp_path, monkeypatch, capsys):
    """The cases above differ from a platform file that works in their one field."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "two.toml"
    path.write_text(_platform(NPU + 'compiler = "npu"\nmatrix_engine = false\npreference = 5\n',
                              links='[[links]]\nmemories = ["npu", "host"]\n'
                                    'profile = "inferentia1"\n'))
    assert main(["partition", str(tiny_onnx(tmp_path)), "-t", str(path),
                 "-o", str(tmp_path / "plan.json")]) == 0
    platform = get_platform(path)
    assert platform.device("npu").matrix_engine is False
    assert platform.links[0].memories == frozenset({"npu", "host"})


# ---------------------------------------------------------------------------- bundles
def _bundle_node(data: dict, index: int = 0) -> dict:
    return data["graph"]["nodes"][index]


def _bundle_device(data: dict, index: int) -> dict:
    return data["platform"]["devices"][index]


# (edit of the decoded bundle, what the one error line must name). Unchecked, a NaN,
# infinite or negative FLOP count or shape would be profiled and written into the profile cache,
# which every later read would refuse; "false" would read as true and a host named gpu be
# renamed; a dtype the package does not know (float7) would be priced at 4 bytes an element.
BUNDLE_CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    **{f"flops-{label}": (lambda d, v=value: _bundle_node(d).update(flops=v),
                          "graph.nodes[0].flops must be a number in [0, 1e+18]")
       for label, value in (("nan", math.nan), ("inf", math.inf), ("negative", -1e12),
                            ("huge", 1e300), ("string", "1"))},
    "output-shape-negative": (lambda d: _bundle_node(d, 1)["outputs"][0].update(
        shape=[1, -8, 8, 8]), "graph.nodes[1].outputs[0].shape"),
    "output-shape-float": (lambda d: _bundle_node(d, 1)["outputs"][0].update(
        shape=[1, 8.5, 8, 8]), "graph.nodes[1].outputs[0].shape"),
    "weight-shape-huge": (lambda d: _bundle_node(d)["weights"][0].update(
        shape=[10**6, 10**6, 10**6]), "at most 2**32 elements"),
    "input-shape-negative": (lambda d: d["graph"]["inputs"]["data"].update(shape=[1, -3, 8, 8]),
                             "graph.inputs['data'].shape"),
    "output-dtype-float7": (lambda d: _bundle_node(d, 1)["outputs"][0].update(dtype="float7"),
                            "graph.nodes[1].outputs[0].dtype must be one of"),
    "weight-dtype-float7": (lambda d: _bundle_node(d)["weights"][0].update(dtype="float7"),
                            "graph.nodes[0].weights[0].dtype must be one of"),
    "input-dtype-float7": (lambda d: d["graph"]["inputs"]["data"].update(dtype="float7"),
                           "graph.inputs['data'].dtype must be one of"),
    "preference-nan": (lambda d: _bundle_device(d, 0).update(preference=math.nan),
                       "platform.devices[0].preference must be an integer"),
    "preference-bool": (lambda d: _bundle_device(d, 0).update(preference=True),
                        "platform.devices[0].preference must be an integer"),
    "matrix-engine-string": (lambda d: _bundle_device(d, 0).update(matrix_engine="false"),
                             "platform.devices[0].matrix_engine must be true or false"),
    "precision-float7": (lambda d: _bundle_device(d, 0).update(precision="float7"),
                         "platform.devices[0].precision"),
    "device-named-CPU": (lambda d: _bundle_device(d, 0).update(name="CPU"),
                         "platform.devices[0].name"),
    "compiler-with-quotes": (lambda d: _bundle_device(d, 0).update(compiler='np"u'),
                             "platform.devices[0].compiler"),
    "host-named-gpu": (lambda d: _bundle_device(d, 1).update(name="gpu"),
                       "platform.devices[1].name must be 'cpu'"),
    "link-memories-a-string": (lambda d: d["platform"].update(
        links=[{"memories": "accel", "profile": None}]), "platform.links[0].memories"),
    "link-memories-unknown": (lambda d: d["platform"].update(
        links=[{"memories": ["accel", "dsp"], "profile": None}]), "platform.links[0].memories"),
}


@pytest.mark.parametrize("name", sorted(BUNDLE_CASES))
def test_a_poisoned_bundle_is_one_line(name, bundle_data, tmp_path, monkeypatch,  # noqa: F811
                                       capsys):
    """``profile`` of the bundle: exit 2, one line naming the bundle, the field and the fix,
    and no profile cache (nor its lock) written."""
    monkeypatch.chdir(tmp_path)
    edit, needle = BUNDLE_CASES[name]
    argv = tampered(edit)(tmp_path, bundle_data) + ["--device", "cpu"]
    line = assert_clean_failure(argv, needle, tmp_path, capsys)
    assert f"bundle {tmp_path / 'net.json.gz'}: " in line
    assert "export it again (docs/guide/profiling.md" in line


@pytest.mark.parametrize("name", sorted(BUNDLE_CASES))
def test_the_api_refuses_a_poisoned_bundle(name, bundle_data, tmp_path):  # noqa: F811
    from partition_lab.errors import PartitionLabError
    from partition_lab.executors.graph_io import read_bundle

    tampered(BUNDLE_CASES[name][0])(tmp_path, bundle_data)
    with pytest.raises(PartitionLabError, match=re.escape(BUNDLE_CASES[name][1])):
        read_bundle(tmp_path / "net.json.gz")


def test_the_untampered_bundle_still_reads(bundle_data, tmp_path):  # noqa: F811
    from partition_lab.executors.graph_io import read_bundle

    tampered(lambda data: None)(tmp_path, bundle_data)
    bundle = read_bundle(tmp_path / "net.json.gz")
    assert bundle.graph.nodes[0].flops == bundle_data["graph"]["nodes"][0]["flops"] > 0
    assert bundle.platform.device("neuron").matrix_engine is True


# ---------------------------------------------------------------------------- last line of defence
class Poisoned:
    """A custom cost model whose ``what`` price is ``value`` (everything else is sane)."""

    def __init__(self, what: str, value: float) -> None:
        self.name, self.what, self.value = f"poisoned-{what}", what, value

    def op_time(self, node, device):
        return self.value if self.what == "op" else 1e-6

    def transfer_time(self, nbytes, src, dst):
        return self.value if self.what == "copy" else 1e-9 * nbytes

    def region_overhead(self, device):
        return self.value if self.what == "overhead" else 1e-6


@pytest.fixture(scope="module")
def relay_module():
    import tvm

    return tvm.relay.fromtext(RELAY_TEXT)


@pytest.mark.parametrize("what", ["op", "copy", "overhead"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
@pytest.mark.parametrize("strategy", ["greedy", "cost"])
def test_a_price_that_is_not_a_time_stops_the_plan(what, value, strategy, relay_module):
    import partition_lab

    with pytest.raises(CostModelError, match=f"cost model poisoned-{what} priced"):
        partition_lab.partition(relay_module, PLATFORM, strategy=strategy,
                                cost_model=Poisoned(what, value))


def test_evaluate_refuses_a_total_that_overflows(relay_module):
    import partition_lab

    plan = partition_lab.partition(relay_module, PLATFORM, strategy="all_cpu").plan
    with pytest.raises(CostModelError, match="the plan"):
        evaluate(plan, Poisoned("op", 1e308))


@pytest.mark.parametrize("option", ["--profile-cache", "--profile"])
def test_a_fifo_as_profile_cache_or_hardware_profile_is_one_line_not_a_hang(tmp_path, option,
                                                                          monkeypatch, capsys):
    import os

    monkeypatch.chdir(tmp_path)
    model = tiny_onnx(tmp_path)
    fifo = tmp_path / ("cache.json" if option == "--profile-cache" else "hw.toml")
    os.mkfifo(fifo)
    line = assert_clean_failure(["partition", model, "-t", PLATFORM, option, fifo,
                                 "-o", tmp_path / "plan.json"], "named pipe (FIFO)", tmp_path,
                                capsys)
    assert fifo.name in line
