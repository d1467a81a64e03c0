"""deploy/kubernetes/ without a Kubernetes cluster.

No `kubectl` helps here: Debian's kubernetes-client (1.20) needs an API server
even for `kubectl create --dry-run=client`. So the manifests are parsed as
kustomize would assemble them (kustomization.yaml) and checked against what
`lmcc node` accepts:

  - every object's fields are fields of its Kubernetes type (a misspelt probe
    is not silently dropped), selectors, Services and the PodDisruptionBudget
    fit the pods;
  - each pod's effective configuration is what `lmcc node --dump-config`
    prints when the container's own command runs with the pod's environment
    (the node id derived from the ordinal, the advertise host from the
    downward API) and the ConfigMap's lmcc.yaml as it ships: every config key
    and LMCACHE_CONTROLLER_* variable is one the node knows (it ignores
    unknown ones), every container port, volume mount, the secret file and the
    member list agree with it, and the grace period covers a clean stop;
  - the Dockerfile installs the binary, user and volume the manifests use, and
    the package of every library the binary links.

Then three "pods" run on this machine: each is the container's command with
the ConfigMap's lmcc.yaml (only ports and paths changed), in a mount namespace
of its own (`unshare -rm`) whose /etc/hosts maps the pods' DNS names
(lmcc-N.lmcc-members.lmcc.svc.cluster.local) to loopback addresses, as
the headless Service's DNS does. They must form one cluster, serve the probe
paths and answer lookups of a worker through every pod; and a pod that comes
back on another address, under the same name, must be found again (the names
are resolved at every connect, for the cluster's connections and for the
peer reads of lookups). Where user namespaces are not available the pods use
`localhost` as their host names instead and the move is skipped.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

from lmcc_deploy import (ENV_PREFIX, REPO, clean_env, clean_stop_bound_s, known_keys,
                         require_binary, require_yaml, yaml)

from conftest import BINARY, STARTUP_DEADLINE_S, Node, free_ports, unique_ip, wait_until  # noqa: E402
from lmcc_worker import LOCATION, FakeWorker  # noqa: E402

K8S = REPO / "deploy" / "kubernetes"

# -- the manifests as kustomize assembles them -------------------------------------------------

# Namespaced kinds get the kustomization's namespace; cluster-scoped ones do not.
KINDS = {("v1", "Namespace"): False, ("v1", "ConfigMap"): True, ("v1", "Secret"): True,
         ("v1", "Service"): True, ("apps/v1", "StatefulSet"): True,
         ("policy/v1", "PodDisruptionBudget"): True}


class Manifests:
    def __init__(self) -> None:
        require_yaml()
        self.kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
        self.namespace = self.kustomization["namespace"]
        self.objects: list[dict] = []
        for name in self.kustomization["resources"]:
            for doc in yaml.safe_load_all((K8S / name).read_text()):
                if doc is None:
                    continue
                doc["_file"] = name
                key = (doc.get("apiVersion"), doc.get("kind"))
                assert key in KINDS, f"{name}: unexpected apiVersion/kind {key}"
                if KINDS[key]:
                    doc["metadata"]["namespace"] = self.namespace
                self.objects.append(doc)

    def get(self, kind: str, name: Optional[str] = None) -> dict:
        found = [o for o in self.objects
                 if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
        assert len(found) == 1, f"want one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def all(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o["kind"] == kind]

    @property
    def sts(self) -> dict:
        return self.get("StatefulSet")

    @property
    def pod(self) -> dict:
        return self.sts["spec"]["template"]["spec"]

    @property
    def container(self) -> dict:
        (c,) = self.pod["containers"]
        return c

    def headless(self) -> dict:
        return self.get("Service", self.sts["spec"]["serviceName"])

    def front(self) -> dict:
        (s,) = [s for s in self.all("Service") if s["spec"].get("clusterIP") != "None"]
        return s

    def lmcc_yaml_name(self) -> tuple[str, str]:
        """(ConfigMap volume's path in the pod, the ConfigMap's file name)
        the container's command reads."""
        _, config = self.command_paths()
        return os.path.dirname(config), os.path.basename(config)

    def script(self) -> str:
        c = self.container
        assert c["command"] == ["/bin/sh", "-c"], c["command"]
        (script,) = c["args"]
        return script

    def command_paths(self) -> tuple[str, str]:
        """(the lmcc binary, the config file) of the container's `exec lmcc node --config F`."""
        m = re.search(r"exec\s+(\S+)\s+node\s+--config\s+(\S+)\s*$", self.script())
        assert m, f"the container's command must end in `exec LMCC node --config FILE`:\n{self.script()}"
        return m.group(1), m.group(2)

    def mount_of(self, volume: str) -> dict:
        (m,) = [m for m in self.container["volumeMounts"] if m["name"] == volume]
        return m

    def volume(self, name: str) -> dict:
        (v,) = [v for v in self.pod["volumes"] if v["name"] == name]
        return v

    def pod_names(self) -> list[str]:
        return [f"{self.sts['metadata']['name']}-{i}" for i in range(self.sts["spec"]["replicas"])]

    def dns_name(self, pod: str) -> str:
        return f"{pod}.{self.headless()['metadata']['name']}.{self.namespace}.svc.cluster.local"

    def pod_env(self, pod: str) -> dict[str, str]:
        """The container's environment in pod `pod`, as the kubelet makes it:
        HOSTNAME is the pod's name, fieldRefs from the downward API, $(VAR)
        expanded from the variables defined before."""
        meta = {"metadata.name": pod, "metadata.namespace": self.namespace}
        env = {"HOSTNAME": pod}
        for e in self.container.get("env", []):
            if "valueFrom" in e:
                env[e["name"]] = meta[e["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                        lambda m: env.get(m.group(1), m.group(0)), e["value"])
        return env

    def configmap_lmcc_yaml(self) -> str:
        _, name = self.lmcc_yaml_name()
        cm = self.get("ConfigMap", self.volume("config")["configMap"]["name"])
        return cm["data"][name]


@pytest.fixture(scope="module")
def k8s() -> Manifests:
    return Manifests()


# -- the Kubernetes types' fields used here (k8s.io/api, 1.30) -------------------------------------

FIELDS = {
    "ObjectMeta": {"name", "namespace", "labels", "annotations"},
    "StatefulSetSpec": {"replicas", "selector", "template", "volumeClaimTemplates", "serviceName",
                        "podManagementPolicy", "updateStrategy", "revisionHistoryLimit",
                        "minReadySeconds", "persistentVolumeClaimRetentionPolicy", "ordinals"},
    "StatefulSetUpdateStrategy": {"type", "rollingUpdate"},
    "RollingUpdateStatefulSetStrategy": {"partition", "maxUnavailable"},
    "PodSpec": {"volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
                "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy",
                "nodeSelector", "serviceAccountName", "automountServiceAccountToken", "nodeName",
                "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
                "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName",
                "tolerations", "hostAliases", "priorityClassName", "priority", "dnsConfig",
                "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy",
                "overhead", "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers",
                "schedulingGates", "resourceClaims"},
    "PodSecurityContext": {"seLinuxOptions", "windowsOptions", "runAsUser", "runAsGroup",
                           "runAsNonRoot", "supplementalGroups", "fsGroup", "sysctls",
                           "fsGroupChangePolicy", "seccompProfile", "appArmorProfile"},
    "Container": {"name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
                  "resources", "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices",
                  "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
                  "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
                  "securityContext", "stdin", "stdinOnce", "tty"},
    "ContainerPort": {"name", "hostPort", "containerPort", "protocol", "hostIP"},
    "EnvVar": {"name", "value", "valueFrom"},
    "Probe": {"exec", "httpGet", "tcpSocket", "grpc", "initialDelaySeconds", "timeoutSeconds",
              "periodSeconds", "successThreshold", "failureThreshold",
              "terminationGracePeriodSeconds"},
    "HTTPGetAction": {"path", "port", "host", "scheme", "httpHeaders"},
    "Lifecycle": {"postStart", "preStop"},
    "LifecycleHandler": {"exec", "httpGet", "tcpSocket", "sleep"},
    "ResourceRequirements": {"limits", "requests", "claims"},
    "SecurityContext": {"capabilities", "privileged", "seLinuxOptions", "windowsOptions",
                        "runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
                        "allowPrivilegeEscalation", "procMount", "seccompProfile",
                        "appArmorProfile"},
    "VolumeMount": {"name", "readOnly", "recursiveReadOnly", "mountPath", "subPath",
                    "mountPropagation", "subPathExpr"},
    "Volume": {"name", "configMap", "secret", "emptyDir", "persistentVolumeClaim", "projected",
               "downwardAPI"},
    "ConfigMapVolumeSource": {"name", "items", "defaultMode", "optional"},
    "SecretVolumeSource": {"secretName", "items", "defaultMode", "optional"},
    "PersistentVolumeClaimSpec": {"accessModes", "selector", "resources", "volumeName",
                                  "storageClassName", "volumeMode", "dataSource",
                                  "dataSourceRef", "volumeAttributesClassName"},
    "ServiceSpec": {"ports", "selector", "clusterIP", "clusterIPs", "type", "externalIPs",
                    "sessionAffinity", "loadBalancerIP", "loadBalancerSourceRanges",
                    "externalName", "externalTrafficPolicy", "healthCheckNodePort",
                    "publishNotReadyAddresses", "sessionAffinityConfig", "ipFamilies",
                    "ipFamilyPolicy", "allocateLoadBalancerNodePorts", "loadBalancerClass",
                    "internalTrafficPolicy", "trafficDistribution"},
    "ServicePort": {"name", "protocol", "appProtocol", "port", "targetPort", "nodePort"},
    "PodDisruptionBudgetSpec": {"minAvailable", "selector", "maxUnavailable",
                                "unhealthyPodEvictionPolicy"},
}


def check_fields(obj: dict, kind: str, where: str, problems: list[str]) -> None:
    unknown = set(obj) - FIELDS[kind]
    if unknown:
        problems.append(f"{where}: not fields of {kind}: {sorted(unknown)}")


def test_every_manifest_is_in_the_kustomization_and_parses(k8s):
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert files == set(k8s.kustomization["resources"]), \
        "every manifest in deploy/kubernetes/ is one of kustomization.yaml's resources"
    names = [(o["kind"], o["metadata"]["name"]) for o in k8s.objects]
    assert len(names) == len(set(names)), names
    assert {o["kind"] for o in k8s.objects} == {"Namespace", "ConfigMap", "Service", "StatefulSet",
                                                "PodDisruptionBudget"}
    assert k8s.get("Namespace")["metadata"]["name"] == k8s.namespace


def test_the_fields_are_those_of_the_kubernetes_types(k8s):
    problems: list[str] = []
    for o in k8s.objects:
        check_fields(o["metadata"], "ObjectMeta", f"{o['_file']} {o['kind']}", problems)
    spec = k8s.sts["spec"]
    check_fields(spec, "StatefulSetSpec", "StatefulSet.spec", problems)
    check_fields(spec["updateStrategy"], "StatefulSetUpdateStrategy", "updateStrategy", problems)
    check_fields(spec["updateStrategy"].get("rollingUpdate", {}),
                 "RollingUpdateStatefulSetStrategy", "rollingUpdate", problems)
    check_fields(k8s.pod, "PodSpec", "pod", problems)
    check_fields(k8s.pod["securityContext"], "PodSecurityContext", "pod securityContext", problems)
    c = k8s.container
    check_fields(c, "Container", "container", problems)
    check_fields(c["securityContext"], "SecurityContext", "container securityContext", problems)
    check_fields(c["resources"], "ResourceRequirements", "resources", problems)
    for p in c["ports"]:
        check_fields(p, "ContainerPort", f"port {p.get('name')}", problems)
    for e in c["env"]:
        check_fields(e, "EnvVar", f"env {e.get('name')}", problems)
    for probe in ("readinessProbe", "livenessProbe"):
        check_fields(c[probe], "Probe", probe, problems)
        check_fields(c[probe]["httpGet"], "HTTPGetAction", f"{probe}.httpGet", problems)
    check_fields(c["lifecycle"], "Lifecycle", "lifecycle", problems)
    check_fields(c["lifecycle"]["preStop"], "LifecycleHandler", "preStop", problems)
    for m in c["volumeMounts"]:
        check_fields(m, "VolumeMount", f"volumeMount {m.get('name')}", problems)
    for v in k8s.pod["volumes"]:
        check_fields(v, "Volume", f"volume {v.get('name')}", problems)
        if "configMap" in v:
            check_fields(v["configMap"], "ConfigMapVolumeSource", v["name"], problems)
        if "secret" in v:
            check_fields(v["secret"], "SecretVolumeSource", v["name"], problems)
    for t in spec["volumeClaimTemplates"]:
        check_fields(t["spec"], "PersistentVolumeClaimSpec", f"claim {t['metadata']['name']}",
                     problems)
    for s in k8s.all("Service"):
        check_fields(s["spec"], "ServiceSpec", f"Service {s['metadata']['name']}", problems)
        for p in s["spec"]["ports"]:
            check_fields(p, "ServicePort", f"Service {s['metadata']['name']} port", problems)
    check_fields(k8s.get("PodDisruptionBudget")["spec"], "PodDisruptionBudgetSpec", "PDB",
                 problems)
    assert not problems, "\n".join(problems)


def test_the_statefulset_services_and_budget_fit_the_pods(k8s):
    spec = k8s.sts["spec"]
    labels = spec["template"]["metadata"]["labels"]

    def selects_pods(selector: dict) -> bool:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    assert selects_pods(spec["selector"]["matchLabels"])
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    assert spec["minReadySeconds"] > 0, "an updated pod must stay ready a while before the next"
    assert spec["replicas"] == 3
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"]

    headless = k8s.headless()["spec"]
    assert headless["clusterIP"] == "None"
    assert headless["publishNotReadyAddresses"] is True, \
        "a starting pod must resolve its peers' names before any of them is ready"
    front = k8s.front()["spec"]
    assert front.get("type", "ClusterIP") == "ClusterIP"
    for s in (headless, front):
        assert selects_pods(s["selector"])
    pdb = k8s.get("PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb
    assert selects_pods(pdb["selector"]["matchLabels"])

    c = k8s.container
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    sc = k8s.pod["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] != 0 and sc["fsGroup"]
    assert k8s.pod["enableServiceLinks"] is False, \
        "Service links would put LMCC_* variables into the node's environment"


def test_service_ports_name_the_containers_ports(k8s):
    ports = {p["name"]: p["containerPort"] for p in k8s.container["ports"]}
    assert len(ports) == len(k8s.container["ports"])
    for s in k8s.all("Service"):
        for p in s["spec"]["ports"]:
            assert p["targetPort"] in ports, f"{s['metadata']['name']}: {p}"
            assert p["port"] == ports[p["targetPort"]], f"{s['metadata']['name']}: {p}"
    served = lambda s: {p["targetPort"] for p in s["spec"]["ports"]}  # noqa: E731
    assert {"http", "pull", "reply", "heartbeat"} <= served(k8s.front())
    assert "cluster" not in served(k8s.front()), "the cluster port is for the nodes only"
    assert "cluster" in served(k8s.headless())
    for probe in ("readinessProbe", "livenessProbe"):
        assert k8s.container[probe]["httpGet"]["port"] in ports


def cpus(quantity: Any) -> int:
    """Whole cores in a Kubernetes CPU quantity ("2", 2, "1500m")."""
    text = str(quantity)
    return int(float(text[:-1]) / 1000) if text.endswith("m") else int(float(text))


def pod_config(k8s: Manifests, pod: str, tmp: Path, lmcc_yaml_text: str | None = None) -> dict[str, Any]:
    """The effective configuration of pod `pod`: the container's own command
    and environment, the ConfigMap's lmcc.yaml exactly as it ships (or
    `lmcc_yaml_text`), and `--dump-config` added to the node's arguments."""
    binary, config = k8s.command_paths()
    lmcc_yaml = tmp / "lmcc.yaml"
    lmcc_yaml.write_text(k8s.configmap_lmcc_yaml() if lmcc_yaml_text is None else lmcc_yaml_text)
    wrapper = tmp / "lmcc-dump-config"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(str(BINARY))} "$@" --dump-config\n')
    wrapper.chmod(0o755)
    script = k8s.script().replace(binary, str(wrapper)).replace(config, str(lmcc_yaml))
    env = {**clean_env(), **k8s.pod_env(pod)}
    r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env,
                       timeout=30)
    assert r.returncode == 0, f"{pod}: lmcc node refuses its configuration:\n{r.stderr}{r.stdout}"
    return yaml.safe_load(r.stdout)


def test_each_pod_runs_a_configuration_lmcc_node_accepts(k8s, tmp_path):
    require_binary()
    keys = known_keys()
    given = yaml.safe_load(k8s.configmap_lmcc_yaml())
    assert set(given) <= keys, f"keys lmcc node does not know (it ignores them): {set(given) - keys}"
    env_keys = {n for n in k8s.pod_env("x-0") if n.startswith(ENV_PREFIX)}
    known_env = {ENV_PREFIX + k.upper() for k in keys}
    assert env_keys <= known_env, f"variables lmcc node does not read: {env_keys - known_env}"

    c = k8s.container
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    data_mount = k8s.mount_of(k8s.sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"])
    secret_volume = k8s.volume(k8s.mount_of("cluster-secret")["name"])["secret"]
    (generator,) = [g for g in k8s.kustomization["secretGenerator"]
                    if g["name"] == secret_volume["secretName"]]
    assert secret_volume["defaultMode"] == 0o440, \
        "secret files belong to root:fsGroup; the node's user reads them through the group"
    config_dir, config_name = k8s.lmcc_yaml_name()
    assert k8s.mount_of("config")["mountPath"] == config_dir
    assert config_name in k8s.get("ConfigMap")["data"]

    pods = k8s.pod_names()
    for i, pod in enumerate(pods):
        cfg = pod_config(k8s, pod, tmp_path)
        me = k8s.dns_name(pod)
        assert cfg["lmcc_node_id"] == f"n{i + 1}", pod
        members = cfg["lmcc_cluster_members"]
        assert [m["host"] for m in members] == [k8s.dns_name(p) for p in pods], \
            f"the member list names the pods by the headless Service ({k8s.namespace} namespace)"
        (mine,) = [m for m in members if m["id"] == cfg["lmcc_node_id"]]
        assert mine["host"] == me
        assert cfg["controller_advertise_host"] == me
        assert cfg["controller_host"] == "0.0.0.0"
        assert ports["http"] == cfg["controller_port"]
        monitor = cfg["controller_monitor_ports"]
        assert (ports["pull"], ports["reply"], ports["heartbeat"]) == \
            (monitor["pull"], monitor["reply"], monitor["heartbeat"])
        assert all(m["port"] == ports["cluster"] for m in members)
        assert cfg["lmcc_replicas"] <= len(members)
        assert cfg["lmcc_data_dir"] == data_mount["mountPath"]
        assert not data_mount.get("readOnly")
        secret_dir, secret_name = os.path.split(cfg["lmcc_cluster_secret_file"])
        assert secret_dir == k8s.mount_of("cluster-secret")["mountPath"]
        assert [secret_name] == generator["files"]
        assert 1 <= cfg["lmcc_scheduler_threads"] <= max(1, cpus(c["resources"]["limits"]["cpu"])), \
            "0 starts one scheduler thread per core of the Kubernetes node"
        pre_stop = " ".join(c["lifecycle"]["preStop"]["exec"]["command"])
        sleep = float(re.search(r"sleep\s+(\d+)", pre_stop).group(1))
        grace = k8s.pod["terminationGracePeriodSeconds"]
        assert grace > sleep + clean_stop_bound_s(cfg), \
            f"the grace period {grace} s must cover the preStop {sleep} s and a clean stop " \
            f"(up to {clean_stop_bound_s(cfg)} s)"


def test_the_tls_files_the_configmap_shows_are_in_secrets_the_pods_mount(k8s, tmp_path):
    """HTTPS and TLS between nodes are switched on by uncommenting keys in the
    ConfigMap: each file they name is in a Secret volume the container mounts
    read-only, and the pod's configuration with them is one lmcc node takes."""
    require_binary()
    text = k8s.configmap_lmcc_yaml()
    shown = re.findall(r"^\s*#\s*(lmcc_(?:http|cluster)_tls_[a-z_]+):\s*(\S+)\s*$", text, re.M)
    assert {k for k, _ in shown} == {"lmcc_http_tls_cert_file", "lmcc_http_tls_key_file",
                                     "lmcc_cluster_tls_ca_file", "lmcc_cluster_tls_cert_file",
                                     "lmcc_cluster_tls_key_file"}
    mounts = {m["mountPath"]: m for m in k8s.container["volumeMounts"]}
    for key, path in shown:
        mount = mounts.get(os.path.dirname(path))
        assert mount is not None, f"{key}: {path} is in no mounted volume"
        assert mount.get("readOnly"), key
        assert "secret" in k8s.volume(mount["name"]), f"{key}: {path} is not in a Secret"
    uncommented = re.sub(r"^(\s*)#\s*(lmcc_cluster_tls_[a-z_]+:)", r"\1\2", text, flags=re.M)
    cfg = pod_config(k8s, k8s.pod_names()[0], tmp_path, uncommented)
    for key, path in shown:
        if key.startswith("lmcc_cluster_tls_"):
            assert cfg[key] == path


def test_every_key_the_manifests_name_exists():
    """Comments included: a key shown to switch something on must be one."""
    keys = known_keys()
    named = {m for p in K8S.glob("*.yaml") for m in re.findall(r"\blmcc_[a-z0-9_]+", p.read_text())}
    assert named - keys == set(), f"not keys of lmcc node: {named - keys}"


def test_the_cluster_secret_file_is_kept_out_of_git(k8s):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git checkout")
    (generator,) = k8s.kustomization["secretGenerator"]
    for f in generator["files"]:
        r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q",
                            str((K8S / f).relative_to(REPO))])
        assert r.returncode == 0, f"deploy/kubernetes/{f} holds the secret: .gitignore must list it"


# -- the Dockerfile ---------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), by stage."""
    text = (REPO / "Dockerfile").read_text()
    lines = [ln for ln in text.replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    stages: list[list[str]] = []
    for ln in lines:
        if ln.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(ln.strip())
    return stages


def test_the_dockerfile_makes_the_image_the_manifests_run(k8s):
    stages = dockerfile_stages()
    assert len(stages) == 2, "a build stage and a runtime stage"
    build, runtime = stages
    assert build[0].startswith("FROM debian:bookworm") and runtime[0].startswith("FROM debian:bookworm")
    assert any("deploy/install-deps.sh" in ln for ln in build)
    binary, _ = k8s.command_paths()
    assert any(ln.startswith("COPY --from=build") and ln.split()[-1] == binary for ln in runtime)
    (user,) = [ln.split()[1] for ln in runtime if ln.startswith("USER ")]
    assert user.split(":")[0] == str(k8s.pod["securityContext"]["runAsUser"])
    (volume,) = [ln.split()[1] for ln in runtime if ln.startswith("VOLUME ")]
    data_claim = k8s.sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    assert volume == k8s.mount_of(data_claim)["mountPath"]
    header = (REPO / "Dockerfile").read_text()
    assert f"docker build -t {k8s.container['image']} ." in header, \
        "the Dockerfile's header builds the image the StatefulSet names"


def test_the_runtime_image_has_every_library_lmcc_links():
    require_binary()
    if not (shutil.which("readelf") and shutil.which("dpkg") and shutil.which("ldd")):
        pytest.skip("needs readelf, ldd and dpkg (Debian)")
    (runtime,) = dockerfile_stages()[1:]
    install = " ".join(ln for ln in runtime if "apt-get install" in ln)
    packages = {w for w in install.split() if re.fullmatch(r"lib[a-z0-9.+-]+", w)}
    dynamic = subprocess.run(["readelf", "-d", str(BINARY)], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(
        ["ldd", str(BINARY)], capture_output=True, text=True, check=True).stdout, re.M))
    # In debian:bookworm-slim already (Priority: required).
    base = {"libc6", "libstdc++6", "libgcc-s1"}
    missing = []
    for lib in needed:
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(paths[lib])], capture_output=True,
                               text=True)
        if owner.returncode != 0:
            continue  # not from a Debian package (a sanitizer build's runtime, say)
        package = owner.stdout.split(":")[0]
        if package not in packages | base:
            missing.append(f"{lib} ({package})")
    assert not missing, f"the Dockerfile's runtime stage lacks {missing}"


# -- three pods on this machine -------------------------------------------------------------------


def namespaces_work(tmp: Path) -> bool:
    """Whether this user may make a mount namespace (`unshare -rm`) and put a
    hosts file of its own over /etc/hosts in it."""
    if shutil.which("unshare") is None:
        return False
    hosts = tmp / "hosts-probe"
    hosts.write_text("127.0.0.1 lmcc-probe.invalid\n")
    r = subprocess.run(["unshare", "-rm", "/bin/sh", "-c",
                        'mount --bind "$1" /etc/hosts && getent hosts lmcc-probe.invalid',
                        "probe", str(hosts)], capture_output=True, timeout=30)
    return r.returncode == 0


class Pod(Node):
    """One pod of the StatefulSet as a local process: the container's command
    with the pod's environment, in a mount namespace whose /etc/hosts is the
    cluster's DNS (or, without namespaces, on 127.0.0.1 with its own ports)."""

    def __init__(self, workdir: Path, name: str, ip: str, ports: dict[str, int],
                 command: list[str], env: dict[str, str]):
        super().__init__(workdir, ())
        self.name = name
        self.ip = ip
        self.http_port, self.pull_port = ports["http"], ports["pull"]
        self.reply_port, self.heartbeat_port = ports["reply"], ports["heartbeat"]
        self.command = command
        self.env = env

    @property
    def http_url(self) -> str:
        return f"http://{self.ip}:{self.http_port}"

    @property
    def pull_url(self) -> str:
        return f"{self.ip}:{self.pull_port}"

    @property
    def reply_url(self) -> str:
        return f"{self.ip}:{self.reply_port}"

    @property
    def heartbeat_url(self) -> str:
        return f"{self.ip}:{self.heartbeat_port}"

    def start(self, keep_ports: bool = True, expect_ready: bool = True) -> "Pod":
        self.launch()
        return self.await_ready()

    def launch(self) -> None:
        self.starts = getattr(self, "starts", 0) + 1
        self.log_path = self.workdir / f"{self.name}-{self.starts}.log"
        # The pod's own network address: a container binds 0.0.0.0 in its
        # network namespace; here the pods share one, so each binds its ip.
        env = {**clean_env(), **self.env, ENV_PREFIX + "CONTROLLER_HOST": self.ip}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir, env=env)

    def await_ready(self) -> "Pod":
        try:
            wait_until(self._ready_or_dead, timeout=STARTUP_DEADLINE_S,
                       message=f"{self.name}: GET /readyz == 200")
        except AssertionError:
            self.kill()
            raise AssertionError(f"{self.name} did not become ready:\n{self.log_tail()}")
        assert self.alive(), f"{self.name} exited:\n{self.log_tail()}"
        return self


class Pods:
    """The StatefulSet's pods on loopback, from the manifests."""

    def __init__(self, k8s: Manifests, tmp: Path):
        self.k8s = k8s
        self.tmp = tmp
        self.isolated = namespaces_work(tmp)
        self.hosts = tmp / "hosts"  # the namespaces' /etc/hosts: the headless Service's DNS
        self.secret = tmp / "cluster.secret"
        self.secret.write_text(os.urandom(32).hex())
        self.secret.chmod(0o600)
        names = k8s.pod_names()
        container_ports = {p["name"]: p["containerPort"] for p in k8s.container["ports"]}
        port_names = list(container_ports)
        self.pods: list[Pod] = []
        self.ips: dict[str, str] = {}
        if self.isolated:
            # Every pod on its own address with the same ports, as in Kubernetes.
            same = dict(zip(port_names, free_ports(len(port_names), reserve=True)))
            ports = {name: same for name in names}
            self.ips = {name: f"127.0.5.{2 + i}" for i, name in enumerate(names)}
        else:
            ports = {name: dict(zip(port_names, free_ports(len(port_names), reserve=True)))
                     for name in names}
            self.ips = {name: "127.0.0.1" for name in names}
        self.write_hosts()
        binary, config = k8s.command_paths()
        stdbuf = "stdbuf -oL -eL " if shutil.which("stdbuf") else ""
        base = yaml.safe_load(k8s.configmap_lmcc_yaml())
        for name in names:
            workdir = tmp / name
            workdir.mkdir()
            cfg = dict(base)
            p = ports[name]
            cfg["controller_port"] = p["http"]
            cfg["controller_monitor_ports"] = {"pull": p["pull"], "reply": p["reply"],
                                               "heartbeat": p["heartbeat"]}
            cfg["lmcc_cluster_members"] = [
                {**m, "port": ports[n]["cluster"],
                 **({} if self.isolated else {"host": "localhost"})}
                for m, n in zip(base["lmcc_cluster_members"], names)]
            cfg["lmcc_data_dir"] = str(workdir / "data")  # the pod's volume claim
            cfg["lmcc_cluster_secret_file"] = str(self.secret)
            (workdir / "lmcc.yaml").write_text(yaml.safe_dump(cfg))
            script = k8s.script().replace(binary, stdbuf + shlex.quote(str(BINARY))) \
                .replace(config, shlex.quote(str(workdir / "lmcc.yaml")))
            command = ["/bin/sh", "-c", script]
            env = k8s.pod_env(name)
            if self.isolated:
                command = ["unshare", "-rm", "/bin/sh", "-c",
                           'mount --bind "$1" /etc/hosts && shift && exec "$@"', name,
                           str(self.hosts), *command]
            else:
                env[ENV_PREFIX + "CONTROLLER_ADVERTISE_HOST"] = "localhost"
            self.pods.append(Pod(workdir, name, self.ips[name], p, command, env))

    def write_hosts(self) -> None:
        """Written in place: each namespace's /etc/hosts is bound to this inode."""
        text = "".join(f"{ip} {self.k8s.dns_name(name)}\n" for name, ip in self.ips.items())
        with open(self.hosts, "r+" if self.hosts.exists() else "w") as f:
            f.truncate(0)
            f.write(text)

    def start(self) -> "Pods":
        try:
            for pod in self.pods:  # podManagementPolicy: Parallel
                pod.launch()
            for pod in self.pods:
                pod.await_ready()
            self.wait_whole()
        except BaseException:
            for pod in self.pods:
                pod.kill()
            raise
        return self

    def wait_whole(self, pods: Optional[list[Pod]] = None) -> None:
        pods = pods or self.pods

        def whole():
            statuses = [p.get("/cluster/status", timeout=5).json() for p in pods]
            return (all(s["all_live"] and s["live_members"] == len(self.pods) for s in statuses)
                    and len({s["ring_version"] for s in statuses}) == 1)

        try:
            wait_until(whole, timeout=20, interval=0.1,
                       message=f"every pod sees {len(self.pods)} live members on one ring")
        except AssertionError as e:
            raise AssertionError(f"{e}\n" + "\n".join(p.log_tail(40) for p in self.pods))

    def stop(self) -> None:
        problems = []
        for pod in self.pods:
            if pod.alive():
                rc = pod.stop()
                if rc != 0:
                    problems.append(f"{pod.name} exited with {rc}:\n{pod.log_tail()}")
        assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def pods(k8s, tmp_path_factory):
    require_binary()
    cluster = Pods(k8s, tmp_path_factory.mktemp("pods")).start()
    yield cluster
    cluster.stop()


def tokens(n: int, base: int) -> list[int]:
    return list(range(base, base + n))


def test_the_pods_form_one_cluster_by_their_names_and_any_pod_serves_any_worker(k8s, pods):
    c = k8s.container
    for pod in pods.pods:
        for probe in ("readinessProbe", "livenessProbe"):
            path = c[probe]["httpGet"]["path"]
            assert pod.get(path).status == 200, f"{pod.name} {probe} {path}"
        status = pod.get("/cluster/status").json()
        assert sorted(m["id"] for m in status["members"]) == ["n1", "n2", "n3"]
    # A worker reaches the Service, which sends its connections to one pod;
    # every pod answers its lookups alike.
    w = FakeWorker(pods.pods[0], "k8s-a", 0, ip=unique_ip())
    try:
        w.register()
        prompt = tokens(32 * 256, 1_000_000)
        w.admit_tokens(prompt)
        want = {"k8s-a": [LOCATION, len(prompt)]}
        for pod in pods.pods:
            wait_until(lambda: pod.lookup(prompt) == want, timeout=10,
                       message=f"a whole lookup through {pod.name}")
    finally:
        w.close()


def test_a_pod_back_on_another_address_is_found_again_by_its_name(k8s, pods):
    """A rescheduled pod keeps its name and volume but gets a new IP: the
    other nodes must resolve its name again to reconnect, and lookups must
    read its slots at the new address."""
    if not pods.isolated:
        pytest.skip("needs a mount namespace (unshare -rm) to change what a name resolves to")
    first, moved, third = pods.pods
    w = FakeWorker(first, "k8s-b", 0, ip=unique_ip())
    try:
        w.register()
        prompt = tokens(32 * 256, 2_000_000)
        w.admit_tokens(prompt)
        want = {"k8s-b": [LOCATION, len(prompt)]}
        wait_until(lambda: all(p.lookup(prompt) == want for p in pods.pods), timeout=10,
                   message="the prompt whole through every pod")
        assert moved.stop() == 0, moved.log_tail()
        old = moved.ip
        moved.ip = pods.ips[moved.name] = "127.0.5.12"
        pods.write_hosts()
        moved.start()
        pods.wait_whole()
        assert ipaddress.ip_address(old) != ipaddress.ip_address(moved.ip)
        # With the third pod gone, the slots it shared with the moved one have
        # one live copy left, at the moved pod's new address.
        assert third.stop() == 0, third.log_tail()
        wait_until(lambda: first.get("/cluster/status").json()["live_members"] == 2, timeout=10,
                   message="the first pod sees the third one gone")
        wait_until(lambda: first.lookup(prompt) == want, timeout=10,
                   message="a whole lookup through the first pod, reading the moved one")
    finally:
        w.close()
