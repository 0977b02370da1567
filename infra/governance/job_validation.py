"""Whether a job request can run on this spec: each check raises JobError naming the flag and what is allowed."""

from __future__ import annotations

import re

from infra.governance import device_env
from infra.governance import queues as q
from infra.governance import resources as res
from infra.governance.job_fault_tolerance import LIGHTHOUSE_SHARE, MAX_RESTARTABLE_GROUPS
from infra.governance.job_launcher import (
    LAUNCHER_FLAGS,
    NODE_NAME_ENV,
    NODE_RANK_ENV,
    PEER_SECRET_ENV,
    POD_IP_ENV,
    REPLICA_ID_ENV,
    SUBMIT_FLAGS,
    launch_command,
)
from infra.governance.job_placement import levels_of
from infra.governance.references import env_name_problem, image_problem
from infra.governance.job_request import (
    FAULT_TOLERANCE,
    GRACE_RANGE,
    JOB_NAME,
    MAX_RESTARTS,
    RESTARTS,
    RUNTIMES,
    JobError,
    JobRequest,
    multi_node_in_process,
)
from infra.spec.cluster import ClusterSpec
from openpod_core import labels


def validate(spec: ClusterSpec, req: JobRequest) -> None:
    """Raise JobError naming the first thing that cannot work and what is allowed."""
    low, high = GRACE_RANGE
    if not low <= req.grace <= high:
        raise JobError(f"--grace-seconds {req.grace} not allowed; use {low} to {high} (seconds a pod gets after "
                       "SIGTERM to checkpoint and exit)")
    if not JOB_NAME.match(req.name):
        raise JobError(f"--name {req.name!r} not allowed; use lowercase letters, digits and '-', starting with a "
                       "letter, at most 40 characters")
    problem = image_problem(req.image)
    if problem:
        raise JobError(f"--image {req.image!r} {problem}")
    for key in req.env:
        problem = env_name_problem(key)
        if problem:
            raise JobError(f"--env {key!r} {problem}")
        if device_env.selects_devices(key):
            raise JobError(f"--env {key} not allowed: {device_env.describe()} select accelerators outside the "
                           "device plugins (admission refuses them too); they come with --accelerators-per-node")
    teams = [t.name for t in spec.teams]
    if req.team not in teams:
        raise JobError(f"--team {req.team!r} is not a team of this spec; teams are: {', '.join(teams) or '(none)'}")
    priorities = [p.name for p in spec.priorities]
    if req.priority not in priorities:
        raise JobError(f"--priority {req.priority!r} is not a priority of this spec; priorities are: "
                       f"{', '.join(priorities)}")
    queued = [g.name for g in q.queued_groups(spec)]
    if req.group not in queued:
        raise JobError(f"--group {req.group!r} has no team quota in this spec; groups with queues are: "
                       f"{', '.join(queued) or '(none)'}")
    group = spec.group(req.group)
    t = group.type
    if req.nodes < 1:
        raise JobError(f"--nodes {req.nodes} not allowed; at least 1")
    cap = q.capacity(spec, spec.team(req.team), req.group)
    if req.nodes > cap.max_nodes:
        raise JobError(f"--nodes {req.nodes} is more than team {req.team} could ever get on group {req.group}: "
                       f"at most {cap.max_nodes} (nominal {cap.nominal} + borrowable {cap.borrowable} within "
                       f"the cohort)")
    if req.accelerators_per_node is not None:
        if not t.is_accelerated:
            raise JobError(f"--accelerators-per-node not allowed: group {req.group} ({t.name}) has no accelerators")
        if not 1 <= req.accelerators_per_node <= t.accelerator_count:
            raise JobError(f"--accelerators-per-node {req.accelerators_per_node} not allowed: {t.name} has "
                           f"{t.accelerator_count} {t.accelerator_model}; use 1 to {t.accelerator_count}")
    if req.require_topology and req.prefer_topology:
        raise JobError("--require-topology and --prefer-topology are exclusive; give one")
    level = req.require_topology or req.prefer_topology
    if level:
        flag = "--require-topology" if req.require_topology else "--prefer-topology"
        allowed = levels_of(q.topology_of(group))
        if level not in allowed:
            raise JobError(f"{flag} {level!r} not available on group {req.group} ({t.name}); levels are: "
                           f"{', '.join(allowed)}")
        if req.require_topology == "ultraserver" and t.ultraserver and req.nodes > t.ultraserver.instances:
            raise JobError(f"--nodes {req.nodes} cannot fit one UltraServer: {t.ultraserver.name} has "
                           f"{t.ultraserver.instances} instances")
        if req.require_topology == "host" and req.nodes > 1:
            raise JobError(f"--nodes {req.nodes} cannot fit one host; --require-topology host needs --nodes 1")
    if not 0 <= req.max_restarts <= MAX_RESTARTS:
        raise JobError(f"--max-restarts {req.max_restarts} not allowed; use 0 to {MAX_RESTARTS}")
    if req.hugepages_mi is not None:
        if req.hugepages_mi < 0 or req.hugepages_mi % labels.HUGEPAGE_SIZE_MI:
            raise JobError(f"--hugepages {req.hugepages_mi} not allowed; use 0 or more MiB, a multiple of "
                           f"{labels.HUGEPAGE_SIZE_MI} (2 MiB pages)")
        if t.efa_supported and req.hugepages_mi > labels.EFA_HUGEPAGES_MI:
            raise JobError(f"--hugepages {req.hugepages_mi} is more than an EFA node of group {req.group} has: "
                           f"nodes preallocate {labels.EFA_HUGEPAGES_MI} MiB; use 0 to {labels.EFA_HUGEPAGES_MI}")
        accel = req.accelerators_per_node or t.accelerator_count
        share = res.hugepages_share_mi(t, accel)
        if t.efa_supported and req.hugepages_mi > share:
            raise JobError(f"--hugepages {req.hugepages_mi} is more than the share of a job using {accel} of "
                           f"{t.accelerator_count} accelerators per node: {share} of the node's "
                           f"{labels.EFA_HUGEPAGES_MI} MiB (more would hold the whole node's hugepages while "
                           f"quota charges part of it); use 0 to {share}")
    if req.shm_gi is not None:
        memory = res.pod_share(t, req.accelerators_per_node or t.accelerator_count).memory_gib
        if not 1 <= req.shm_gi < memory:
            raise JobError(f"--shm {req.shm_gi} not allowed; /dev/shm counts against the pod's {memory} GiB of "
                           f"memory: use 1 to {memory - 1} GiB")
    if req.runtime not in RUNTIMES:
        raise JobError(f"--runtime {req.runtime!r} not allowed; use one of: {', '.join(RUNTIMES)}")
    _validate_fault_tolerance(spec, req)
    _validate_restart(spec, req)
    if req.runtime == "openpod":
        _validate_openpod(spec, req)
    elif req.s3_uri is not None:
        raise JobError("--s3-uri needs --runtime openpod (the torchrun runtime leaves checkpoints to the script)")
    elif not req.script:
        raise JobError("no training script given; put it after --, e.g. -- train.py --config llama.yaml")


def _validate_openpod(spec: ClusterSpec, req: JobRequest) -> None:
    t = spec.group(req.group).type
    if t.device_resource == res.NEURON:
        raise JobError(f"--runtime openpod not available on group {req.group} ({t.name}): the training runtime "
                       "runs on NVIDIA GPUs or CPU; use --runtime torchrun with a Neuron training script")
    if req.s3_uri is not None and not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", req.s3_uri):
        raise JobError(f"--s3-uri {req.s3_uri!r} not allowed; use s3://<checkpoints bucket>/{req.team}[/prefix] "
                       "(the bucket is the stack's checkpoints bucket output)")
    if req.s3_uri is not None and req.s3_uri.split("/")[3:4] != [req.team]:
        raise JobError(f"--s3-uri {req.s3_uri!r} not allowed; use s3://<checkpoints bucket>/{req.team}[/prefix]: "
                       f"the training role reaches only its team's prefix ({req.team}/)")
    for key in (POD_IP_ENV, NODE_NAME_ENV, PEER_SECRET_ENV):
        if key in req.env:
            raise JobError(f"--env {key} not allowed with --runtime openpod: it is set from the pod itself")
    for arg in req.script:
        flag = arg.split("=", 1)[0]
        if flag in SUBMIT_FLAGS:
            raise JobError(f"{flag} after -- not allowed with --runtime openpod: give it to openpod submit ({flag} "
                           "before --), which sets it on every node's launcher")
        if flag in LAUNCHER_FLAGS:
            raise JobError(f"{flag} after -- not allowed with --runtime openpod: submit sets it from the job "
                           f"(set by submit: {', '.join(LAUNCHER_FLAGS)})")
    from training.cli import check_run_args  # the runtime's own parser: no torch import

    problems = check_run_args([a.replace(f"$({REPLICA_ID_ENV})", "0").replace(f"$({NODE_RANK_ENV})", "0")
                               for a in launch_command(spec, req)[4:]])
    refused = [p for p in problems if p.startswith(tuple(f"{f}:" for f in (*SUBMIT_FLAGS, "--node-rank")))]
    if req.restart == "in-process" and refused:  # e.g. replica groups, or more nodes than the runtime supports
        raise JobError(f"--restart in-process: the training runtime refuses it for this job: {'; '.join(refused)}")
    if problems:
        raise JobError(f"training args after -- not accepted by python -m training run: {'; '.join(problems)}")


def _validate_fault_tolerance(spec: ClusterSpec, req: JobRequest) -> None:
    if req.fault_tolerance not in FAULT_TOLERANCE:
        raise JobError(f"--fault-tolerance {req.fault_tolerance!r} not allowed; use one of: "
                       f"{', '.join(FAULT_TOLERANCE)}")
    if not req.replica_mode:
        given = [f for f, v in (("--replicas", req.replicas), ("--min-replicas", req.min_replicas or None))
                 if v is not None]
        if given:
            raise JobError(f"{given[0]} only applies with --fault-tolerance replica")
        return
    if req.runtime != "openpod":
        raise JobError("--fault-tolerance replica needs --runtime openpod (the platform's runtime runs the "
                       "replica groups and heals a restarted one from a live peer)")
    if REPLICA_ID_ENV in req.env:
        raise JobError(f"--env {REPLICA_ID_ENV} not allowed with --fault-tolerance replica: it is the child Job's "
                       "index, set from the pod itself")
    r = req.groups
    if r < 2 or req.nodes % r:
        raise JobError(f"--replicas {r} not allowed with --nodes {req.nodes}; use a divisor of --nodes from 2 "
                       f"to {req.nodes} (every replica group has the same number of nodes)" if req.nodes > 1 else
                       f"--fault-tolerance replica needs at least 2 replica groups: --nodes {req.nodes} has one "
                       "(use --nodes 2 or more)")
    if r > MAX_RESTARTABLE_GROUPS:
        raise JobError(f"--replicas {r} not allowed: JobSet restarts a lost replica group alone only for at most "
                       f"{MAX_RESTARTABLE_GROUPS} groups per job; use a divisor of --nodes {req.nodes} up to "
                       f"{MAX_RESTARTABLE_GROUPS} (groups of several nodes)")
    if not 0 <= req.min_replicas <= r:
        raise JobError(f"--min-replicas {req.min_replicas} not allowed; use 0 (all {r} groups) to {r}")
    t = spec.group(req.group).type
    share = res.pod_share(t, req.accelerators_per_node or t.accelerator_count)
    if share.cpu <= LIGHTHOUSE_SHARE.cpu or share.memory_gib <= LIGHTHOUSE_SHARE.memory_gib:
        raise JobError(f"--fault-tolerance replica not available with {share.cpu} vCPU / {share.memory_gib} GiB "
                       f"per pod: the Lighthouse takes {LIGHTHOUSE_SHARE.cpu} vCPU and "
                       f"{LIGHTHOUSE_SHARE.memory_gib} GiB of it; use more --accelerators-per-node")


def _validate_restart(spec: ClusterSpec, req: JobRequest) -> None:
    if req.restart not in RESTARTS:
        raise JobError(f"--restart {req.restart!r} not allowed; use one of: {', '.join(RESTARTS)}")
    if req.restart != "in-process":
        if req.spare_workers is not None:
            raise JobError("--spare-workers only applies with --restart in-process")
        return
    if req.runtime != "openpod":
        raise JobError("--restart in-process needs --runtime openpod: torchrun restarts every worker of the node; "
                       "the platform's launcher replaces the failed rank alone")
    if multi_node_in_process(req) and NODE_RANK_ENV in req.env:
        raise JobError(f"--env {NODE_RANK_ENV} not allowed with --restart in-process on several nodes: it is the "
                       "pod's index in its Job, set from the pod itself")
    t = spec.group(req.group).type
    nproc = res.processes_per_node(t, req.accelerators_per_node or t.accelerator_count)
    if req.spare_workers is not None and not 0 <= req.spare_workers <= nproc:
        raise JobError(f"--spare-workers {req.spare_workers} not allowed; use 0 (a replacement starts from scratch) "
                       f"to {nproc} (the node's {nproc} ranks: a spare takes one failed rank's place and a new one "
                       "starts behind it)")
