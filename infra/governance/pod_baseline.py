"""Pod Security Standards' Baseline profile as CEL checks over ``variables.specs`` (a list of pod specs).

https://kubernetes.io/docs/concepts/security/pod-security-standards/ ("Baseline", checked 2026-11-23), with one
addition to the allowed capabilities: IPC_LOCK (EFA registers memory). Shared by the team pod policy
(``admission.py``) and the remediation controller's pair-check policy (``node_agent/deploy.py``).
"""

from __future__ import annotations

# Baseline's allowed added capabilities, plus IPC_LOCK for EFA.
ALLOWED_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT", "IPC_LOCK")
# Baseline's safe sysctls.
SAFE_SYSCTLS = ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes")

CONTAINERS = ("(s.containers + (has(s.initContainers) ? s.initContainers : []) + "
              "(has(s.ephemeralContainers) ? s.ephemeralContainers : []))")
_CONTAINERS = CONTAINERS


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


def baseline_checks() -> list[tuple[str, str]]:
    """(CEL over ``variables.specs``, message) pairs: each Baseline control, one message per control."""
    c_checks = []
    for field, bad, msg in (
            ("privileged", "{v}", "privileged containers are not allowed (securityContext.privileged)"),
            ("procMount", "{v} != 'Default'", "securityContext.procMount must be Default"),
    ):
        has, value = _sc("c", field)
        c_checks.append((f"!({has}) || !({bad.format(v=value)})", msg))
    has_add, add = _sc("c", "capabilities", "add")
    c_checks.append((f"!({has_add}) || {add}.all(x, x in {_cel_list(ALLOWED_CAPABILITIES)})",
                     "securityContext.capabilities.add may only hold " + ", ".join(ALLOWED_CAPABILITIES)))
    c_checks.append(("!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)",
                     "hostPort is not allowed (ports[].hostPort)"))
    checks = [(f"variables.specs.all(s, {_CONTAINERS}.all(c, {expr}))", msg) for expr, msg in c_checks]
    checks.append(("variables.specs.all(s, !(has(s.hostNetwork) && s.hostNetwork) && "
                   "!(has(s.hostPID) && s.hostPID) && !(has(s.hostIPC) && s.hostIPC))",
                   "hostNetwork, hostPID and hostIPC are not allowed"))
    for kind, msg in (("seccompProfile", "seccompProfile.type Unconfined is not allowed"),
                      ("appArmorProfile", "appArmorProfile.type Unconfined is not allowed")):
        pod_has, pod_v = _sc("s", kind, "type")
        c_has, c_v = _sc("c", kind, "type")
        checks.append((f"variables.specs.all(s, (!({pod_has}) || {pod_v} != 'Unconfined') && "
                       f"{_CONTAINERS}.all(c, !({c_has}) || {c_v} != 'Unconfined'))", msg))
    se_has, se = _sc("s", "seLinuxOptions")
    c_se_has, c_se = _sc("c", "seLinuxOptions")
    checks.append((f"variables.specs.all(s, (!({se_has}) || !(has({se}.user) || has({se}.role))) && "
                   f"{_CONTAINERS}.all(c, !({c_se_has}) || !(has({c_se}.user) || has({c_se}.role))))",
                   "seLinuxOptions.user and .role are not allowed"))
    sys_has, sysctls = _sc("s", "sysctls")
    checks.append((f"variables.specs.all(s, !({sys_has}) || {sysctls}.all(x, x.name in {_cel_list(SAFE_SYSCTLS)}))",
                   "only Baseline's safe sysctls are allowed (securityContext.sysctls)"))
    return checks
