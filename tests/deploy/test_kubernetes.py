"""deploy/kubernetes/: the DaemonSet and the example workload keep the promises
docs/operations.md makes for them, and the daemon's configuration in the ConfigMap is one the
real hurrayd accepts (HURRAYD names the binary)."""

import os
import pathlib
import subprocess
import tempfile
import tomllib

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "KiB": 2**10, "MiB": 2**20,
         "GiB": 2**30, "TiB": 2**40}


def documents(name):
    with open(DEPLOY / name) as file:
        return [d for d in yaml.safe_load_all(file) if d]


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def size_bytes(text):
    text = str(text)
    for unit, factor in sorted(UNITS.items(), key=lambda item: -len(item[0])):
        if text.endswith(unit):
            return int(text[: -len(unit)]) * factor
    return int(text)


def daemon_config():
    config_map = one(documents("hurrayd.yaml"), "ConfigMap")
    return config_map["data"]["hurrayd.toml"]


def daemon_pod():
    return one(documents("hurrayd.yaml"), "DaemonSet")["spec"]["template"]["spec"]


def mounts(container):
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}


def test_no_host_namespaces_anywhere():
    consumer = one(documents("example-consumer.yaml"), "Pod")["spec"]
    for spec in (daemon_pod(), consumer):
        for field in ("hostIPC", "hostPID", "hostNetwork"):
            assert not spec.get(field, False), field


def test_the_daemon_runs_as_its_own_non_root_user():
    pod = daemon_pod()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (daemon,) = pod["containers"]
    assert daemon["securityContext"]["allowPrivilegeEscalation"] is False
    assert daemon["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "add" not in daemon["securityContext"]["capabilities"]


def test_the_shm_volume_and_memory_limit_hold_the_pool():
    pod = daemon_pod()
    capacity = size_bytes(tomllib.loads(daemon_config())["cpu_pool"]["capacity"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    (daemon,) = pod["containers"]
    shm = volumes[mounts(daemon)["/dev/shm"]]
    assert shm["emptyDir"]["medium"] == "Memory"
    assert size_bytes(shm["emptyDir"]["sizeLimit"]) >= capacity
    assert size_bytes(daemon["resources"]["limits"]["memory"]) > capacity


def test_daemon_and_workload_share_the_socket_directory():
    socket = tomllib.loads(daemon_config())["socket"]
    directory = os.path.dirname(socket)
    pod = daemon_pod()
    (daemon,) = pod["containers"]
    daemon_volume = {v["name"]: v for v in pod["volumes"]}[mounts(daemon)[directory]]
    consumer_pod = one(documents("example-consumer.yaml"), "Pod")["spec"]
    (consumer,) = consumer_pod["containers"]
    consumer_volume = {v["name"]: v for v in consumer_pod["volumes"]}[mounts(consumer)[directory]]
    assert daemon_volume["hostPath"]["path"] == consumer_volume["hostPath"]["path"]
    assert {"name": "HURRAY_SOCKET", "value": socket} in consumer["env"]
    # The sockets are 0660 with the daemon's group: the workload is admitted by joining it.
    assert pod["securityContext"]["runAsGroup"] in consumer_pod["securityContext"]["supplementalGroups"]
    assert tomllib.loads(daemon_config())["socket_mode"] == "0660"


def test_probes_ask_the_daemons_health_on_its_socket():
    (daemon,) = daemon_pod()["containers"]
    socket = tomllib.loads(daemon_config())["socket"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = daemon[probe]["exec"]["command"]
        assert command == ["hurrayctl", "--socket", socket, "health"], probe


def test_the_grace_period_outlasts_the_daemons_stop():
    grace_ms = tomllib.loads(daemon_config()).get("shutdown_grace_ms", 2000)
    assert daemon_pod()["terminationGracePeriodSeconds"] * 1000 > grace_ms


def test_hurrayd_accepts_the_configmaps_configuration():
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as file:
        file.write(daemon_config())
        file.flush()
        printed = subprocess.run([os.environ["HURRAYD"], "--config", file.name, "--print-config"],
                                 capture_output=True, text=True, check=False)
    assert printed.returncode == 0, printed.stderr
    effective = tomllib.loads(printed.stdout)
    assert effective["socket"] == "/run/hurray/hurrayd.sock"
    assert effective["log_format"] == "json"
    assert effective["cpu_pool"]["capacity"] == 8 * 2**30
