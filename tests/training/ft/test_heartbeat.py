from training.ft.heartbeat import Heartbeat, behind, hang_bound, is_hung, read_beats, straggler_scores


def test_heartbeat_round_trip_and_hang_bound(tmp_path):
    a, b = Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1)
    for step, t in enumerate([100.0, 101.0, 102.0]):
        a.beat(step, now=t)
        b.beat(step, now=t + (step * 3.0))  # rank 1 is slower
    beats = read_beats(tmp_path)
    assert [x.rank for x in beats] == [0, 1]
    assert hang_bound(beats, floor_s=1.0, multiple=2.0) == 2.0 * 2.5
    newest = max(x.time for x in beats)
    assert not is_hung(beats, newest + 4.0, floor_s=1.0, multiple=2.0)
    assert is_hung(beats, newest + 6.0, floor_s=1.0, multiple=2.0)
    # the floor wins when steps are fast
    assert not is_hung(beats, newest + 6.0, floor_s=60.0, multiple=2.0)
    scores = straggler_scores(beats)
    assert scores[1] > 1.0 > scores[0]


def test_the_rank_that_did_not_begin_the_step_its_peers_began_is_behind(tmp_path):
    a, b, c = Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1), Heartbeat(tmp_path, 2)
    for hb in (a, b, c):
        hb.begin(11, now=100.0)
        hb.beat(12, now=101.0)
    assert behind(read_beats(tmp_path)) == []          # between steps: nobody is behind
    a.begin(12, now=101.1)
    c.begin(12, now=101.2)                             # rank 1 never begins step 12 (its peers wait for it)
    assert behind(read_beats(tmp_path)) == [1]
    b.begin(12, now=101.3)
    assert behind(read_beats(tmp_path)) == []          # stuck together (inside a collective): no culprit
    beats = read_beats(tmp_path)
    assert {x.rank: x.time for x in beats} == {0: 101.0, 1: 101.0, 2: 101.0}  # "time": the last step completed
    assert not is_hung(beats, 101.3 + 4.0, floor_s=4.5) and is_hung(beats, 101.3 + 5.0, floor_s=4.5)  # begun too


def test_ranks_whose_steps_are_over_do_not_count(tmp_path):
    """The final flush may take longer than the bound; a rank still stepping is judged on its own."""
    a, b = Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1)
    a.beat(20, now=100.0)
    b.beat(19, now=90.0)  # not its first step (a first step is a phase of its own: compiling)
    b.begin(19, now=100.0)
    a.finished()
    assert behind(read_beats(tmp_path)) == []
    assert is_hung(read_beats(tmp_path), 200.0, floor_s=10.0)     # rank 1 never finished its step
    b.finished()
    assert not is_hung(read_beats(tmp_path), 1e12, floor_s=10.0)  # all done: flushing, not hung


def test_no_beats_is_not_a_hang(tmp_path):
    assert not is_hung(read_beats(tmp_path), 1e12)



def test_after_an_in_process_replacement_the_hung_replacement_is_the_culprit_not_the_survivors(tmp_path):
    """Rank 1 dies in step 12; survivors restore step 10 in their own processes and begin it; the replacement
    hangs before its first step. Failed on the old code: the dead rank's file still said it began step 12, so
    behind() named rank 0 (a healthy survivor) and the launcher would have killed it and kept the hung one."""
    from training.ft.heartbeat import behind, forget

    old = [Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1)]
    for s in range(13):
        for b in old:
            b.begin(s)
    forget(tmp_path, 1)  # the launcher, as it replaces rank 1
    assert behind(read_beats(tmp_path)) == []  # until the new generation starts: nobody to blame
    survivor, replacement = Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1)  # the next generation's runtimes
    survivor.begin(10)
    assert behind(read_beats(tmp_path)) == [1]
    replacement.begin(10)
    assert behind(read_beats(tmp_path)) == []


def test_a_new_generations_heartbeat_starts_from_no_step_begun(tmp_path):
    """Even without the launcher's forget(): a rank's new Heartbeat overwrites its old beat at once."""
    from training.ft.heartbeat import behind

    Heartbeat(tmp_path, 1).begin(12)
    Heartbeat(tmp_path, 0).begin(10)
    Heartbeat(tmp_path, 1)  # the replacement's runtime starts
    assert behind(read_beats(tmp_path)) == [1]


def test_a_long_restore_is_not_a_hang_but_a_rank_that_never_begins_is(tmp_path):
    """Issue 24, failed on the old code: beats stopped at start-up and resumed at the first step, so a restore
    longer than the floor was judged a hang (and killed, in a loop). Now a rank in its restore (or all ranks in
    their first step together, compiling) has up to PHASE_LIMIT_S; a rank that never begins the first step its
    peers began is still a hang."""
    from training.ft import clock
    from training.ft.heartbeat import PHASE_LIMIT_S

    a, b = Heartbeat(tmp_path, 0), Heartbeat(tmp_path, 1)
    t0 = clock.now()  # the clock beats carry
    with a.phase("restore"):
        assert not is_hung(read_beats(tmp_path), now=t0 + 600, floor_s=300)  # 600 s restoring, floor 300
        assert is_hung(read_beats(tmp_path), now=t0 + PHASE_LIMIT_S + 60, floor_s=300)
    a.begin(0)
    b.begin(0)
    assert not is_hung(read_beats(tmp_path), now=clock.now() + 900, floor_s=300)  # compiling together
    c = Heartbeat(tmp_path, 2)  # a third rank that never begins step 0
    assert is_hung(read_beats(tmp_path), now=clock.now() + 900, floor_s=300)
    a.beat(1)
    assert read_beats(tmp_path)[0].phase == ""
    del c
