// What an execution's history says of each state: its runs (entered, exited, input, output), the attempts of a
// Task within each run (retries with their timings), and a status per state for the graph. Pure: events in, data out.

const ATTEMPT_STARTS = new Set(["TaskScheduled", "LambdaFunctionScheduled", "ActivityScheduled"]);
const ATTEMPT_ENDS = {
  TaskSucceeded: "succeeded", LambdaFunctionSucceeded: "succeeded", ActivitySucceeded: "succeeded",
  TaskFailed: "failed", TaskTimedOut: "failed", TaskStartFailed: "failed", TaskSubmitFailed: "failed",
  LambdaFunctionFailed: "failed", LambdaFunctionTimedOut: "failed", LambdaFunctionStartFailed: "failed",
  LambdaFunctionScheduleFailed: "failed", ActivityFailed: "failed", ActivityTimedOut: "failed",
  ActivityScheduleFailed: "failed",
};
const STATE_FAILURES = new Set(["MapStateFailed", "ParallelStateFailed", "MapRunFailed"]);
// Of several runs of one state (Map iterations), the status the graph shows: the first of these any run has.
const PRECEDENCE = ["running", "failed", "caught", "aborted", "succeeded"];

function details(event) {
  for (const [key, value] of Object.entries(event)) {
    if (key.endsWith("EventDetails") && value && typeof value === "object") return value;
  }
  return {};
}

export function runsOf(events, execution) {
  const runs = [];
  const open = new Map(); // state name -> its open runs, oldest first
  const attempts = []; // open attempts, newest last
  for (const event of events) {
    const type = event.type;
    if (type.endsWith("StateEntered")) {
      const {name, input} = event.stateEnteredEventDetails || {};
      const run = {name, type: type.slice(0, -"StateEntered".length), entered: event.timestamp, enteredId: event.id,
                   exited: null, input, output: null, attempts: [], error: null, cause: null};
      runs.push(run);
      if (!open.has(name)) open.set(name, []);
      open.get(name).push(run);
    } else if (type.endsWith("StateExited")) {
      const {name, output} = event.stateExitedEventDetails || {};
      const run = (open.get(name) || []).shift();
      if (run) {
        run.exited = event.timestamp;
        run.output = output;
      }
    } else if (ATTEMPT_STARTS.has(type)) {
      const run = lastOpen(open, "Task");
      if (run) {
        const attempt = {scheduled: event.timestamp, started: null, ended: null, outcome: null, error: null,
                         cause: null, run};
        run.attempts.push(attempt);
        attempts.push(attempt);
      }
    } else if (type.endsWith("Started") && attempts.length && !attempts.at(-1).started && !type.startsWith("Execution")
               && !type.startsWith("Map") && !type.startsWith("Parallel")) {
      attempts.at(-1).started = event.timestamp;
    } else if (type in ATTEMPT_ENDS) {
      const attempt = attempts.pop();
      if (attempt) {
        attempt.ended = event.timestamp;
        attempt.outcome = ATTEMPT_ENDS[type];
        const {error, cause} = details(event);
        if (attempt.outcome === "failed") Object.assign(attempt, {error: error ?? null, cause: cause ?? null});
      }
    } else if (STATE_FAILURES.has(type)) {
      const run = lastOpen(open, type.startsWith("Parallel") ? "Parallel" : "Map");
      if (run) Object.assign(run, {error: details(event).error ?? run.error, cause: details(event).cause ?? run.cause,
                                   failed: true});
    }
  }
  const closed = execution.status !== "RUNNING";
  for (const run of runs) run.status = statusOf(run, execution.status, closed);
  return runs;
}

function lastOpen(open, type) {
  let latest = null;
  for (const runs of open.values()) {
    for (const run of runs) {
      if (run.type === type && (!latest || run.enteredId > latest.enteredId)) latest = run;
    }
  }
  return latest;
}

function statusOf(run, executionStatus, closed) {
  const last = run.attempts.at(-1);
  const erred = run.failed || (last && last.outcome === "failed");
  if (run.exited !== null) return erred ? "caught" : "succeeded";
  if (!closed) return erred ? "caught" : "running";
  if (executionStatus === "SUCCEEDED") return erred ? "caught" : "succeeded";
  if (executionStatus === "ABORTED" && !erred) return "aborted";
  return "failed";
}

// Each state's status over all its runs (a state never entered has none).
export function statusByState(runs) {
  const byName = new Map();
  for (const run of runs) {
    const known = byName.get(run.name);
    if (!known || PRECEDENCE.indexOf(run.status) < PRECEDENCE.indexOf(known)) byName.set(run.name, run.status);
  }
  return byName;
}
