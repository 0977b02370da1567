"""Trust boundaries (``docs/security.md``): what torch unpickles from a checkpoint, GitHub's OIDC subject,
the pinned GitHub Actions."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "torch.dcp.metadata-unpickle", "pickle.load",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/filesystem.py:930 (FileSystemReader.read_metadata)",
        "2026-11-25",
        "torch's reader runs any __reduce__ a planted .metadata names; training/checkpoint/safe_load.py reads it "
        "with an unpickler that resolves only the DCP metadata classes",
    ),
    Fact(
        "torch.dcp.bytes-load", "torch.load(value, weights_only=False)",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/default_planner.py:387-391 "
        "(DefaultLoadPlanner.load_bytes)", "2026-11-25",
        "every non-tensor item of a checkpoint; safe_load.py loads it with weights_only=True itself and hands the "
        "planner the value, never the bytes",
    ),
    Fact(
        "torchft.http-transport-unpickles", "_streaming_load(f, weights_only=False)",
        "meta-pytorch/torchft@v0.2.0:torchft/checkpointing/http_transport.py:146-164 (HTTPTransport."
        "_load_from_address; no authentication of request or reply, :75-133)", "2026-11-28",
        "read in the pinned wheel (torchft==0.2.0, site-packages/torchft); the address comes from the quorum (manager.py:771-797: the recovering source's checkpoint_metadata), "
        "which the unauthenticated Lighthouse assembles; replica mode uses training/ft/heal_transport.py instead",
    ),
    Fact(
        "torchft.pg-transport-unpickles", "pickle.loads(buf.cpu().numpy().tobytes())",
        "meta-pytorch/torchft@v0.2.0:torchft/checkpointing/pg_transport.py:252 (PGTransport.recv_checkpoint)",
        "2026-11-28",
        "read in the pinned wheel; the process-group transport unpickles the state's metadata with plain pickle over an unauthenticated "
        "gloo/NCCL group: no safer than HTTPTransport, so not the healing channel either",
    ),
    Fact(
        "transformers.safetensors-format", 'metadata["format"] in ("pt", "tf", "flax", "mlx")',
        "https://github.com/huggingface/transformers/pull/29335 (modeling_utils.load_state_dict adds \"mlx\" to the "
        "accepted formats; else OSError 'does not contain the valid metadata'); "
        "https://github.com/ml-explore/mlx/issues/743 (the OSError at modeling_utils.py:508-511)", "2026-11-28",
        "transformers 4.x refuses a safetensors file without it (issue 38's runs: 4.46 and 4.57 refuse, 5.24 loads); "
        "save_pretrained writes {\"format\": \"pt\"}, and so does `python -m training.checkpoint export`",
    ),
    Fact(
        "github.oidc.sub-environment", "repo:<owner/name>:environment:<environment>",
        "https://docs.github.com/en/actions/reference/security/oidc (example subject claims: filtering for a "
        "specific environment)", "2026-11-25",
        "the subject of a job that references an environment; a job on a branch without one presents "
        "repo:<owner/name>:ref:refs/heads/<branch>. The deploy role trusts only the environment's subject",
    ),
    Fact(
        "github-action.actions/checkout", "11d5960a326750d5838078e36cf38b85af677262",
        "https://github.com/actions/checkout/releases/tag/v4.4.0", "2026-11-25",
        "v4.4.0 (= v4), read with git in a snapshot of github.com/actions/checkout; the workflow example pins it",
    ),
    Fact(
        "github-action.actions/setup-python", "a26af69be951a213d495a4c3e4e4022e16d87065",
        "https://github.com/actions/setup-python/releases/tag/v5.6.0", "2026-11-25",
        "v5.6.0 (= v5), read with git in a snapshot of github.com/actions/setup-python",
    ),
    Fact(
        "github-action.actions/setup-node", "49933ea5288caeca8642d1e84afbd3f7d6820020",
        "https://github.com/actions/setup-node/releases/tag/v4.4.0", "2026-11-25",
        "v4.4.0 (= v4), read with git in a snapshot of github.com/actions/setup-node",
    ),
    Fact(
        "github-action.aws-actions/configure-aws-credentials", "7474bc4690e29a8392af63c5b98e7449536d5c3a",
        "https://github.com/aws-actions/configure-aws-credentials/releases/tag/v4.3.1", "2026-11-25",
        "v4.3.1 (= v4), read with git in a snapshot of github.com/aws-actions/configure-aws-credentials",
    ),
)
