"""Quorum ids the torchft manager configures its process group under (training.ft.replica.distinct_quorum_id)."""

from training.ft.replica import _DistinctQuorumClient, distinct_quorum_id

A, B, B2 = "replica_00000:1f0c", "replica_00001:7a2e", "replica_00001:c93d"  # B2: group 1 after a restart


def test_every_member_maps_a_quorum_to_the_same_id_and_fast_quorums_keep_it():
    assert distinct_quorum_id(3, [A, B2]) == distinct_quorum_id(3, [B2, A])  # order of the members does not matter
    assert distinct_quorum_id(3, [A, B2]) != distinct_quorum_id(4, [A, B2])  # the Lighthouse moved on: re-form


def test_a_restarted_lighthouses_quorum_1_is_not_the_first_lighthouses_quorum_1_after_a_heal():
    first = distinct_quorum_id(1, [A, B])       # the first Lighthouse's first quorum
    after_restart = distinct_quorum_id(1, [A, B2])  # group 1 healed, then the Lighthouse restarted
    assert after_restart != first


def test_the_client_rewrites_only_the_quorum_id():
    class Result:
        quorum_id, replica_ids, store_address, max_step = 1, [A, B2], "host:1/prefix", 17

    class Client:
        def _quorum(self, **kw):
            return Result()

        def should_commit(self, *a):
            return "delegated"

    c = _DistinctQuorumClient(Client())
    q = c._quorum(group_rank=0)
    assert q.quorum_id == distinct_quorum_id(1, [A, B2]) and q.lighthouse_quorum_id == 1
    assert (q.store_address, q.max_step, list(q.replica_ids)) == ("host:1/prefix", 17, [A, B2])
    assert c.should_commit() == "delegated"
