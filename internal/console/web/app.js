// toolbus console: reads /api/ and renders each view; the flow updates live from
// /api/events (server-sent events).
"use strict";
const token = new URLSearchParams(location.search).get("token");
const api = (path, init) => {
  const url = new URL(path, location.href);
  if (token) url.searchParams.set("token", token);
  return fetch(url, init).then(async r => {
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  });
};
const $ = sel => document.querySelector(sel);
const esc = s => String(s ?? "").replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const when = t => t ? new Date(t).toLocaleTimeString() : "-";

// Views, chosen by the URL's hash.
const loaders = {flow: () => {}, servers: loadServers, tools: loadTools, calls: loadCalls, dead: loadDead, try: () => {}};
function show() {
  const view = (location.hash || "#flow").slice(1);
  document.querySelectorAll(".view").forEach(v => v.classList.toggle("active", v.id === view));
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.view === view));
  (loaders[view] || (() => {}))();
}
window.addEventListener("hashchange", show);

// Flow: live.
const history = [];  // [{at, backlog: {stage: n}}]
let previous = null;
// The tenants' filter on the calls, shown once the deployment has tenants.
function renderTenants(tenants) {
  const sel = $("#call-filter select[name=tenant]");
  if (!tenants || !tenants.length || sel.options.length === tenants.length + 1) return;
  sel.innerHTML = `<option value="">default tenant</option>` + tenants.map(t => `<option value="${esc(t)}">${esc(t)}</option>`).join("");
  sel.hidden = false;
}
function renderFlow(f) {
  const rows = f.queues.map(q => {
    let rate = "";
    if (previous) {
      const p = previous.queues.find(x => x.stage === q.stage);
      const secs = (new Date(f.at) - new Date(previous.at)) / 1000;
      if (p && secs > 0) rate = ((q.delivered - p.delivered) / secs).toFixed(1);
    }
    const ready = q.replicas < 0 ? `<span class="muted">no status (${q.waiting} pulling)</span>` : `${q.ready} of ${q.replicas}`;
    return `<tr data-stage="${esc(q.stage)}"><td>${esc(q.stage)}</td><td class="pending">${q.pending}</td><td class="ack">${q.ack_pending}</td><td>${rate}</td><td class="ready">${ready}</td></tr>`;
  });
  $("#queues tbody").innerHTML = rows.join("");
  $("#kept").textContent = `${f.outputs} outputs kept, ${f.dead} dead letters`;
  $("#latency").textContent = f.latency.calls ? `calls in the last 5 minutes watched: ${f.latency.calls}, p50 ${f.latency.p50_ms.toFixed(1)} ms, p99 ${f.latency.p99_ms.toFixed(1)} ms` : "no calls seen since this page opened";
  previous = f;
  const backlog = {};
  f.queues.forEach(q => backlog[q.stage] = q.pending + q.ack_pending);
  history.push({at: f.at, backlog});
  if (history.length > 300) history.shift();
  drawChart();
}
const colors = {responses: "#6aa3ff", chunks: "#9b6aff", calls: "#ff9f43", results: "#2fbf71"};
function drawChart() {
  const c = $("#chart"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const max = Math.max(1, ...history.flatMap(h => Object.values(h.backlog)));
  Object.keys(colors).forEach(stage => {
    g.strokeStyle = colors[stage];
    g.beginPath();
    history.forEach((h, i) => {
      const x = c.width * i / Math.max(history.length - 1, 59), y = c.height - 4 - (c.height - 8) * (h.backlog[stage] || 0) / max;
      i ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
  });
  g.fillStyle = "#6b7385";
  g.fillText(`max ${max}`, 4, 12);
}
function live() {
  const url = new URL("api/events", location.href);
  if (token) url.searchParams.set("token", token);
  const es = new EventSource(url);
  es.addEventListener("flow", e => {
    $("#live").textContent = "live";
    $("#live").classList.add("on");
    const flow = JSON.parse(e.data);
    renderFlow(flow);
    renderTenants(flow.tenants);
    if ((location.hash || "#flow") === "#servers") loadServers();
  });
  es.onerror = () => { $("#live").textContent = "reconnecting…"; $("#live").classList.remove("on"); };
}

// Servers, and their state changes (healthd keeps the last ones of each).
function loadServers() {
  api("api/servers").then(list => {
    $("#server-table tbody").innerHTML = list.map(s => `<tr data-server="${esc(s.server)}"><td>${esc(s.server)}</td>
      <td class="state ${esc(s.state)}">${esc(s.state)}</td><td class="breaker">${esc(s.breaker)}</td><td>${esc(s.transport)}</td><td>${s.tools ?? ""}</td><td class="sessions">${s.sessions ?? ""}</td>
      <td>${s.latency_ms ? s.latency_ms.toFixed(1) + " ms" : ""}</td><td>${when(s.changed_at)}</td><td>${esc(s.error)}</td></tr>`).join("");
    const changes = list.flatMap(s => (s.history || []).map(h => ({server: s.server, ...h})))
      .sort((a, b) => new Date(b.at) - new Date(a.at));
    $("#server-history").innerHTML = changes.map(h => `<li>${when(h.at)} ${esc(h.server)}: ${esc(h.from)} → ${esc(h.to)}
      ${h.error ? `<span class="muted">${esc(h.error)}</span>` : ""}</li>`).join("");
  }).catch(err => $("#server-table tbody").innerHTML = `<tr><td colspan=8>${esc(err.message)}</td></tr>`);
}

function loadTools() {
  api("api/tools").then(list => {
    $("#tool-list").innerHTML = list.map(t => `<details data-tool="${esc(t.name)}"><summary><b>${esc(t.name)}</b>
      <span class="muted">${esc(t.backend)}${t.readOnly ? ", read-only" : ""}</span> — ${esc((t.description || "").split("\n")[0])}</summary>
      <h4>Input schema</h4><pre>${esc(JSON.stringify(t.inputSchema, null, 2))}</pre>
      ${Object.entries(t.declarations).map(([d, decl]) => `<h4>${esc(d)} <button class="copy" data-copy="${esc(JSON.stringify(decl, null, 2))}">copy</button></h4>
      <pre>${esc(JSON.stringify(decl, null, 2))}</pre>`).join("")}</details>`).join("");
  }).catch(err => $("#tool-list").textContent = err.message);
}
document.addEventListener("click", e => {
  if (e.target.matches("button.copy")) navigator.clipboard?.writeText(e.target.dataset.copy);
});

function loadCalls() {
  const q = new URLSearchParams(new FormData($("#call-filter")));
  api("api/calls?" + q).then(list => {
    $("#call-table tbody").innerHTML = list.map(c => `<tr data-conversation="${esc(c.conversation)}"><td>${when(c.at)}</td><td>${esc(c.conversation)}</td>
      <td>${esc(c.tool)}</td><td class="${c.success ? "up" : "failed"}">${c.success ? "ok" : esc(c.error?.code)}</td><td>${c.attempts || ""}</td>
      <td>${c.duration_ms ? c.duration_ms.toFixed(1) + " ms" : ""}</td><td>${c.arguments_bytes} B</td>
      <td><code>${esc(c.success ? c.preview : c.error?.message)}</code> <span class="muted">${c.result_bytes} B</span></td>
      <td>${c.trace_url ? `<a class="trace" href="${esc(c.trace_url)}" target="_blank">trace</a>` : esc(c.trace_id?.slice(0, 8))}</td></tr>`).join("");
  }).catch(err => $("#call-table tbody").innerHTML = `<tr><td colspan=9>${esc(err.message)}</td></tr>`);
}
$("#call-filter").addEventListener("submit", e => { e.preventDefault(); loadCalls(); });

function loadDead() {
  api("api/dead").then(list => {
    $("#dead-table tbody").innerHTML = list.map(d => `<tr data-seq="${d.sequence}"><td>${d.sequence}</td><td>${when(d.at)}</td><td>${esc(d.conversation)}</td>
      <td>${esc(d.kind)} ${esc(d.tool)}</td><td>${esc(d.reason)}</td>
      <td>${d.redrivable ? `<button class="redrive" data-seq="${d.sequence}" data-conversation="${esc(d.conversation)}">Redrive</button>` : ""}</td></tr>`).join("");
  }).catch(err => $("#dead-table tbody").innerHTML = `<tr><td colspan=6>${esc(err.message)}</td></tr>`);
}
document.addEventListener("click", e => {
  if (!e.target.matches("button.redrive")) return;
  const {seq, conversation} = e.target.dataset;
  $("#redrive-output").textContent = "sending again…";
  api(`api/dead/redrive?seq=${seq}`, {method: "POST"})
    .then(out => {
      $("#redrive-output").textContent = `redriven in ${conversation} as ${out.response_id}:\n${out.text}`;
      loadDead();
    })
    .catch(err => $("#redrive-output").textContent = err.message);
});

$("#try-form").addEventListener("submit", e => {
  e.preventDefault();
  const f = new FormData(e.target);
  $("#try-output").textContent = "running…";
  api("api/try", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({conversation: f.get("conversation"), text: f.get("text")})})
    .then(out => $("#try-output").textContent = out.text || out.kind)
    .catch(err => $("#try-output").textContent = err.message);
});

show();
live();
