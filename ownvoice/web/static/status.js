// What the server knows: its models (state, type, roles, device and dtype, batch rows), the
// queue, and the start-up diagnosis (e.g. "running on the CPU", with what to change), from
// GET /health. The header's badge sums it up and opens the Status tab.

import { describe, json } from "./api.js";

const $ = (id) => document.getElementById(id);

export async function loadStatus() {
  let health;
  try {
    health = await json("/health");
  } catch (error) {
    $("badge").textContent = describe(error);
    $("badge").classList.add("warn");
    return null;
  }
  const models = Object.entries(health.models || {});
  const devices = [...new Set(models.map(([, m]) => m.gpu || m.device).filter(Boolean))];
  const warnings = health.warnings || [];
  // a warning says what to do on the Status tab: the badge says so and opens it
  $("badge").textContent = `${health.status}${devices.length ? ` · ${devices.join(", ")}` : ""}` +
    (warnings.length ? ` · ${warnings.length} warning${warnings.length > 1 ? "s" : ""}: see Status` : "");
  $("badge").classList.toggle("warn", warnings.length > 0 || health.status !== "ok");
  const queue = health.queue || {};
  $("status-summary").textContent = `ownvoice ${health.version} · ${health.ready ? "ready" : "not ready"} · ` +
    `${queue.generating ?? 0} generating, ${queue.waiting ?? 0} waiting` +
    (warnings.length ? ` · ${health.status === "degraded" ? "degraded: it works, but " : ""}` +
      "each warning below says what to change" : "");
  $("warnings").replaceChildren(...warnings.map((w) => {
    const item = document.createElement("li");
    item.textContent = w;
    return item;
  }));
  $("models").tBodies[0].replaceChildren(...models.map(([name, m]) => {
    const row = document.createElement("tr");
    row.dataset.model = name;
    const device = m.device ? `${m.gpu || m.device} (${(m.dtype || "").replace("torch.", "")})` : "—";
    const batch = m.batch ? `${m.batch.rows} of ${m.batch.max}` : "—";
    for (const text of [name, m.state, m.type || "—", (m.roles || []).join(", ") || "—", device, batch]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  }));
  return health;
}
