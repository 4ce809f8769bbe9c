// The public AWS JSON API, called from the page as any SDK calls it (same origin, unsigned: the server's default
// region and account).

export class ApiError extends Error {
  constructor(type, message, status) {
    super(`${type}: ${message}`);
    this.type = type;
    this.status = status;
  }
}

let pending = 0;

function busy(delta) {
  pending += delta;
  document.getElementById("busy").hidden = pending === 0;
}

export async function call(operation, params = {}) {
  busy(1);
  try {
    const response = await fetch("/", {
      method: "POST",
      headers: {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": `AWSStepFunctions.${operation}`},
      body: JSON.stringify(params),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const type = (body.__type || `HTTP ${response.status}`).split("#").pop();
      throw new ApiError(type, body.message || body.Message || response.statusText, response.status);
    }
    return body;
  } finally {
    busy(-1);
  }
}

// Every page of a listing (at most ``cap`` items): its ``key``'s items in order.
export async function all(operation, params, key, cap = 10000) {
  const items = [];
  let nextToken;
  do {
    const page = await call(operation, {...params, ...(nextToken ? {nextToken} : {})});
    items.push(...(page[key] || []));
    nextToken = page.nextToken;
  } while (nextToken && items.length < cap);
  return items;
}

// The whole history, oldest first.
export async function history(executionArn) {
  return all("GetExecutionHistory", {executionArn, maxResults: 1000}, "events", 1e9);
}

// The events after ``afterId``, read newest first until a known one: a few calls however long the history.
export async function eventsAfter(executionArn, afterId) {
  const fresh = [];
  let nextToken;
  for (;;) {
    const page = await call("GetExecutionHistory",
      {executionArn, reverseOrder: true, maxResults: 100, ...(nextToken ? {nextToken} : {})});
    for (const event of page.events) {
      if (event.id <= afterId) return fresh.reverse();
      fresh.push(event);
    }
    nextToken = page.nextToken;
    if (!nextToken) return fresh.reverse();
  }
}

// One of the console's own views of this node (pages.py): what the public API has no call for.
export async function view(path) {
  busy(1);
  try {
    const response = await fetch(path);
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(`HTTP ${response.status}`, body.message || response.statusText, response.status);
    return body;
  } finally {
    busy(-1);
  }
}
