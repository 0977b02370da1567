"""Pod Security Standards' Baseline profile at the pinned Kubernetes version, as a table of controls and the CEL
checks that implement each one.

Every control is derived from pod-security-admission's source at the tag of the spec's default EKS version
(1.34: kubernetes/pod-security-admission@v0.34.0, the published copy of kubernetes/kubernetes@v1.34.0
``staging/src/k8s.io/pod-security-admission``; read 2026-11-28), cited file:line. ``CONTROLS`` lists every check
of ``Level: api.LevelBaseline`` at that tag with the version that applies at 1.34 (the newest ``MinimumVersion``
<= 1.34); ``CHECKS`` holds the CEL of each, over ``variables.pods`` (objects with ``metadata`` and ``spec``: a Pod,
or pod templates) and ``variables.specs`` (their specs). Two departures, both stated in the table: ``IPC_LOCK`` added to the allowed capabilities
(EFA registers memory), and hostPath volumes, which this module does not judge - the team policy
(``admission.py``) narrows them to the runtime's own job directories, the pair-check policy refuses them.
Shared by the team pod policies (``admission.py``) and the remediation controller's pair-check policy
(``node_agent/deploy.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

PSA = "kubernetes/pod-security-admission@v0.34.0"
BASELINE_VERSION = "1.34"

# Baseline's allowed added capabilities (check_capabilities_baseline.go:61-77), plus IPC_LOCK for EFA.
ALLOWED_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT", "IPC_LOCK")
# Baseline's safe sysctls at 1.32+ (check_sysctls.go:85-106, sysctlsAllowedV1Dot32).
SAFE_SYSCTLS = ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
# SELinux types allowed at 1.31+ (check_seLinuxOptions.go:77-80, selinuxAllowedTypes1_31); "" = unset.
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# seccomp / AppArmor profile types allowed (check_seccompProfile_baseline.go:75-78; check_appArmorProfile.go:73-81).
PROFILE_TYPES = ("RuntimeDefault", "Localhost")
# The deprecated AppArmor annotation (check_appArmorProfile.go:67-71, 115-120): allowed values "", runtime/default,
# localhost/<name>.
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"

# Every container kind (visitor.go:27-37: init, regular and ephemeral containers).
CONTAINERS = ("(s.containers + (has(s.initContainers) ? s.initContainers : []) + "
              "(has(s.ephemeralContainers) ? s.ephemeralContainers : []))")
_CONTAINERS = CONTAINERS


@dataclass(frozen=True)
class Control:
    """One Baseline control of pod-security-admission at ``PSA``."""

    id: str            # the check's ID in pod-security-admission
    source: str        # file:line of its definition and the version in force at 1.34
    fields: str        # what it restricts
    openpod: str       # "as Baseline", or how openpod departs from it


CONTROLS: tuple[Control, ...] = (
    Control("appArmorProfile", "policy/check_appArmorProfile.go:54-65,67-143",
            "securityContext.appArmorProfile.type (pod, every container); the "
            f"{APPARMOR_ANNOTATION}* annotations", "as Baseline"),
    Control("capabilities_baseline", "policy/check_capabilities_baseline.go:48-110",
            "capabilities.add of every container", "as Baseline plus IPC_LOCK (EFA registers memory)"),
    Control("hostNamespaces", "policy/check_hostNamespaces.go:45-82", "hostNetwork, hostPID, hostIPC", "as Baseline"),
    Control("hostPathVolumes", "policy/check_hostPathVolumes.go:45-76",
            "volumes[].hostPath",
            "narrowed exception: team pods only <root>/<team>/<job> (admission.py); pair-check pods none"),
    Control("hostPorts", "policy/check_hostPorts.go:47-91", "ports[].hostPort of every container", "as Baseline"),
    Control("hostProbesAndHostLifecycle", "policy/check_hostProbesAndhostLifecycle.go:64-75,86-165 (1.34+)",
            "host of probes' httpGet/tcpSocket and lifecycle handlers' httpGet/tcpSocket", "as Baseline"),
    Control("privileged", "policy/check_privileged.go:43-75", "securityContext.privileged of every container",
            "as Baseline"),
    Control("procMount", "policy/check_procMount.go:50-102", "securityContext.procMount of every container",
            "stricter: the user-namespace relaxation (hostUsers: false, opt-in in PSA) is not taken"),
    Control("seLinuxOptions", "policy/check_seLinuxOptions.go:60-75,77-80,90-172 (1.31+ types)",
            "seLinuxOptions.type, .user, .role (pod, every container)", "as Baseline"),
    Control("seccompProfile_baseline", "policy/check_seccompProfile_baseline.go:58-73,121-171 (1.19+: fields)",
            "securityContext.seccompProfile.type (pod, every container)", "as Baseline"),
    Control("sysctls", "policy/check_sysctls.go:61-106,120-143 (1.32+ list)", "securityContext.sysctls[].name",
            "as Baseline"),
    Control("windowsHostProcess", "policy/check_windowsHostProcess.go:46-102",
            "windowsOptions.hostProcess (pod, every container)", "as Baseline"),
)


def cel_list(items) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


_cel_list = cel_list


def _set(obj: str, *fields: str) -> str:
    """CEL: ``obj.f1.f2...`` is present."""
    parts, out = [obj], []
    for f in fields:
        out.append(f"has({'.'.join(parts)}.{f})")
        parts.append(f)
    return " && ".join(out)


def _sc(obj: str, *fields: str) -> tuple[str, str]:
    return _set(obj, "securityContext", *fields), ".".join([obj, "securityContext", *fields])


def _pod_and_containers(*fields: str, ok: str) -> str:
    """CEL: the pod's and every container's ``securityContext.<fields>``, where set, satisfy ``ok`` ({v})."""
    pod_has, pod_v = _sc("s", *fields)
    c_has, c_v = _sc("c", *fields)
    return (f"variables.specs.all(s, (!({pod_has}) || {ok.format(v=pod_v)}) && "
            f"{_CONTAINERS}.all(c, !({c_has}) || {ok.format(v=c_v)}))")


def _containers(expr: str) -> str:
    return f"variables.specs.all(s, {_CONTAINERS}.all(c, {expr}))"


def _no_host(handler: str) -> str:
    """CEL: the handler (a probe or lifecycle handler of ``c``) sets no host in httpGet or tcpSocket."""
    parts = handler.split(".")
    present = _set(parts[0], *parts[1:])
    return (f"(!({present}) || ((!has({handler}.httpGet) || !has({handler}.httpGet.host) || "
            f"{handler}.httpGet.host == '') && (!has({handler}.tcpSocket) || !has({handler}.tcpSocket.host) || "
            f"{handler}.tcpSocket.host == '')))")


def _checks() -> dict[str, list[tuple[str, str]]]:
    has_add, add = _sc("c", "capabilities", "add")
    has_priv, priv = _sc("c", "privileged")
    has_proc, proc = _sc("c", "procMount")
    sys_has, sysctls = _sc("s", "sysctls")
    probes = " && ".join(_no_host(f"c.{p}") for p in ("livenessProbe", "readinessProbe", "startupProbe"))
    hooks = " && ".join(_no_host(f"c.lifecycle.{h}") for h in ("postStart", "preStop"))
    selinux = ("(!has({v}.type) || {v}.type in " + cel_list(SELINUX_TYPES) + ") && "
               "(!has({v}.user) || {v}.user == '') && (!has({v}.role) || {v}.role == '')")
    return {
        "appArmorProfile": [
            (_pod_and_containers("appArmorProfile", "type", ok="{v} in " + cel_list(PROFILE_TYPES)),
             "appArmorProfile.type must be RuntimeDefault or Localhost"),
            (f"variables.pods.all(p, !has(p.metadata) || !has(p.metadata.annotations) || p.metadata.annotations.all(k, "
             f"!k.startsWith('{APPARMOR_ANNOTATION}') || p.metadata.annotations[k] == '' || "
             "p.metadata.annotations[k] == 'runtime/default' || p.metadata.annotations[k].startsWith('localhost/')))",
             f"annotations {APPARMOR_ANNOTATION}<container> may only be runtime/default or localhost/<profile>")],
        "capabilities_baseline": [
            (_containers(f"!({has_add}) || {add}.all(x, x in {cel_list(ALLOWED_CAPABILITIES)})"),
             "securityContext.capabilities.add may only hold " + ", ".join(ALLOWED_CAPABILITIES))],
        "hostNamespaces": [
            ("variables.specs.all(s, !(has(s.hostNetwork) && s.hostNetwork) && "
             "!(has(s.hostPID) && s.hostPID) && !(has(s.hostIPC) && s.hostIPC))",
             "hostNetwork, hostPID and hostIPC are not allowed")],
        "hostPorts": [
            (_containers("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)"),
             "hostPort is not allowed (ports[].hostPort)")],
        "hostProbesAndHostLifecycle": [
            (_containers(f"{probes} && {hooks}"),
             "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): the kubelet would "
             "connect from the node to any address")],
        "privileged": [
            (_containers(f"!({has_priv}) || !{priv}"),
             "privileged containers are not allowed (securityContext.privileged)")],
        "procMount": [
            (_containers(f"!({has_proc}) || {proc} == 'Default'"), "securityContext.procMount must be Default")],
        "seLinuxOptions": [
            (_pod_and_containers("seLinuxOptions", ok="(" + selinux + ")"),
             "seLinuxOptions: type must be unset or one of " + ", ".join(t for t in SELINUX_TYPES if t)
             + "; user and role may not be set")],
        "seccompProfile_baseline": [
            (_pod_and_containers("seccompProfile", "type", ok="{v} in " + cel_list(PROFILE_TYPES)),
             "seccompProfile.type must be RuntimeDefault or Localhost")],
        "sysctls": [
            (f"variables.specs.all(s, !({sys_has}) || {sysctls}.all(x, x.name in {cel_list(SAFE_SYSCTLS)}))",
             "only Baseline's safe sysctls are allowed (securityContext.sysctls)")],
        "windowsHostProcess": [
            (_pod_and_containers("windowsOptions", "hostProcess", ok="!{v}"),
             "windowsOptions.hostProcess is not allowed")],
    }


CHECKS: dict[str, list[tuple[str, str]]] = _checks()
# Controls this module leaves to the policy that uses it (each says how in CONTROLS).
LEFT_TO_CALLER = ("hostPathVolumes",)


def baseline_checks() -> list[tuple[str, str]]:
    """(CEL over ``variables.pods`` and ``variables.specs``, message) pairs: every control but hostPath."""
    return [check for c in CONTROLS if c.id in CHECKS for check in CHECKS[c.id]]


def coverage() -> tuple[int, int]:
    """(controls judged by the platform, Baseline controls at ``PSA``)."""
    return sum(1 for c in CONTROLS if c.id in CHECKS or c.id in LEFT_TO_CALLER), len(CONTROLS)
