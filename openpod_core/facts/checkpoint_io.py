"""What DCP, the kernel and glibc do on the checkpoint write path (``training/checkpoint/rawfmt.py``,
``hashing.py``, ``writer.py``; the figures in docs/training.md, issue 38 item 7)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "dcp.torch-save-per-tensor", "DCP's FileSystemWriter writes every tensor item with its own torch.save (a zip "
        "archive per tensor) and its FileSystemReader reads each back with torch.load(weights_only=True)",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/filesystem.py:320-372 (_write_item), 861-913 "
        "(read_data) (installed wheel)", "2026-11-29",
        "the raw layout writes tensor items as their bytes at recorded offsets instead; --checkpoint-layout "
        "torch-save keeps DCP's",
    ),
    Fact(
        "dcp.unknown-extension", "a storage entry whose transform_descriptors name an extension the registry does "
        "not know is refused by stock dcp.load with ValueError \"Unknown extension name='<name>'\"",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/_extension.py:212-218 (installed wheel)", "2026-11-29",
        "a raw-layout checkpoint read by stock DCP fails by name (openpod.raw) instead of being misread",
    ),
    Fact(
        "dcp.plan-cache-key", "DefaultSavePlanner keys its class-level plan and metadata caches by the planner's "
        "class name, and compares save plans by fqn, offsets, index, sizes and chunks - not dtype",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/default_planner.py:91,118,181-193; "
        "planner_helpers.py:42-104 (installed wheel)", "2026-11-29",
        "training/checkpoint/writer.py SavePlanner keys the cache by the staged layout (paths, shapes, dtypes): an "
        "fp32 then a bf16 save of the same shapes got the first save's metadata",
    ),
    Fact(
        "dcp.local-plan-every-save", "DefaultSavePlanner.create_local_plan makes the local save plan afresh on every "
        "save (a write item per tensor: its chunk, and TensorProperties from the tensor - dtype, layout, "
        "requires_grad, is_pinned) and, with plan caching, sends none when it equals the cached one; the local "
        "plan is cached only in finish_plan, once the global plan succeeded",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/default_planner.py:107-133,255-272,531-555; "
        "planner_helpers.py:394-407; metadata.py:102-110 (installed wheel)", "2026-11-29",
        "training/checkpoint/writer.py SavePlanner reuses the plan of an unchanged structure, and says 'unchanged' "
        "only when DCP's cache holds that very plan (a save failing between the two left DCP's older plan cached)",
    ),
    Fact(
        "linux.o-direct-alignment", "O_DIRECT I/O may need the user buffer's address, the length and the file offset "
        "aligned (to the file system's logical block size); misaligned direct I/O fails with EINVAL",
        "https://man7.org/linux/man-pages/man2/open.2.html (NOTES, O_DIRECT)", "2026-11-29",
        "dio.py writes only whole 4096-byte blocks whose address and offset agree modulo 4096 directly, the rest "
        "buffered; EINVAL at open or write falls back to buffered",
    ),
    Fact(
        "linux.tmpfs-o-direct", "tmpfs accepts O_DIRECT from Linux 6.6 (commit e88e0d366f9c, 'tmpfs: trivial support "
        "for direct IO'); older kernels refuse it with EINVAL",
        "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/commit/"
        "?id=e88e0d366f9cfbb810b0c8509dc5d130d5a53e02", "2026-11-29",
        "seen here: /dev/shm accepted O_DIRECT on kernel 6.18; the memory tier never asks for it",
    ),
    Fact(
        "glibc.malloc-arenas", "glibc gives threads their own malloc arenas (up to M_ARENA_MAX; by default a limit "
        "derived from the number of cores, M_ARENA_TEST) and raises its mmap and trim thresholds dynamically once a freed block was mmapped; "
        "MALLOC_ARENA_MAX sets the limit from the environment",
        "https://man7.org/linux/man-pages/man3/mallopt.3.html (M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD)",
        "2026-11-29",
        "the likely cause of openpod's 1.03-1.05x of DCP's peak memory: MALLOC_ARENA_MAX=1 gave 1.00x "
        "(docs/training.md); the writer calls malloc_trim(0) after each save",
    ),
    Fact(
        "linux.ext4-dio-shared-lock", "ext4 takes the inode lock shared for an aligned O_DIRECT write only when it "
        "overwrites allocated blocks inside the file's size - initialized ones, and with this change preallocated "
        "(unwritten) ones too; a write that extends the file, allocates blocks or is unaligned takes it exclusively "
        "(one at a time)",
        "https://lore.kernel.org/linux-ext4/20221226062015.3479416-1-yi.zhang@huaweicloud.com/ ('ext4: dio take "
        "shared inode lock when overwriting preallocated blocks', fs/ext4/file.c ext4_dio_write_checks and "
        "ext4_overwrite_io)", "2026-11-29",
        "training/checkpoint/dio.py preallocates the data file (fallocate) so its direct writes in flight run "
        "side by side; measured on this VM's ext4 (Linux 6.18), 338 MiB beside the training loop, the copy and the "
        "hash: 231 ms with two in flight into a growing file, 179 ms into a preallocated one, 216 ms one at a time",
    ),
    Fact(
        "glibc.posix-fallocate-emulation", "where the file system does not support fallocate(2), glibc's "
        "posix_fallocate emulates it by writing to every block of the range; fallocate(2) itself fails with "
        "EOPNOTSUPP there",
        "https://man7.org/linux/man-pages/man3/posix_fallocate.3.html (NOTES); "
        "https://man7.org/linux/man-pages/man2/fallocate.2.html (ERRORS, EOPNOTSUPP)", "2026-11-29",
        "training/checkpoint/dio.py calls fallocate(2) through libc and goes on without preallocation when it fails, "
        "so a file system without it never gets the data file written twice",
    ),
)
