// The console's browser test, driven by TestConsoleInABrowser: Debian's chromium under
// playwright-core against a running pipeline. CONTROL_URL is the Go test's control
// server (stop or start the MCP server, load the pipeline, file a dead call); each step
// throws when the page does not show what it must, and the main views are saved as
// screenshots in SHOTS_DIR.
const { chromium } = await import(process.env.PLAYWRIGHT);
const consoleURL = process.env.CONSOLE_URL, control = process.env.CONTROL_URL, shots = process.env.SHOTS_DIR;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
// Every wait is a bound on a hang, not a speed: a machine running two suites at once took
// over 15 s to show a breaker closed again.
context.setDefaultTimeout(90000);
// Whatever the Content-Security-Policy refuses, Chromium reports on the page's console;
// an exception the page's script does not catch, as a page error. Neither may happen.
const cspErrors = [], pageErrors = [];
const watch = p => {
  p.on("console", m => { if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text()); });
  p.on("pageerror", e => pageErrors.push(e.message));
};
watch(page);
const token = new URL(consoleURL).searchParams.get("token");
const step = name => console.log("step:", name);
const post = path => fetch(control + path, { method: "POST" }).then(r => { if (!r.ok) throw new Error(`${path}: ${r.status}`); });
const shot = name => page.screenshot({ path: `${shots}/${name}.png` });
const view = async name => { await page.goto(consoleURL + "#" + name); await page.waitForSelector(`#${name}.view.active`); };

try {
  step("the page loads with its token, under its Content-Security-Policy, and goes live");
  if (!token) throw new Error("CONSOLE_URL carries no token: " + consoleURL);
  const first = await page.goto(consoleURL);
  const headers = first.headers();
  if (!/script-src 'self'/.test(headers["content-security-policy"] || "") || headers["x-frame-options"] !== "DENY")
    throw new Error("the page's headers: " + JSON.stringify(headers));
  await page.waitForFunction(() => document.querySelector("#live").textContent === "live", null, { timeout: 90000 });
  await page.waitForFunction(() => document.querySelectorAll("#queues tbody tr").length === 4);
  if (new URL(page.url()).searchParams.has("token")) throw new Error("the token stays in the address bar: " + page.url());
  await page.reload(); // the tab keeps its token
  await page.waitForFunction(() => document.querySelector("#live").textContent === "live", null, { timeout: 90000 });
  // The policy is in force: an inline script is refused, and reported.
  const refused = page.waitForEvent("console", m => /Content Security Policy/i.test(m.text()));
  await page.evaluate(() => { const s = document.createElement("script"); s.textContent = "window.inlineRan = true"; document.body.append(s); });
  await refused;
  if (await page.evaluate(() => window.inlineRan)) throw new Error("an inline script ran under the console's policy");
  cspErrors.length = 0;

  step("without its token, the page asks for it, and works once it is pasted");
  const bare = await browser.newContext();
  bare.setDefaultTimeout(90000);
  const other = await bare.newPage();
  watch(other);
  await other.goto(consoleURL.split("?")[0]);
  await other.locator("#token-form").waitFor({ state: "visible", timeout: 90000 });
  if (await other.textContent("#live") === "live") throw new Error("the page went live without its token");
  await other.fill('#token-form input[name="token"]', token);
  await other.click("#token-form button");
  await other.waitForFunction(() => document.querySelector("#live").textContent === "live", null, { timeout: 90000 });
  if (await other.isVisible("#token-form")) throw new Error("the token form stays after the token was pasted");
  await bare.close();

  step("a server goes down and comes back");
  await view("servers");
  const state = () => page.locator('#server-table tr[data-server="everything"] .state');
  const breaker = () => page.locator('#server-table tr[data-server="everything"] .breaker');
  await state().filter({ hasText: /^up$/ }).waitFor({ timeout: 90000 });
  await breaker().filter({ hasText: /^closed$/ }).waitFor({ timeout: 90000 });
  await post("/server/stop");
  await state().filter({ hasText: /^down$/ }).waitFor({ timeout: 90000 });
  await breaker().filter({ hasText: /^open$/ }).waitFor({ timeout: 90000 });
  await shot("servers");
  await post("/server/start");
  await state().filter({ hasText: /^up$/ }).waitFor({ timeout: 90000 });
  await page.locator("#server-history li", { hasText: "everything: up → down" }).waitFor();
  await page.locator("#server-history li", { hasText: "everything: down → up" }).waitFor();

  step("the backlog rises and falls under toolbus bench");
  const bench = await fetch(control + "/bench", { method: "POST" }).then(r => r.ok ? r.json() : r.text().then(t => { throw new Error(t); }));
  await page.goto(bench.url + "#flow");
  await page.waitForFunction(() => document.querySelector("#live").textContent === "live", null, { timeout: 90000 });
  const backlog = () => page.evaluate(() => [...document.querySelectorAll("#queues tbody tr")]
    .reduce((n, tr) => n + Number(tr.querySelector(".pending").textContent) + Number(tr.querySelector(".ack").textContent), 0));
  let peak = 0;
  for (let i = 0; i < 300 && peak === 0; i++) { peak = Math.max(peak, await backlog()); await page.waitForTimeout(100); }
  if (peak === 0) throw new Error("the backlog never rose");
  await shot("flow");
  for (let i = 0; i < 20; i++) { // the run goes on: the screenshot at its highest backlog
    const now = await backlog();
    if (now > peak) { peak = now; await shot("flow"); }
    await page.waitForTimeout(100);
  }
  await page.waitForFunction(() => [...document.querySelectorAll("#queues tbody tr")]
    .every(tr => tr.querySelector(".pending").textContent === "0" && tr.querySelector(".ack").textContent === "0"), null, { timeout: 120000 });
  console.log("backlog peak seen:", peak);
  await page.locator("#latency", { hasText: /p50 [0-9.]+ ms, p99 [0-9.]+ ms/ }).waitFor();
  console.log(await page.textContent("#latency"));
  await page.goto(consoleURL);

  step("a failed call and its reason found by conversation under 1,100 newer outputs, and its trace");
  await view("calls");
  await page.fill('#call-filter input[name="conversation"]', "broken-1");
  await page.click("#call-filter button");
  // The filtered list replaces the one the view opened with: broken-1's two calls,
  // read through its own subject.
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll("#call-table tbody tr");
    return rows.length === 2 && [...rows].every(r => r.dataset.conversation === "broken-1");
  }, null, { timeout: 90000 });
  if (!/read 1 outputs/.test(await page.textContent("#call-scanned"))) throw new Error("broken-1's calls: " + await page.textContent("#call-scanned"));
  await page.selectOption('#call-filter select[name="outcome"]', "failed");
  await page.click("#call-filter button");
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll("#call-table tbody tr");
    return rows.length === 1 && rows[0].dataset.conversation === "broken-1" && rows[0].querySelector(".failed");
  }, null, { timeout: 90000 });
  const row = page.locator('#call-table tbody tr[data-conversation="broken-1"]');
  const reason = await row.textContent();
  if (!/unknown_tool/.test(reason) || !/no_such_tool/.test(reason)) throw new Error("the failed call's row lacks its reason: " + reason);
  // Each tool's statistics, for this conversation, with the outputs they come from.
  // The tool fails 100 % in every output too: the statistics are the filter's once
  // their basis says so (the unfiltered ones may still be on the page a moment).
  await page.locator('#stats-table tr[data-tool="no_such_tool"] .rate', { hasText: "100.0 %" }).waitFor({ timeout: 90000 });
  await page.waitForFunction(() => /^1 outputs from/.test(document.querySelector("#stats-basis")?.textContent ?? ""), null, { timeout: 90000 })
    .catch(async () => { throw new Error("stats: " + await page.textContent("#stats-basis")); });
  await shot("calls");
  const [trace] = await Promise.all([context.waitForEvent("page"), row.locator("a.trace").click()]);
  await trace.waitForLoadState();
  if (!/\/jaeger\/trace\/[0-9a-f]{32}$/.test(trace.url())) throw new Error("the trace link went to " + trace.url());
  if (!(await trace.textContent("body")).includes("trace ")) throw new Error("the trace page: " + await trace.textContent("body"));
  await trace.close();

  step("a dead letter redriven, and its new output");
  await post("/dead");
  await view("dead");
  await page.locator("button.redrive").first().waitFor({ timeout: 90000 });
  await page.locator("button.redrive").first().click();
  await page.locator("#redrive-output", { hasText: "<tool_result>" }).waitFor({ timeout: 60000 });
  const redriven = await page.textContent("#redrive-output");
  if (!redriven.includes('"tool": "clock"') || !redriven.includes('"success": true')) throw new Error("redrive: " + redriven);
  // The letter now says when it was redriven, as which response, and what came of it;
  // a plain Redrive is no longer offered.
  const letter = page.locator("#dead-table tr.was-redriven").first();
  await letter.locator(".redriven", { hasText: /redriven at .+, as response redrive-/ }).waitFor({ timeout: 90000 });
  await letter.locator(".redrive-output", { hasText: "clock ok" }).waitFor({ timeout: 90000 });
  if (await letter.locator("button.redrive:not(.forced)").count()) throw new Error("a redriven letter still offers a plain Redrive");
  await shot("dead");

  step("a second redrive only once confirmed, saying that the call runs again");
  const again = page.locator("button.redrive", { hasText: "Redrive again" }).first();
  await again.waitFor({ timeout: 90000 });
  const questions = [];
  page.once("dialog", d => { questions.push(d.message()); d.dismiss(); });
  await again.click();
  await page.locator("#redrive-output", { hasText: "not sent again" }).waitFor({ timeout: 90000 });
  if (!/runs its call again/.test(questions[0] || "") || !/second time/.test(questions[0])) throw new Error("the confirmation: " + questions[0]);
  page.once("dialog", d => { questions.push(d.message()); d.accept(); });
  await again.click();
  await page.waitForFunction(before => {
    const text = document.querySelector("#redrive-output").textContent;
    return text.includes("<tool_result>") && text !== before;
  }, redriven, { timeout: 60000 });
  if (questions.length !== 2) throw new Error("confirmations asked: " + questions.length);

  step("two calls wait for approval: one approved runs, one denied is refused with the reason");
  await post("/approvals");
  await view("approvals");
  const waiting = conv => page.locator(`#approval-table tr[data-conversation="${conv}"]`);
  for (let i = 0; i < 100 && (await waiting("approve-1").count() === 0 || await waiting("deny-1").count() === 0); i++) {
    await page.waitForTimeout(200);
    await page.click("#approval-filter button");
  }
  await waiting("deny-1").waitFor({ timeout: 5000 });
  const row1 = await waiting("approve-1").textContent();
  if (!row1.includes("everything__echo") || !row1.includes("may I, approve-1?") || !row1.includes("echo-asks")) throw new Error("the waiting call's row: " + row1);
  await shot("approvals");
  await waiting("approve-1").locator("button.approve").click();
  await page.locator("#approval-output", { hasText: "approved" }).waitFor({ timeout: 90000 });
  const approved = await fetch(control + "/approvals/approve-1").then(r => r.text());
  if (!approved.includes('"success":true') || !approved.includes("may I, approve-1?")) throw new Error("the approved call: " + approved);
  page.once("dialog", d => d.accept("not on a Friday"));
  await waiting("deny-1").locator("button.deny").click();
  await page.locator("#approval-output", { hasText: "denied" }).waitFor({ timeout: 90000 });
  const denied = await fetch(control + "/approvals/deny-1").then(r => r.text());
  if (!denied.includes("not_allowed") || !denied.includes("denied by console") || !denied.includes("not on a Friday")) throw new Error("the denied call: " + denied);
  await page.waitForFunction(() => document.querySelectorAll("#approval-table tbody tr.none").length === 1, null, { timeout: 90000 });

  step("try it answers a pasted response");
  await view("try");
  await page.fill('#try-form textarea', '<tool_call>{"name": "everything__echo", "arguments": {"message": "from the console"}}</tool_call>');
  await page.click("#try-form button");
  await page.locator("#try-output", { hasText: "from the console" }).waitFor({ timeout: 60000 });
  await shot("try");

  step("the tools, with their declarations");
  await view("tools");
  const clock = page.locator('details[data-tool="clock"]').first();
  await clock.waitFor();
  await clock.locator("summary").click();
  await clock.locator("h4", { hasText: "openai" }).waitFor();
  await shot("tools");

  step("no Content-Security-Policy violation, no uncaught error");
  if (cspErrors.length) throw new Error("the Content-Security-Policy refused: " + cspErrors.join("\n"));
  if (pageErrors.length) throw new Error("page errors: " + pageErrors.join("\n"));
  console.log("all steps passed");
} finally {
  await browser.close();
}
