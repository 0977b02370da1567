"""The training image's facts: NCCL over EFA, the EFA installer, pinned base images and what torch does
on a failed collective (``training/Dockerfile``, ``tests/training/test_image_facts.py``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "aws-ofi-nccl.version", "1.14.0",
        "https://github.com/aws/aws-ofi-nccl/releases/tag/v1.14.0", "2026-11-23",
        "the EFA network plugin for NCCL the training image builds from source",
    ),
    Fact(
        "aws-ofi-nccl.commit", "08ad665dec2d1209826cf3e8130dc240b9f4fe1b",
        "https://github.com/aws/aws-ofi-nccl/releases/tag/v1.14.0", "2026-11-23",
        "the commit the annotated, PGP-signed tag v1.14.0 (tag object b917bcca0ab02cadee5609f1a4b0d9c426f778ca, "
        "tagger Ye Xiang, 2025-03-14) points at, read with git in a snapshot of github.com/aws/aws-ofi-nccl. No "
        "checksum of the release tarball is published, so the training image clones the tag, fails unless HEAD is "
        "this commit (a commit id hashes the whole tree) and runs ./autogen.sh, as the project's own CI does "
        "(.github/workflows/distcheck.yaml:99-101 at the tag)",
    ),
    Fact(
        "aws-ofi-nccl.nccl-plugin-library", "libnccl-net.so",
        "aws/aws-ofi-nccl@v1.14.0:src/Makefile.am:68 (lib_LTLIBRARIES = libnccl-net.la)", "2026-11-23",
        "the file `make install` puts in <prefix>/lib for NVIDIA builds; v1.15.0 renamed it libnccl-net-ofi.so "
        "and adds a libnccl-net.so symlink (aws/aws-ofi-nccl@v1.15.0:src/Makefile.am:68,75-77)",
    ),
    Fact(
        "nccl.version", "2.26.2-1+cuda12.8",
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ (libnccl2 package)", "2026-11-23",
        "pinned to the CUDA 12.8 base image's major.minor",
    ),
    Fact(
        "nccl.net-plugin-env", "NCCL_NET_PLUGIN is dlopen()ed as given first, then as libnccl-net-<value>.so; "
        "when neither loads NCCL logs at INFO level and falls back to its internal IB/socket transports",
        "NVIDIA/nccl@v2.26.2-1:src/plugin/plugin_open.cc:64-96 and src/plugin/net.cc:70", "2026-11-23",
        "a wrong plugin path is silent at the default NCCL_DEBUG level: the image must name a file that exists",
    ),
    Fact(
        "torch.nccl-async-error-handling", "0 NoHandling, 1 TearDown (abort the communicators, end the process), "
        "2 CleanUpOnly (abort the communicators only), 3 SkipCleanUp (end the process without aborting)",
        "pytorch/pytorch@v2.13.0:torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:64-69,160-176 (installed wheel "
        "include/); torch/distributed/distributed_c10d.py:2460-2474 (_abort_process_group)", "2026-11-25",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING (or NCCL_ASYNC_ERROR_HANDLING): what ProcessGroupNCCL's watchdog does on a "
        "failed or timed-out collective. _abort_process_group 'should be used with TORCH_NCCL_ASYNC_ERROR_HANDLING "
        "turned off (i.e. set to 0)'. The image sets 1; the in-process launcher hands its workers 0",
    ),
    Fact(
        "torch.deterministic-algorithms", "use_deterministic_algorithms(mode) sets the ATen flag and imports "
        "torch._inductor.config to set its `deterministic`; that config reads TORCHINDUCTOR_DETERMINISTIC=1 when first "
        "imported",
        "pytorch/pytorch@v2.13.0:torch/__init__.py:1531-1534; torch/_inductor/config.py:1009 (installed wheel)",
        "2026-11-27",
        "the workers set the ATen flag and the variable (training/trainer.py deterministic_algorithms), so no worker "
        "imports TorchInductor to start; the import was about 2 s of each worker start on the 2-core CI machine",
    ),
    Fact(
        "torchrun.standalone-endpoint", "torchrun --standalone sets --rdzv-backend=c10d and --rdzv-endpoint=localhost:0",
        "pytorch/pytorch@v2.13.0:torch/distributed/run.py:988-990 (installed wheel)", "2026-11-27",
        "port 0: the rendezvous store binds a port the kernel picks; the launcher does the same for a one-node run "
        "without --rdzv-endpoint instead of picking a free port that torchrun binds seconds later",
    ),
    Fact(
        "torchrun.shutdown-timeout", "torchrun --shutdown-timeout N: seconds the workers get after SIGTERM before "
        "SIGKILL (default: TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)",
        "pytorch/pytorch@v2.13.0:torch/distributed/run.py:690-699 (installed wheel)", "2026-11-27",
        "the launcher passes --stop-timeout on as this flag from torch 2.13 (training/cli.py shutdown_args)",
    ),
    Fact(
        "torchrun.fixed-grace", "torch 2.11's torchrun has no --shutdown-timeout; on a signal its workers get a fixed "
        "30 s before SIGKILL",
        "pytorch/pytorch@v2.11.0:torch/distributed/elastic/multiprocessing/api.py:615 (pc.shutdown(e.sigval, "
        "timeout=30)),649 (close(..., timeout: int = 30)); torch/distributed/elastic/agent/server/"
        "local_elastic_agent.py:416 (self._pcontext.close(death_sig)) (read in the 2.11.0+cu130 wheel on the GPU "
        "machine; its torchrun --help lists no --shutdown-timeout)", "2026-11-27",
        "on torch < 2.13 the launcher leaves the flag out and warns when --stop-timeout asks for more than 30 s",
    ),
    Fact(
        "dcp.async-save-given-stager", "torch 2.13's dcp.async_save leaves a stager it is given open (the caller "
        "closes it after the last save) and closes only one it made; torch 2.11's closed the given one after a save",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/state_dict_saver.py:238-240,307-331 (installed wheel); "
        "2.11: seen on the GPU machine (2.11.0+cu130 wheel): a DefaultStager's copy table empty after one async_save, "
        "the next save through it KeyError: <class 'type'> (_state_dict_stager.py:319)", "2026-11-27",
        "benchmarks/checkpoint_vs_dcp.py: before 2.13 the DCP column takes a new stager per save",
    ),
    Fact(
        "torchrun.launch-config-cuda-check", "LaunchConfig.__post_init__ calls torch.cuda.is_available() and "
        "torch.cuda.device_count() in the agent process (to pick default NUMA options)",
        "pytorch/pytorch@v2.13.0:torch/distributed/launcher/api.py:136-143; torch/cuda/__init__.py:169-189 "
        "(is_available: the CUDA runtime unless PYTORCH_NVML_BASED_CUDA_CHECK=1, its poison-fork note), 516-518 "
        "('Cannot re-initialize CUDA in forked subprocess') (installed wheel)", "2026-11-27",
        "without PYTORCH_NVML_BASED_CUDA_CHECK=1 that asks the CUDA runtime, after which forked children cannot use "
        "CUDA; training/agent.py forks workers only on a torch built without CUDA",
    ),
    Fact(
        "torchrun.exec-new-session", "torchrun starts an exec'd worker with start_new_session=True; a worker it "
        "forks (function entry point) gets PR_SET_PDEATHSIG SIGINT and the agent's session",
        "pytorch/pytorch@v2.13.0:torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py:66; "
        "torch/multiprocessing/spawn.py:84 (installed wheel)", "2026-11-27",
        "training/agent.py run_rank: a forked rank calls setsid() and restores a new interpreter's signal "
        "dispositions before the worker runs; the runtime arms PR_SET_PDEATHSIG SIGKILL under torchrun",
    ),
    Fact(
        "posix.exec-signal-dispositions", "exec sets every signal the calling process catches to its default action "
        "in the new program; signals it ignores stay ignored (SIGCHLD aside); a new Python then turns SIGINT into "
        "KeyboardInterrupt unless its parent ignored SIGINT",
        "https://pubs.opengroup.org/onlinepubs/9799919799/functions/exec.html (signals); "
        "https://docs.python.org/3.11/library/signal.html#general-rules", "2026-11-28",
        "training/worker_start.py fresh_signal_dispositions: a forked worker (agent or --restart in-process "
        "launcher) gets the dispositions an exec'd one would",
    ),
    Fact(
        "posix.socket-shutdown-shared", "shutdown() acts on the socket itself, so it ends the connection for every "
        "process holding a descriptor of it, while close() only drops the caller's descriptor",
        "https://pubs.opengroup.org/onlinepubs/9799919799/functions/shutdown.html; "
        "https://man7.org/linux/man-pages/man2/shutdown.2.html", "2026-11-28",
        "training/worker_start.py close_inherited_sockets: a worker forked by the in-process launcher closes the "
        "launcher's sockets, else its abort_transport (shutdown of every TCP connection of its process) broke the "
        "launcher's own store connection",
    ),
    Fact(
        "python.gil-at-finalization", "a thread that takes the GIL (PyEval_AcquireThread, PyEval_RestoreThread, "
        "PyGILState_Ensure) while the runtime is finalizing is terminated, even one Python did not create "
        "(CPython 3.8 on; this image's 3.11)",
        "https://docs.python.org/3.11/c-api/init.html#c.PyEval_AcquireThread (the note); "
        "https://github.com/python/cpython/issues/80656", "2026-11-28",
        "training/process_exit.py: a gloo worker thread terminated so unwinds through torch's destructors into "
        "std::terminate (SIGABRT); tests/training/test_process_exit.py builds it",
    ),
    Fact(
        "torch.pyobject-release-needs-gil", "a C++ reference to a tensor or storage that Python also holds keeps its "
        "Python object alive; the release from 2 references to 1 decrefs that object (under the GIL) on whichever "
        "thread releases it, e.g. gloo's worker thread dropping a finished collective",
        "pytorch/pytorch@v2.13.0:c10/util/intrusive_ptr.h:434-440; "
        "https://github.com/pytorch/pytorch/issues/117762", "2026-11-28",
        "training/process_exit.py: why a rank that ran gloo collectives leaves without the interpreter's teardown "
        "(pytorch/pytorch#117762, a crash at shutdown from PyEval_AcquireThread, is open)",
    ),
    Fact(
        "torchrun.function-return-wait", "a function entry point's return value is queued to the agent and the "
        "rank then waits until the agent has read it; @record turns SystemExit(0) into a return",
        "pytorch/pytorch@v2.13.0:torch/distributed/elastic/multiprocessing/api.py:706-708; "
        "torch/distributed/elastic/multiprocessing/errors/__init__.py:368-374 (installed wheel)", "2026-11-27",
        "an agent shutting down reads no value (it joins, then kills after --shutdown-timeout): a forked rank stopped "
        "by SIGTERM exits itself (training/agent.py run_rank)",
    ),
    Fact(
        "efa-installer.version", "1.38.1",
        "aws/aws-parallelcluster-cookbook@05b17d78343991d12a429effa2c9cd5d6bcf173f:cookbooks/"
        "aws-parallelcluster-environment/attributes/environment.rb:73", "2026-11-23",
        "the EFA installer (libfabric, rdma-core) the training image installs; the version ParallelCluster pins "
        "next to its checksum",
    ),
    Fact(
        "efa-installer.prefix", "/opt/amazon/efa",
        "aws/aws-ofi-nccl@v1.14.0:.github/workflows/distcheck.yaml:107", "2026-11-23",
        "where the EFA installer puts libfabric: aws-ofi-nccl's own CI configures --with-libfabric=/opt/amazon/efa; "
        "the training image links the plugin against it and puts <prefix>/lib on LD_LIBRARY_PATH, the node agent "
        "finds the host's tools under /host<prefix>/bin",
    ),
    Fact(
        "efa-installer.sha256", "83923374afd388b1cfcf4b3a21a2b1ba7cf46a01a587f7b519b8386cb95e4f81",
        "aws/aws-parallelcluster-cookbook@05b17d78343991d12a429effa2c9cd5d6bcf173f:cookbooks/"
        "aws-parallelcluster-environment/attributes/environment.rb:74", "2026-11-23",
        "SHA-256 of https://efa-installer.amazonaws.com/aws-efa-installer-1.38.1.tar.gz as AWS ParallelCluster "
        "verifies it; the same value is the replaced line of aws/aws-parallelcluster-cookbook#2953 (1.38.1 -> "
        "1.41.0). The training image checks the download with sha256sum -c",
    ),
    Fact(
        "image.python-3.11-slim-bookworm.index-digest",
        "sha256:fe556eaffd0d96abd8685b83bb8a69addd0dc730fa193669a7df0d49ddcfac02",
        "docker-library/repo-info@bc9bbb47fc709dc4b29d3b128d66823b953b97a7:repos/python/remote/"
        "3.11-slim-bookworm.md:4", "2026-11-23",
        "the OCI image index of python:3.11-slim-bookworm (Python 3.11.16, built 2026-08-25; linux/amd64 and "
        "linux/arm64 among its platforms): the node agent image's base, FROM ...@<digest>",
    ),
    Fact(
        "image.cuda-12.8.1-cudnn-devel-ubuntu24.04.digest",
        "sha256:24c8e3581ea6330038b0d374920721983312627f8adbfcf390bdb4b399d280ed",
        "nebius/nebius-physical-ai@5d757be8803949f280863fb69578eb913e27d555:npa/docker/workbench/alpamayo2-super/"
        "Dockerfile:3", "2026-11-23",
        "the training image's build stage, FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04@<digest>: a public "
        "repository's pin of the same tag (main, 2026-08-22), as no registry listing can be read from here. The "
        "same commit records the tag's linux/amd64 manifest as sha256:3986465b3dd3b4d602c07061f2cff417e0bfb24810"
        "129408d4eb12e111015a6c (npa/docker/workbench/cosmos2-transfer/REDISTRIBUTION.md:15-16, read from the "
        "registry 2026-08-03): a second digest of the same tag is the multi-platform index that manifest belongs "
        "to, which the arm64 GB200 build needs. That "
        "it is the index and lists linux/arm64 is inferred (see the unverified list); a digest the registry does "
        "not hold fails the pull, it cannot fetch another image",
    ),
    Fact(
        "image.cuda-12.8.1-cudnn-runtime-ubuntu24.04.digest",
        "sha256:ac55d124da4882b497f732d8dfd9a702d5447a5f29d08d56da6f64f0a1eb34bc",
        "nebius/nebius-physical-ai@cd96527f6bef60aa5a7097c32b7efd019282336b:npa/docker/workbench/openpi-policy/"
        "Dockerfile:33", "2026-11-23",
        "the training image's final stage, FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@<digest>: the same "
        "repository's pin of the tag (branch codex/antioch-openpi-private-images-20260818T180425Z-698086, "
        "2026-08-19; its line 3 pins the devel tag at the digest above). 5d757be's REDISTRIBUTION.md:17-18 records "
        "the tag's linux/amd64 manifest as sha256:9175fa92f96de35a8cfb9493f0dfcf9435c7a597e9d95ad41d2cae382a95e3f9 "
        "(2026-08-03). A second, unrelated repository pins the same digest and calls it 'the multi-architecture "
        "manifest-list digest' of the tag, resolved with docker buildx imagetools inspect "
        "(mercallureAI/local-multimodal-infra@a2cc8b092004f851ccaac55eea530d13a946495b:docs/"
        "implementation-notes.md:45-47,77-83, 2026-07-21; its Dockerfile.nvidia:1,28)",
    ),
    Fact(
        "cuda-image.nccl-held", "apt-mark hold libnccl2",
        "gitlab.com/nvidia/container-images/cuda: dist/<distro>/<version>/runtime/Dockerfile", "2026-11-23",
        "NVIDIA's CUDA images hold libnccl2, so installing another version with apt-get -y needs "
        "--allow-change-held-packages",
    ),
)
