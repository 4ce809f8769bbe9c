"""A map run's books (decider/map_runs.py), decided alone: which child's close it counts, and in which redrive round."""

import json

from statewright.decider import map_runs

RUN = "arn:aws:states:us-east-1:123456789012:mapRun:m/l:x"
REQUEST = {"execution": "arn:aws:states:us-east-1:123456789012:execution:m:p", "scheduled_id": 4,
           "execution_type": "STANDARD", "max_concurrency": 10, "tolerated_count": None,
           "tolerated_percentage": None, "transformation": "COMPACT", "output_type": "JSON", "destination": None,
           "machine": "arn:aws:states:us-east-1:123456789012:stateMachine:m/l", "revision_id": "r",
           "role_arn": "arn:aws:iam::123456789012:role/r", "processor": "M", "inputs": json.dumps([1]),
           "batched": False}


def closed(status: str, redrive_count: int = 0) -> dict:
    return {"Status": status, "RedriveCount": redrive_count, "Output": "1"} if status == "SUCCEEDED" else {
        "Status": status, "RedriveCount": redrive_count, "Error": "States.Aborted", "Cause": "stopped"}


def test_a_child_started_by_the_run_knows_the_round_it_started_in():
    decision = map_runs.create(RUN, 0, REQUEST, 0)
    (_, start), = decision.effects.dispatches_added
    assert start["parent"] == {"map_run": RUN, "index": 0, "round": 0}


def test_a_close_told_again_after_the_run_was_redriven_is_not_the_redriven_childs():
    run = map_runs.create(RUN, 0, REQUEST, 0).state
    run = map_runs.stop(run, "States.Aborted", "parent stopped", 10).state
    assert (run.status, run.run.stopped, run.run.aborted) == ("ABORTED", [0], 1)
    run = map_runs.child_closed(run, 0, closed("ABORTED"), 0, 20).state
    redriven = map_runs.redrive(run, {**REQUEST, "scheduled_id": 9, "redrive": True}, 30)
    run = redriven.state
    (_, redrive), = redriven.effects.dispatches_added
    assert (run.status, run.redrive_count, run.run.running) == ("RUNNING", 1, [0])
    assert map_runs.token_round(redrive["token"]) == 1

    # The child's first close, told once more (its acknowledgement was lost): from round 0, not counted
    assert map_runs.child_closed(run, 0, closed("ABORTED"), 0, 40) is None
    # The redriven child's own close (round 1) closes the run
    done = map_runs.child_closed(run, 0, closed("SUCCEEDED", 1), 1, 50).state
    assert (done.status, done.run.succeeded, done.run.aborted) == ("SUCCEEDED", 1, 0)


def test_a_close_that_tells_no_round_is_counted_as_before_rounds_were_told():
    # A child started by a release that did not tell rounds (a rolling upgrade) is still heard
    run = map_runs.create(RUN, 0, REQUEST, 0).state
    done = map_runs.child_closed(run, 0, closed("SUCCEEDED"), None, 10).state
    assert (done.status, done.run.succeeded) == ("SUCCEEDED", 1)


def test_a_run_that_succeeded_before_its_stopped_parent_heard_answers_the_parents_redrive():
    # A run of no items succeeds as it is created; its parent was stopped before it heard, then redriven
    empty = {**REQUEST, "inputs": json.dumps([])}
    run = map_runs.create(RUN, 0, empty, 0).state
    assert run.status == "SUCCEEDED"
    told = map_runs.redrive(run, {**empty, "scheduled_id": 9, "redrive": True}, 30)
    (_, done), = told.effects.dispatches_added
    assert (told.state.status, told.state.run.scheduled_id) == ("SUCCEEDED", 9)
    assert (done["kind"], done["scheduled_id"], done["output"]) == ("maprundone", 9, "[]")
    assert map_runs.redrive(told.state, {**empty, "scheduled_id": 9, "redrive": True}, 40) is None  # told once


def test_a_run_still_open_for_an_earlier_attempt_refuses_the_parents_redrive():
    # Its parent's stop has not reached it yet: its close would answer the earlier attempt, not the new one
    run = map_runs.create(RUN, 0, REQUEST, 0).state
    assert "still closing" in map_runs.not_redrivable(run, 9)
    assert map_runs.not_redrivable(run, 4) is None  # the same attempt's redrive sent again
