// The JSON API client. The key lives in sessionStorage only (gone when the tab closes).

const KEY = "sa_api_key";

export function getKey() {
  return sessionStorage.getItem(KEY);
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

async function request(url, { method = "GET", body, headers = {}, key, raw = false } = {}) {
  const options = { method, headers: { Authorization: `Bearer ${key ?? getKey()}`, ...headers } };
  if (body instanceof Blob || body instanceof ArrayBuffer) {
    options.body = body;
  } else if (body !== undefined) {
    options.body = JSON.stringify(body);
    options.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(url, options);
  if (!response.ok) {
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (response.status === 401 && key === undefined) {
      signOut();
      window.dispatchEvent(new CustomEvent("sa:signedout"));
    }
    throw new ApiError(response.status, data);
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

export function api(path, options) {
  return request(`/api${path}`, options);
}

export function pkg(name) {
  const base = `/api/packages/${encodeURIComponent(name)}`;
  return (path, options) => request(`${base}${path}`, options);
}

export function filePath(path) {
  return path.split("/").filter(Boolean).map(encodeURIComponent).join("/");
}

export function stream(packageName, threadId, handlers) {
  const url =
    `/api/packages/${encodeURIComponent(packageName)}/threads/${encodeURIComponent(threadId)}` +
    `/stream?include_silent=true&access_token=${encodeURIComponent(getKey() || "")}`;
  const source = new EventSource(url);
  const types = ["connected", "message_data", "message_chunk", "reasoning_chunk", "event", "queued", "fork", "rewind"];
  for (const type of types) {
    source.addEventListener(type, (event) => handlers.frame(JSON.parse(event.data)));
  }
  source.addEventListener("error", (event) => {
    if (event.data) handlers.frame(JSON.parse(event.data));
    else if (handlers.broken) handlers.broken(source.readyState);
  });
  source.onopen = () => handlers.open && handlers.open();
  return source;
}
