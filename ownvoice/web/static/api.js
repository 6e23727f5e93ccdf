// Every call to the server: same origin, the API key when the server asks for one (asked
// once, kept for this tab in sessionStorage), and the server's error envelope turned into an
// Error carrying the server's own message.

const KEY = "ownvoice-api-key";
let askForKey = async () => null;

export class ServerError extends Error {
  constructor(status, message, param) {
    super(message);
    this.status = status;
    this.param = param;
  }
}

/** How to ask for a key: fn(reason) -> the key, or null when the person cancels. */
export function whenKeyNeeded(fn) {
  askForKey = fn;
}

export async function api(path, options = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = new Headers(options.headers || {});
    const key = sessionStorage.getItem(KEY);
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401 && attempt < 3) {
      const entered = await askForKey(key ? "That key was not accepted." : "This server needs its API key.");
      if (entered) {
        sessionStorage.setItem(KEY, entered);
        continue;
      }
    }
    if (!response.ok) throw await serverError(response);
    return response;
  }
}

export async function json(path, options) {
  return (await api(path, options)).json();
}

async function serverError(response) {
  const text = await response.text();
  try {
    const error = JSON.parse(text).error;
    return new ServerError(response.status, error.message, error.param);
  } catch {
    return new ServerError(response.status, `HTTP ${response.status}: ${text.slice(0, 200)}`);
  }
}

/**
 * The message to show for any failure (a server's, or the network's). `words` maps the API's
 * field names to the page's own labels: a refusal of such a field is shown under the label the
 * person sees ("Description: …"), without the API's spelling of it.
 */
export function describe(error, words = {}) {
  if (error instanceof ServerError) {
    const label = error.param && words[error.param];
    return label ? `${label}: ${inPageWords(error.message, error.param, label)}` : error.message;
  }
  if (error && error.name === "AbortError") return "Stopped.";
  return `Cannot reach the server: ${error && error.message ? error.message : error}`;
}

function inPageWords(message, param, label) {
  const name = `\`?\\b${param}\\b\`?`;
  return message
    .replace(new RegExp(`^${name}(:|\\s+(is|are))\\s*`), "") // "consent is required: …"
    .replace(/\s*\([^()]*=[^()]*\)/g, "") // "(consent=true, or a consent id)": how an API says it
    .replace(new RegExp(name, "g"), `“${label}”`);
}
