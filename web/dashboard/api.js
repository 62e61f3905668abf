// The daemon's HTTP API as the dashboard uses it: same origin only, the token from localStorage.
// Every call has a deadline, so a daemon that went away shows as "reconnecting", not a hang.

const TOKEN_KEY = "cmpfleet.api-token";
const DEADLINE_MS = 4000;

export function savedToken() {
  return window.localStorage.getItem(TOKEN_KEY) || "";
}

export function saveToken(token) {
  if (token) {
    window.localStorage.setItem(TOKEN_KEY, token);
  } else {
    window.localStorage.removeItem(TOKEN_KEY);
  }
}

// An answer the daemon gave with a refusal: its status and the one line a person reads.
export class ApiError extends Error {
  constructor(status, detail, code) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

function headers(extra) {
  const all = { Accept: "application/json", ...extra };
  const token = savedToken();
  if (token) all.Authorization = `Bearer ${token}`;
  return all;
}

function detailOf(body, status) {
  if (body && typeof body.detail === "string") return body.detail;
  if (body && Array.isArray(body.detail)) return body.detail.map((d) => d.msg).join("; ");
  return `HTTP ${status}`;
}

async function call(path, init) {
  const controller = new AbortController();
  const timer = window.setTimeout(() => controller.abort(), DEADLINE_MS);
  let response;
  try {
    response = await fetch(path, { ...init, signal: controller.signal, cache: "no-store" });
  } finally {
    window.clearTimeout(timer);
  }
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const hint = response.status === 401 || response.status === 403 ? " (check the API token)" : "";
    throw new ApiError(response.status, detailOf(body, response.status) + hint, body && body.code);
  }
  return body;
}

export function getJson(path) {
  return call(path, { headers: headers() });
}

export function postJson(path, body) {
  return call(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body || {}),
  });
}

// True for a failure to reach the daemon at all (as opposed to a refusal it answered).
export function isUnreachable(error) {
  return !(error instanceof ApiError);
}
