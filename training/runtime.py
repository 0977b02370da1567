"""What a training script adopts in a few lines: process group, data plan, checkpoints, goodput.

    rt = Runtime(cfg)                        # joins the (elastic) job, starts components
    start = rt.restore(model, optimizer)     # newest complete checkpoint (or a live replica's state), 0 if none
    for step in rt.steps(start):             # = range(start, cfg.steps), unless replica fault tolerance
        plan = rt.plan(step)                 # this rank's micro-batches of the global batch
        ...forward/backward over plan.micro_batches, loss scaled by 1 / plan.global_batch...
        loss = rt.sync_gradients(model, loss_sum)   # a 0-dim tensor: float() it only when needed
        if rt.commit():                      # always, unless a replica group was lost during the step
            optimizer.step()
            rt.step_done(step, model, optimizer, loss)   # goodput, checkpoint when due
        if rt.should_stop:                   # SIGTERM: this step is durable; stop here
            break
    result = rt.finish(model, optimizer)

A loop written as ``for step in range(start, cfg.steps)`` without ``commit()`` keeps working
wherever replica fault tolerance is off.

Each component is switched by its config section; the same code runs with gloo on
CPU and NCCL on CUDA.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from training import faults
from training.checkpoint import SHARED, Checkpointer, RestoreInfo, state_sha256
from training.config import RunConfig
from training.data import SampleOrder, StepPlan, TokenShards, plan_step
from training.goodput import Goodput, durable_commits
from training.storage_utils import atomic_write

log = logging.getLogger("training")


class LRSchedule:
    """Warm-up then cosine decay to ``min_lr_ratio`` over ``decay_steps``: a function of the global step.

    Its parameters are fixed when the job first starts (``decay_steps`` = that run's
    ``--steps``) and saved with every checkpoint, so a resumed job follows the same
    schedule whatever ``--steps`` it is given (the world size does not matter either).
    """

    def __init__(self, lr: float, warmup_steps: int, min_lr_ratio: float, decay_steps: int):
        self.lr, self.warmup_steps, self.min_lr_ratio, self.decay_steps = lr, warmup_steps, min_lr_ratio, decay_steps

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "LRSchedule":
        o = cfg.optim
        return cls(o.lr, o.warmup_steps, o.min_lr_ratio, cfg.steps)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.decay_steps - self.warmup_steps)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    def state_dict(self) -> dict:
        return {"lr": self.lr, "warmup_steps": self.warmup_steps, "min_lr_ratio": self.min_lr_ratio,
                "decay_steps": self.decay_steps}

    def load_state_dict(self, sd: dict) -> None:
        self.lr, self.warmup_steps = float(sd["lr"]), int(sd["warmup_steps"])
        self.min_lr_ratio, self.decay_steps = float(sd["min_lr_ratio"]), int(sd["decay_steps"])


def lr_at(step: int, cfg: RunConfig) -> float:
    """The schedule a fresh job with ``cfg`` starts with (a resumed job uses ``Runtime.lr_schedule``)."""
    return LRSchedule.from_config(cfg)(step)


class Runtime:
    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun: never outlive the agent
            faults.die_with_parent()
        torch.set_num_threads(cfg.threads)
        use_cuda = uses_cuda(cfg)
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if use_cuda:
            torch.cuda.set_device(self.local_rank)
        self.device = torch.device("cuda", self.local_rank) if use_cuda else torch.device("cpu")
        # Every node's local rank 0 serves metrics, so each pod of a job is a scrape target (its own ledger view).
        from training.ft import inprocess

        restarter = inprocess.active  # --restart in-process: this process may already have run a generation
        self.goodput = Goodput(cfg.run_dir, rank=int(os.environ.get("RANK", 0)), metrics_port=cfg.metrics_port,
                               serve=self.local_rank == 0,
                               started=time.time() if restarter is not None and restarter.restarts else None)
        if not dist.is_initialized():
            if "RANK" not in os.environ:  # plain `python script.py`: a world of one
                os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
            dist.init_process_group(backend(cfg), timeout=timedelta(seconds=cfg.pg_timeout_seconds))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        self.node_id = os.environ.get("OPENPOD_NODE_ID") or socket.gethostname()
        self.data = TokenShards(cfg.data.data_dir, cache_dir=cfg.data.cache_dir,
                                cache_max_bytes=int(cfg.data.cache_max_gib * (1 << 30)))
        self.order = SampleOrder(len(self.data), cfg.seed)
        self.checkpointer = None
        self.lr_schedule = LRSchedule.from_config(cfg)  # replaced by the saved one on restore
        if cfg.checkpoint.enabled:
            self.checkpointer = Checkpointer(
                cfg.checkpoint, rank=self.rank, world_size=self.world_size,
                local_world_size=self.local_world_size, node_id=self.node_id,
                scratch_dir=Path(cfg.run_dir) / "scratch" / f"rank_{self.rank:05d}")
            self.checkpointer.register("lr_schedule", self.lr_schedule)
            self.goodput.watch_durable(lambda ck=self.checkpointer: durable_commits(ck))  # checkpoint age
            self.goodput.watch_tier_lag(self.checkpointer.promoter.lag, cfg.checkpoint.tier_lag_saves, SHARED)
        if restarter is not None:
            restarter.on_abort(self.abandon)
        self.ft = None  # replica fault tolerance (training/ft/replica.py), switched by cfg.fault_tolerance
        if cfg.fault_tolerance.mode == "replica":
            if cfg.tp > 1:
                raise ValueError("fault_tolerance: replica mode does not support tp > 1")
            if cfg.parallelism not in ("ddp", "fsdp"):  # fsdp inside a group + replica groups = HSDP
                raise ValueError(f"fault_tolerance: replica mode supports parallelism ddp or fsdp, not "
                                 f"{cfg.parallelism!r}")
            from training.ft.replica import ReplicaGroup

            self.ft = ReplicaGroup(cfg.fault_tolerance, group_rank=self.rank, group_world_size=self.world_size,
                                   device=self.device)
        elif cfg.fault_tolerance.mode != "restart":
            raise ValueError(f"fault_tolerance.mode: {cfg.fault_tolerance.mode!r} is not one of restart, replica")
        self.heartbeat = None
        self._compute_s = 0.0  # the last step's compute before its gradient collective (sync_gradients)
        ft_dir = os.environ.get("OPENPOD_FT_DIR")  # set by the launcher (python -m training run)
        if ft_dir:
            from training.ft.heartbeat import Heartbeat
            from training.ft.watchdog import install_stack_dump

            install_stack_dump(ft_dir, self.rank)         # SIGUSR1 -> every thread's stack, for the watchdog
            beats_dir = os.environ.get("OPENPOD_BEATS_DIR") or ft_dir  # node-local (set by the launcher)
            self.heartbeat = Heartbeat(beats_dir, self.rank)
            if cfg.metrics_port is not None and self.local_rank == 0:  # this node's ranks' scores, read at scrape
                from training.straggler import StragglerCollector

                self.goodput.serve_also(StragglerCollector(beats_dir))
            # read by the watchdog (and tests) while this runs: whole or absent, never empty (temp + rename)
            atomic_write(Path(ft_dir, f"pid-{self.rank}"), str(os.getpid()).encode(), fsync=False)
        from training.ft.preemption import StopRequest

        self.stop = StopRequest().install()  # SIGTERM -> checkpoint this step durably, then stop
        self._stop_agreed: tuple[int, bool] | None = None  # (step, any rank asked), set by the step's all-reduce
        self.should_stop = False
        self.preempted: dict | None = None   # {"step", "durable"} once stopped by SIGTERM
        self.restored = None
        self.last_loss = None  # see the property
        self._step = -1               # the step plan() was last called for
        self._sample_log = os.environ.get("OPENPOD_SAMPLE_LOG")
        self.data_rank = (self.rank, self.world_size)  # (rank, ranks) the global batch is split over; TP: dp only

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Apply ``cfg.parallelism`` to ``model`` (before the optimizer is built).

        ddp: unchanged (gradients are summed by :meth:`sync_gradients`). fsdp: FSDP2
        ``fully_shard`` of every block and the root over a 1-D mesh of all ranks. hsdp:
        the same over a 2-D (replicate, shard) mesh, shard groups of ``shard_size`` ranks
        (default: one node). ``tp`` > 1 (with fsdp): a (dp, tp) mesh; the model's ``tp_plan()`` splits its layers
        over tp, FSDP2 shards over dp, and the data is split over dp only. Gradients are summed, not averaged,
        across ranks: the loss
        is already scaled by 1 / global batch, so every parallelism computes the same step.
        """
        kind, tp = self.cfg.parallelism, self.cfg.tp
        if tp > 1 and kind != "fsdp":
            raise ValueError(f"tp: tensor parallelism needs parallelism fsdp, not {kind!r}")
        if kind == "ddp":
            return model
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        if tp > 1:  # tp: consecutive ranks (one node's GPUs), dp: across them; model.tp_plan() splits the layers
            if self.world_size % tp:
                raise ValueError(f"tp: {tp} does not divide the world size {self.world_size}")
            from torch.distributed.tensor.parallel import parallelize_module

            mesh2 = init_device_mesh(self.device.type, (self.world_size // tp, tp), mesh_dim_names=("dp", "tp"))
            plan = model.tp_plan()
            for block in model.blocks:
                parallelize_module(block, mesh2["tp"], plan["block"])
            parallelize_module(model, mesh2["tp"], plan["root"])
            self.data_rank = (mesh2.get_local_rank("dp"), self.world_size // tp)
            mesh = mesh2["dp"]
        elif kind == "fsdp":
            mesh = init_device_mesh(self.device.type, (self.world_size,), mesh_dim_names=("shard",))
        elif kind == "hsdp":
            shard = self.cfg.shard_size or self.local_world_size
            if self.world_size % shard:
                raise ValueError(f"shard_size: {shard} does not divide the world size {self.world_size}")
            mesh = init_device_mesh(self.device.type, (self.world_size // shard, shard),
                                    mesh_dim_names=("replicate", "shard"))
        else:
            raise ValueError(f"parallelism: {kind!r} is not one of ddp, fsdp, hsdp")
        for block in getattr(model, "blocks", []):
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        # Sum, with a plain SUM collective: a custom factor alone selects PREMUL_SUM, which gloo lacks
        # (torch 2.13.0 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:812-866, read 2026-11-23).
        for m in model.modules():
            if hasattr(m, "set_gradient_divide_factor"):
                m.set_gradient_divide_factor(1.0)
                m.set_force_sum_reduction_for_comms(True)
        return model

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
        """The step to start at: a live replica's (replica fault tolerance), else the newest checkpoint's, else 0."""
        healed = False
        if self.ft is not None:
            self.ft.register(lambda: self._live_state(model, optimizer),
                             lambda sd: self._load_live_state(model, optimizer, sd))
            with self.goodput.phase("restore"):
                healed = self.ft.join()  # a peer is ahead: its state is loaded, no checkpoint is read
            if healed:
                h = self.ft.healed
                self.restored = RestoreInfo(step=h["step"], source="peer-replica:torchft", seconds=h["seconds"],
                                            meta={"loss": self.last_loss})
        if self.checkpointer is not None and not healed:
            with self.goodput.phase("restore"), self._beat_phase("restore"):  # a long restore is not a hang
                self.restored = self.checkpointer.restore(model, optimizer)
        start = self.restored.step if self.restored else 0
        if self.ft is not None and not healed:
            self.ft.set_step(start)  # the next quorum heals this group if another one restored a later step
        if self.restored:
            self.last_loss = self.restored.meta.get("loss")
            log.info("rank %d restored step %d from %s in %.3fs", self.rank, start, self.restored.source,
                     self.restored.seconds)
        if self.checkpointer is not None:  # the restore's figures are exported now, not at the first save
            self.goodput.persist(**self.checkpointer.job_gauges())  # every rank's, summed (collective)
        self.goodput.training_starts()
        self._t_step = time.perf_counter()
        return start

    def _beat_phase(self, name: str):
        return self.heartbeat.phase(name) if self.heartbeat is not None else contextlib.nullcontext()

    def steps(self, start: int):
        """The global steps to run, from ``start``. Under replica fault tolerance each one begins with the
        replicas' quorum: a step that did not commit comes again, and a group that just healed from a peer
        continues at the peer's step."""
        step = start
        self._progress = (time.perf_counter(), start)   # (when, step) of the last progress line
        while True:
            if self.ft is not None:
                step = self.ft.begin_step()
            if step >= self.cfg.steps:
                return
            yield step
            if self.ft is None:
                step += 1

    def _components(self) -> dict:
        return self.checkpointer.components if self.checkpointer is not None else {"lr_schedule": self.lr_schedule}

    def _live_state(self, model, optimizer) -> dict:
        """The state a healing replica receives: what a checkpoint holds, plus the last loss."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(model, optimizer)
        # FSDP2: this rank's shards as plain tensors; the receiver (same group rank, same group size) puts them
        # back into its own DTensors
        return {"model": _to_local(msd), "optim": _to_local(osd),
                "components": {n: c.state_dict() for n, c in self._components().items()}, "loss": self.last_loss}

    def _load_live_state(self, model, optimizer, sd: dict) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(model, optimizer)  # templates: this rank's DTensors (mesh, placements)
        set_state_dict(model, optimizer, model_state_dict=_from_local(msd, sd["model"]),
                       optim_state_dict=_from_local(osd, sd["optim"]))
        for name, c in self._components().items():
            c.load_state_dict(sd["components"][name])
        self.last_loss = sd["loss"]

    def commit(self) -> bool:
        """Whether to apply this step (call after :meth:`sync_gradients`, before ``optimizer.step()``): False only
        under replica fault tolerance, when the gradients of every replica in the quorum did not arrive."""
        return self.ft.commit() if self.ft is not None else True

    def plan(self, step: int) -> StepPlan:
        faults.wait_point(step, self.world_size, self.rank)
        faults.hang_point(step, self.rank)
        faults.exit_point(step, self.rank)
        if self.heartbeat is not None:  # the watchdog's culprit: a rank that did not begin the step its peers began
            self.heartbeat.begin(step)
        self._t_step = time.perf_counter()
        self._step = step
        rank, world = self.ft.data_rank() if self.ft is not None else self.data_rank
        p = plan_step(self.order, step, rank=rank, world_size=world,
                      global_batch=self.cfg.data.global_batch, micro_batch=self.cfg.data.micro_batch)
        self._plan = (p, rank, world)
        if self.ft is None:  # under replica fault tolerance: logged when the step commits
            self._log_samples(step, self.world_size, self.rank, p)
        return p

    def _log_samples(self, step: int, world: int, rank: int, p: StepPlan) -> None:
        """One line per rank and step in ``OPENPOD_SAMPLE_LOG`` (tests check which samples each step used)."""
        if self._sample_log:
            with open(self._sample_log, "a") as f:
                f.write(f"{os.getpid()} {step} {world} {rank} {' '.join(map(str, p.sample_ids))}\n")

    def batch(self, ids: list[int]) -> torch.Tensor:
        return self.data.batch(ids).to(self.device, non_blocking=True)

    def sync_gradients(self, model: torch.nn.Module, loss_sum: torch.Tensor) -> torch.Tensor:
        """Sum gradients (already scaled by 1/global_batch) and the loss over ranks in one all-reduce; returns
        the summed loss as a 0-dim tensor (``float()`` reads it, waiting for the device: the runtime itself
        reads it only for a checkpoint's metadata and the result).

        Under FSDP2 the gradients were already reduce-scattered in backward: only the loss is summed.
        A pending SIGTERM rides in the same all-reduce, so every rank learns of it at this step. In a world
        of one without replica groups there is nothing to sum: no buffer, no copy, no read from the device.
        """
        self._compute_s = time.perf_counter() - self._t_step  # this rank's compute, before any rank waits (straggler)
        if self.world_size == 1 and self.ft is None:
            return self._sync_alone(model, loss_sum)
        stop = float(self.stop.requested)
        if self.cfg.parallelism != "ddp":
            t = torch.stack([loss_sum.detach().reshape(()).float(), torch.tensor(stop, device=loss_sum.device)])
            if self.world_size > 1:
                dist.all_reduce(t)
            if self.ft is not None:  # the group's gradient shards (reduce-scattered in it), then over the groups
                t = self._sum_shards_over_groups(model, t)
            self._stop_agreed = (self._step, bool(t[1] > 0))
            # the tp ranks of a dp rank computed the same loss; the quotient in float64, as Python divides
            return torch.tensor(float(t[0]) / self.cfg.tp, dtype=torch.float64)
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)

        def reduce(flat: torch.Tensor) -> None:
            if self.world_size > 1:
                dist.all_reduce(flat)
            if self.ft is not None:  # then over the replica groups (a failure makes commit() return False)
                self.ft.allreduce_sum(flat)

        t = torch.stack([loss_sum.detach().reshape(()).to(params[0].dtype),
                         torch.tensor(stop, dtype=params[0].dtype, device=params[0].device)])
        t = _sum_flat([p.grad for p in params], t, reduce)
        self._stop_agreed = (self._step, bool(t[1] > 0))
        return torch.tensor(float(t[0]), dtype=torch.float64)  # read with the flag; not a view of the buffer

    def _sync_alone(self, model: torch.nn.Module, loss_sum: torch.Tensor) -> torch.Tensor:
        """:meth:`sync_gradients` in a world of one: the same values (missing DDP gradients become zeros, the
        loss in the parameters' dtype, fp32 under FSDP2) with no flat buffer and no read of the device; the
        stop request is this process's own."""
        self._stop_agreed = (self._step, self.stop.requested)
        loss = loss_sum.detach().reshape(())
        if self.cfg.parallelism != "ddp":
            return loss.float()
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return loss.to(params[0].dtype)

    def clip_grad_norm_(self, model: torch.nn.Module, max_norm: float) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` for every parallelism. With ``--tp`` the gradients live on two meshes
        ((dp, tp) for the split layers, dp for the rest), which torch's version cannot stack: each rank sums the
        squares of its local pieces, weighted by 1 / the number of ranks holding the same piece, one all-reduce
        gives the global norm, and every local piece is scaled as torch would (max_norm / (norm + 1e-6), at most 1).
        """
        if self.cfg.tp <= 1:
            return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        from torch.distributed.tensor import DTensor

        grads = [p.grad for p in model.parameters() if p.grad is not None]
        sq = torch.zeros((), dtype=torch.float32, device=self.device)
        for g in grads:
            copies = self.world_size
            if isinstance(g, DTensor):
                mesh = g.device_mesh
                copies = self.world_size // mesh.size()
                for i, pl in enumerate(g.placements):
                    copies *= mesh.size(i) if pl.is_replicate() else 1
                g = g.to_local()
            sq += g.detach().float().pow(2).sum() / copies
        dist.all_reduce(sq)
        norm = sq.sqrt()
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        for g in grads:
            (g.to_local() if isinstance(g, DTensor) else g).mul_(coef.to(g.dtype))
        return norm

    def _sum_shards_over_groups(self, model: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
        """Replica groups over FSDP2 (HSDP with torchft as the replicate dimension): rank r of every group holds
        the same shard of each gradient; sum those shards, the loss and the stop flag over the groups in one
        all-reduce. Returns the summed (loss, stop)."""
        from training.checkpoint.staging import local_tensor

        grads = [local_tensor(p.grad) for p in model.parameters() if p.requires_grad and p.grad is not None]
        return _sum_flat(grads, t, self.ft.allreduce_sum).float()

    def _stop_now(self, step: int) -> bool:
        """Whether any rank got SIGTERM, agreed by all ranks at ``step`` (an all-reduce of its own if the
        loop did not call :meth:`sync_gradients`)."""
        if self._stop_agreed is not None and self._stop_agreed[0] == step:
            return self._stop_agreed[1]
        if self.world_size == 1 and self.ft is None:
            return self.stop.requested
        t = torch.tensor([float(self.stop.requested)], device=self.device)
        if self.world_size > 1:
            dist.all_reduce(t)
        return bool(t.item() > 0)

    @property
    def last_loss(self) -> float | None:
        """The last committed step's loss (read from the device on first use, not every step)."""
        if isinstance(self._last_loss, torch.Tensor):
            self._last_loss = float(self._last_loss)
        return self._last_loss

    @last_loss.setter
    def last_loss(self, value) -> None:
        self._last_loss = value.detach() if isinstance(value, torch.Tensor) else value

    def step_done(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  loss: torch.Tensor | float) -> None:
        """``loss``: :meth:`sync_gradients`'s (or any float); kept on the device until a reader needs it."""
        self.last_loss = loss
        if self.ft is not None:
            p, rank, world = self._plan
            self._log_samples(step, world, rank, p)
        held = self.checkpointer.take_waited() if self.checkpointer is not None else 0.0
        self.goodput.add("checkpoint_blocking", held)  # the optimizer step waited for overlapped staging
        self.goodput.step_done(step, time.perf_counter() - self._t_step - held)
        done = step + 1
        if self.heartbeat is not None:
            self.heartbeat.beat(done, compute_time=self._compute_s)
        faults.kill_point("after_step", done, self.rank)
        if self._stop_now(step):
            self._stop_after(done, model, optimizer)
            return
        if self.checkpointer is not None and self.checkpointer.due(done):
            # Every rank's checkpoint figures (a collective), and the step reached on record before this save
            # can fail or be killed (the ledger's high-water step counts the steps a resume replays).
            self.goodput.persist(**self.checkpointer.job_gauges())
            blocked = self.checkpointer.save(done, model, optimizer,
                                             meta={"loss": self.last_loss, "world_size": self.world_size})
            self.goodput.add("checkpoint_blocking", blocked)
            self._saved_step = done
        if self.rank == 0 and self.cfg.log_every and done % self.cfg.log_every == 0:
            self._log_progress(done)  # reads the loss to the host: one device wait per --log-every steps

    def _log_progress(self, done: int) -> None:
        """One line on stderr (rank 0): the step, its loss, the mean step time since the last line, checkpoints."""
        now = time.perf_counter()
        t0, s0 = getattr(self, "_progress", (now, done))
        self._progress = (now, done)
        per_step = (now - t0) / (done - s0) if done > s0 else 0.0
        loss = self.last_loss
        log.info("step %d/%d loss %s step_time %.3fs checkpoint %s", done, self.cfg.steps,
                 "-" if loss is None else f"{loss:.4f}", per_step, self._checkpoint_state())

    def _checkpoint_state(self) -> str:
        ck = self.checkpointer
        if ck is None:
            return "off"
        saved = getattr(self, "_saved_step", None)
        return (f"last saved step {'-' if saved is None else saved} ({ck.stats.committed} committed, "
                f"{ck.stats.failed} failed{', writing' if ck.busy() else ''})")

    def _stop_after(self, done: int, model, optimizer) -> None:
        """Write step ``done`` to the durable tier whatever the cadence, wait for it, and ask the loop to stop."""
        durable = None
        if self.checkpointer is not None:
            t0 = time.perf_counter()
            durable = self.checkpointer.save_durably(done, model, optimizer,
                                                     meta={"loss": self.last_loss, "world_size": self.world_size})
            self.goodput.add("checkpoint_blocking", time.perf_counter() - t0)
            self.goodput.persist(**self.checkpointer.job_gauges())
        self.preempted = {"step": done, "durable": durable}
        self.should_stop = True
        log.warning("rank %d stopped by SIGTERM at step %d; %s", self.rank, done,
                    f"checkpoint durable in {durable}" if durable else "no durable checkpoint of this step")

    def abandon(self) -> None:
        """Give up this runtime after a failed collective (in-process restart): stop its threads and servers
        without waiting on peers; snapshots already committed stay where they are for the next restore."""
        if self.checkpointer is not None:
            self.checkpointer.abandon()
        self.goodput.close()

    def finish(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """Drain checkpoint I/O, account, and describe the final state (identical on every rank)."""
        if self.rank == 0 and self.cfg.log_every and self.preempted is None and self.cfg.steps % self.cfg.log_every:
            self._log_progress(self.cfg.steps)  # the last step's line, outside the steps (it reads the loss)
        if self.heartbeat is not None:
            self.heartbeat.finished()
        if self.checkpointer is not None:
            if self.preempted is None:  # finished: its last step durable in every shared tier (issue 38)
                self.checkpointer.finalize()
            self.checkpointer.flush()
            dist.barrier()  # every rank's replication is done before any peer server stops
            self.checkpointer.close()
            state = self.checkpointer.state(model, optimizer)
        else:
            from torch.distributed.checkpoint.state_dict import get_state_dict

            msd, osd = get_state_dict(model, optimizer)
            state = {"model": msd, "optim": osd}
        self.goodput.persist(finished=True, **(self.checkpointer.job_gauges() if self.checkpointer else {}))
        empty = {"committed": 0, "failed": 0, "promote_failed": {}, "promote_retried": 0, "behind": {},
                 "failed_ranks": [], "last_error": None, "memory_tier_short": False, "restored_older": 0,
                 "durable": {}, "last_step": None, "promoted_last_step": [], "tiers_behind": {}}
        result = {
            "step": self.preempted["step"] if self.preempted else self.cfg.steps,
            "preempted": self.preempted,
            "loss": self.last_loss,
            "state_sha256": state_sha256(state),
            "world_size": self.world_size,
            "tp": self.cfg.tp,
            "restored_from": self.restored.source if self.restored else None,
            "restored_step": self.restored.step if self.restored else 0,
            "restore_seconds": round(self.restored.seconds, 4) if self.restored else 0.0,
            # every rank's saves and failures (a collective), not this rank's alone
            "checkpoints": self.checkpointer.job_summary() if self.checkpointer else empty,
            "goodput": self.goodput.summary(),
            "fault_tolerance": self.ft.summary() if self.ft is not None else None,
            "data_cache": self.data.cache_stats,  # this rank's shards: found in node memory, copied, uncached
        }
        if self.ft is not None:
            self.ft.shutdown()
        dist.barrier()
        dist.destroy_process_group()
        if self.checkpointer is not None and self.preempted is None:  # exit 4's reason, for on-call (issue 38)
            ck = result["checkpoints"]
            self.goodput.finished_not_durable(ck.get("durable", {}), ck.get("tiers_behind", {}))
        return result


def uses_cuda(cfg: RunConfig) -> bool:
    """Whether a run of ``cfg`` trains on CUDA: ``device`` cuda, or auto on a machine with a GPU."""
    return cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())


def backend(cfg: RunConfig) -> str:
    """The process group backend for ``cfg``: NCCL on CUDA, gloo on CPU."""
    return "nccl" if uses_cuda(cfg) else "gloo"


def _sum_flat(grads: list[torch.Tensor], tail: torch.Tensor, reduce) -> torch.Tensor:
    """Sum ``grads`` and ``tail`` with one collective: flatten them into one buffer (``grads``' dtype), let
    ``reduce`` sum it in place, copy each gradient's part back; returns the summed ``tail``."""
    flat = torch.cat([g.reshape(-1) for g in grads] + [tail.to(grads[0].dtype if grads else tail.dtype)])
    reduce(flat)
    off = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[off:off + n].view_as(g))
        off += n
    return flat[off:]


def _to_local(obj):
    """``obj`` with every DTensor replaced by its local shard."""
    from torch.distributed.tensor import DTensor

    if isinstance(obj, DTensor):
        return obj.to_local()
    if isinstance(obj, dict):
        return {k: _to_local(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_local(v) for v in obj]
    return obj


def _from_local(template, obj):
    """``obj`` (from :func:`_to_local`) with each shard re-wrapped like the DTensor at the same place in
    ``template``."""
    from torch.distributed.tensor import DTensor

    if isinstance(template, DTensor):
        return DTensor.from_local(obj.to(template.device), template.device_mesh, template.placements,
                                  shape=template.shape, stride=template.stride())
    if isinstance(template, dict) and isinstance(obj, dict):
        return {k: _from_local(template[k], v) if k in template else v for k, v in obj.items()}
    if isinstance(template, list) and isinstance(obj, list) and len(template) == len(obj):
        return [_from_local(t, v) for t, v in zip(template, obj)]
    return obj


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
