// toolbus console: reads /api/ and renders each view; the flow updates live from
// /api/events (server-sent events, read with fetch so that they carry the token).
"use strict";

// The token: taken once from the URL toolbus printed (?token=…), kept in this tab's
// sessionStorage (which no other origin, not even another port of this host, can read;
// a cookie would go to every port of the host), and removed from the address bar, so
// that it does not stay in the history or on screen. Every API request carries it as
// "Authorization: Bearer …"; the console takes it nowhere else.
const tokenKey = "toolbus-console-token";
{
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    sessionStorage.setItem(tokenKey, params.get("token"));
    params.delete("token");
    const rest = params.toString();
    window.history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
}
const token = () => sessionStorage.getItem(tokenKey);
const headers = extra => {
  const h = {...extra};
  if (token()) h.Authorization = "Bearer " + token();
  return h;
};
// The token is missing or refused: ask for it.
function needToken() {
  const form = document.querySelector("#token-form");
  form.querySelector(".why").textContent = token() ? "The console refused this tab's token." : "This console needs its token.";
  form.hidden = false;
}
document.querySelector("#token-form").addEventListener("submit", e => {
  e.preventDefault();
  const t = new FormData(e.target).get("token").trim();
  if (t) { sessionStorage.setItem(tokenKey, t); location.reload(); }
});

// api fetches path; a body is sent as JSON. A refusal throws an Error with its status
// and the answer's body.
const api = (path, body) => {
  const init = body === undefined ? {headers: headers()}
    : {method: "POST", headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(body)};
  return fetch(path, init).then(async r => {
    const answer = await r.json().catch(() => ({}));
    if (r.status === 401) needToken();
    if (!r.ok) throw Object.assign(new Error(answer.error || r.statusText), {status: r.status, body: answer});
    return answer;
  });
};
const $ = sel => document.querySelector(sel);
const esc = s => String(s ?? "").replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const when = t => t ? new Date(t).toLocaleTimeString() : "-";

// Views, chosen by the URL's hash: "#calls?conversation=c1&outcome=failed" opens the
// calls with that filter.
const loaders = {flow: () => {}, servers: loadServers, tools: loadTools, calls: openCalls, dead: openDead, approvals: loadApprovals, try: () => {}};
function show() {
  const [view, rest] = (location.hash || "#flow").slice(1).split("?");
  const params = new URLSearchParams(rest || "");
  const tab = view === "calls" && params.get("outcome") === "failed" ? "failures" : view;
  document.querySelectorAll(".view").forEach(v => v.classList.toggle("active", v.id === view));
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.view === tab));
  (loaders[view] || (() => {}))(params);
}
// fill sets a filter form's fields to params (the others empty) when the hash names any.
function fill(form, params) {
  if (![...params.keys()].length) return;
  for (const el of form.elements) if (el.name) el.value = params.get(el.name) ?? "";
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
function onFlow(flow) {
  $("#live").textContent = "live";
  $("#live").classList.add("on");
  renderFlow(flow);
  renderTenants(flow.tenants);
  if ((location.hash || "#flow") === "#servers") loadServers();
}
// live reads /api/events, and reconnects after a pause when it ends.
async function live() {
  for (;;) {
    try {
      const r = await fetch("api/events", {headers: headers({Accept: "text/event-stream"}), cache: "no-store"});
      if (r.status === 401) {
        needToken();
        $("#live").textContent = "no token";
        return;
      }
      if (!r.ok) throw new Error(r.statusText);
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          let event = "message";
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
          if (event === "flow" && data.length) onFlow(JSON.parse(data.join("\n")));
        }
      }
    } catch (err) {
      console.warn("console: live events:", err.message);
    }
    $("#live").textContent = "reconnecting…";
    $("#live").classList.remove("on");
    await new Promise(done => setTimeout(done, 2000));
  }
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

// Calls: newest first, a page at a time ("Older" continues from the page's cursor); a
// page the console's bound cut says so.
let callCursor = 0;
function openCalls(params) {
  fill($("#call-filter"), params);
  loadCalls(false);
  loadStats();
}
const callRow = c => `<tr data-conversation="${esc(c.conversation)}" data-response="${esc(c.response_id)}"><td>${when(c.at)}</td><td>${esc(c.conversation)}</td>
      <td>${esc(c.tool)}</td><td>${esc(c.server)}</td><td class="${c.success ? "up" : "failed"}">${c.success ? "ok" : esc(c.error?.code)}</td><td>${c.attempts || ""}</td>
      <td>${c.duration_ms ? c.duration_ms.toFixed(1) + " ms" : ""}</td><td>${c.arguments_bytes} B</td>
      <td><code>${esc(c.success ? c.preview : c.error?.message)}</code> <span class="muted">${c.result_bytes} B</span></td>
      <td>${c.trace_url ? `<a class="trace" href="${esc(c.trace_url)}" target="_blank" rel="noopener noreferrer">trace</a>` : esc(c.trace_id?.slice(0, 8))}</td></tr>`;
// query is a filter form's non-empty fields, and a cursor.
function query(form, cursor) {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
  if (cursor) q.set("cursor", cursor);
  return q;
}
// paged shows a page's notice, how much it read, and the Older button.
function paged(name, page, what) {
  const notice = $(`#${name}-notice`);
  notice.textContent = page.notice || "";
  notice.hidden = !page.notice;
  $(`#${name}-scanned`).textContent = `read ${page.scanned} ${what}${page.oldest ? " back to " + new Date(page.oldest).toLocaleString() : ""}`;
  $(`#${name}-older`).hidden = !page.next;
}
function loadCalls(older) {
  const body = $("#call-table tbody");
  api("api/calls?" + query($("#call-filter"), older ? callCursor : 0)).then(page => {
    const rows = page.calls.map(callRow).join("");
    if (older) body.insertAdjacentHTML("beforeend", rows); else body.innerHTML = rows;
    if (!body.children.length) body.innerHTML = `<tr class="none"><td colspan=10 class="muted">no call in what was read</td></tr>`;
    callCursor = page.next || 0;
    paged("call", page, "outputs");
  }).catch(err => body.innerHTML = `<tr><td colspan=10>${esc(err.message)}</td></tr>`);
}
$("#call-filter").addEventListener("submit", e => { e.preventDefault(); loadCalls(false); loadStats(); });
$("#call-older").addEventListener("click", () => loadCalls(true));

// Each tool's calls over a window, for the filter's tenant or conversation.
function loadStats() {
  const q = new URLSearchParams();
  const calls = new FormData($("#call-filter"));
  for (const k of ["tenant", "conversation"]) if (calls.get(k)) q.set(k, calls.get(k));
  q.set("since", new FormData($("#stats-filter")).get("since"));
  api("api/stats?" + q).then(st => {
    $("#stats-basis").textContent = `${st.outputs} outputs from ${new Date(st.since).toLocaleString()} to ${new Date(st.until).toLocaleString()}` +
      (st.notice ? ` — ${st.notice}` : "");
    $("#stats-table tbody").innerHTML = st.tools.map(t => `<tr data-tool="${esc(t.tool)}"><td>${esc(t.tool)}</td><td>${esc(t.server)}</td>
      <td class="calls">${t.calls}</td><td>${t.failed}</td><td class="rate">${(100 * t.error_rate).toFixed(1)} %</td>
      <td>${t.ran ? t.p50_ms.toFixed(1) + " ms" : ""}</td><td>${t.ran ? t.p99_ms.toFixed(1) + " ms" : ""}</td></tr>`).join("");
  }).catch(err => $("#stats-basis").textContent = err.message);
}
$("#stats-filter").addEventListener("submit", e => { e.preventDefault(); loadStats(); });

// Dead letters: a redriven one says when, as which response, and what its output said;
// sending it again is there, but as the exception it is.
let deadCursor = 0;
function openDead(params) {
  fill($("#dead-filter"), params);
  loadDead(false);
}
const outcome = calls => (calls || []).map(c => `${esc(c.tool)} ${c.success ? "ok" : esc(c.error?.code)}`).join(", ");
function deadRow(d) {
  const r = d.redrive;
  const link = `#calls?${new URLSearchParams({conversation: d.conversation, response: r?.response_id})}`;
  const done = r ? `<div class="redriven muted">redriven at ${esc(new Date(r.at).toLocaleString())}${r.forced ? " (forced)" : ""}, ` +
    `as response <a href="${esc(link)}">${esc(r.response_id)}</a>: <span class="redrive-output">${r.output ? outcome(r.output) : "no output yet"}</span></div>` : "";
  const action = !d.redrivable ? "" : r
    ? `<button class="redrive forced" data-seq="${d.sequence}" data-conversation="${esc(d.conversation)}" data-redriven="${esc(r.response_id)}">Redrive again…</button>`
    : `<button class="redrive" data-seq="${d.sequence}" data-conversation="${esc(d.conversation)}" data-redriven="">Redrive</button>`;
  return `<tr data-seq="${d.sequence}" class="${r ? "was-redriven" : ""}"><td>${d.sequence}</td><td>${when(d.at)}</td><td>${esc(d.conversation)}</td>
      <td>${esc(d.kind)} ${esc(d.tool)}</td><td>${esc(d.reason)}${done}</td><td>${action}</td></tr>`;
}
function loadDead(older) {
  const body = $("#dead-table tbody");
  api("api/dead?" + query($("#dead-filter"), older ? deadCursor : 0)).then(page => {
    const rows = page.letters.map(deadRow).join("");
    if (older) body.insertAdjacentHTML("beforeend", rows); else body.innerHTML = rows;
    deadCursor = page.next || 0;
    paged("dead", page, "messages");
  }).catch(err => body.innerHTML = `<tr><td colspan=6>${esc(err.message)}</td></tr>`);
}
$("#dead-filter").addEventListener("submit", e => { e.preventDefault(); loadDead(false); });
$("#dead-older").addEventListener("click", () => loadDead(true));
// A dead letter is redriven once; sending it again must be confirmed, and is forced.
const forceQuestion = (seq, as) => `Dead letter ${seq} was redriven already${as ? ` (as ${as})` : ""}.\n\n` +
  "Redriving it again runs its call again: if the call changes something (files a ticket, sends a message, " +
  "moves money), and the first redrive ran, it happens a second time.\n\nRun the call again?";
document.addEventListener("click", e => {
  if (!e.target.matches("button.redrive")) return;
  const {seq, conversation, redriven} = e.target.dataset;
  const out = $("#redrive-output");
  const send = force => {
    out.textContent = force ? "sending again (forced)…" : "sending again…";
    return api("api/dead/redrive", {seq: Number(seq), force})
      .then(o => { out.textContent = `redriven in ${conversation} as ${o.response_id}:\n${o.text}`; loadDead(false); });
  };
  const forced = as => {
    if (!confirm(forceQuestion(seq, as))) { out.textContent = `dead letter ${seq}: not sent again`; return; }
    return send(true);
  };
  (redriven ? Promise.resolve(forced(redriven)) : send(false).catch(err => {
    if (err.status !== 409) throw err;
    loadDead(false);
    return forced(err.body.redriven?.response_id); // redriven meanwhile (another tab, toolbus dead redrive)
  })).catch(err => out.textContent = err.message);
});

// Approvals: the calls waiting for a person; Approve runs the call once, Deny asks why
// (the model reads it).
function approvalRow(a) {
  const waiting = a.state === "pending";
  const state = waiting ? "waiting" : `${esc(a.state)}${a.decided_by ? " by " + esc(a.decided_by) : ""}${a.reason ? `: ${esc(a.reason)}` : ""}`;
  const actions = waiting ? `<button class="approve" data-id="${esc(a.id)}" data-sha="${esc(a.arguments_sha256)}">Approve</button> <button class="deny" data-id="${esc(a.id)}" data-sha="${esc(a.arguments_sha256)}">Deny…</button>` : "";
  return `<tr data-id="${esc(a.id)}" data-conversation="${esc(a.conversation)}" class="${esc(a.state)}"><td><code>${esc(a.id)}</code></td><td>${when(a.requested_at)}</td>
    <td>${when(a.deadline)}</td><td>${esc(a.conversation)}</td><td>${esc(a.tool)}</td><td><code>${esc(JSON.stringify(a.arguments))}</code>${a.truncated ? " <span class=muted>(cut)</span>" : ""}</td>
    <td>${esc(a.rule)}${a.when ? `<div class="muted">${esc(a.when)}</div>` : ""}</td><td class="state">${state}</td><td>${actions}</td></tr>`;
}
function loadApprovals() {
  const body = $("#approval-table tbody");
  const all = new FormData($("#approval-filter")).get("all") ? "?all=1" : "";
  api("api/approvals" + all).then(list => {
    body.innerHTML = list.length ? list.map(approvalRow).join("") : `<tr class="none"><td colspan=9 class="muted">no call waits for a decision</td></tr>`;
  }).catch(err => body.innerHTML = `<tr><td colspan=9>${esc(err.message)}</td></tr>`);
}
$("#approval-filter").addEventListener("submit", e => { e.preventDefault(); loadApprovals(); });
document.addEventListener("click", e => {
  const approve = e.target.matches("button.approve"), deny = e.target.matches("button.deny");
  if (!approve && !deny) return;
  const id = e.target.dataset.id, sha256 = e.target.dataset.sha, out = $("#approval-output");
  let reason = "";
  if (deny) {
    reason = prompt(`Deny call ${id}? The model reads the reason:`, "");
    if (reason === null) { out.textContent = `${id}: not decided`; return; }
  }
  // The decision is for the arguments shown: their digest goes with it.
  api("api/approvals/decide", {id, decision: approve ? "approve" : "deny", reason, arguments_sha256: sha256})
    .then(a => { out.textContent = `${a.id}: ${a.state} — ${approve ? "the call runs now" : "the call is answered not_allowed"}`; loadApprovals(); })
    .catch(err => { out.textContent = `${id}: ${err.message}`; loadApprovals(); });
});

$("#try-form").addEventListener("submit", e => {
  e.preventDefault();
  const f = new FormData(e.target);
  $("#try-output").textContent = "running…";
  api("api/try", {conversation: f.get("conversation"), text: f.get("text")})
    .then(out => $("#try-output").textContent = out.text || out.kind)
    .catch(err => $("#try-output").textContent = err.message);
});

show();
live();
