// check.mjs drives meshd's status page in the machine's headless Chromium
// for the Go test TestStatusPageInChromium. It talks to the test over
// stdio:
//
//	node check.mjs --url URL --names bob,carol --body TEXT [--screenshot FILE]
//
//  1. loads URL (the login address that meshctl ui prints), checks that
//     the token left the address bar and that a browser without the
//     cookie gets 401, and waits until every name is in the peers table and the
//     page is live; then prints READY
//  2. waits for a line SENT on stdin (the test has sent the message), and
//     then for TEXT to appear, as text, in the live tail within 2 s
//  3. checks that the page logged no console error and threw nothing,
//     made no request but GETs to its own origin, and turned none of TEXT
//     into markup; prints OK and exits 0, or prints why and exits 1.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    url: { type: "string" },
    names: { type: "string", default: "" },
    body: { type: "string" },
    screenshot: { type: "string" },
    chromium: { type: "string", default: process.env.CHROMIUM || "/usr/bin/chromium" },
  },
});
if (!opt.url || !opt.body) {
  console.error("usage: node check.mjs --url URL --names A,B --body TEXT [--screenshot FILE]");
  process.exit(2);
}
const names = opt.names.split(",").filter(Boolean);
const TAIL_WITHIN_MS = 2000;

// A hung browser or test must not hang CI.
const guard = setTimeout(() => {
  console.error("FAIL: check.mjs did not finish within 90s");
  process.exit(1);
}, 90_000);

const problems = [];
const origin = new URL(opt.url).origin;

// Lines from the Go test, read as they come.
const lines = [];
let wake = null;
createInterface({ input: process.stdin }).on("line", (l) => {
  lines.push(l.trim());
  if (wake) wake();
});
async function nextLine(ms) {
  const deadline = Date.now() + ms;
  while (lines.length === 0) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`no line on stdin within ${ms}ms`);
    await new Promise((r) => {
      wake = r;
      setTimeout(r, left);
    });
  }
  return lines.shift();
}

// The flags this machine's Chromium needs: no sandbox (root), no GPU, and
// no background connections to a network that is closed here. Playwright
// gives each launch a fresh, empty profile directory of its own.
const browser = await chromium.launch({
  executablePath: opt.chromium,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
let code = 1;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => {
    if (new URL(r.url()).origin !== origin) problems.push(`request to another origin: ${r.url()}`);
    if (r.method() !== "GET") problems.push(`${r.method()} request: ${r.url()}`);
  });
  page.on("requestfailed", (r) => {
    // The event stream is cut when the page closes; anything else counts.
    if (!r.url().endsWith("/events")) problems.push(`request failed: ${r.url()}: ${r.failure()?.errorText}`);
  });

  const resp = await page.goto(opt.url, { waitUntil: "load" });
  if (!resp || resp.status() !== 200) throw new Error(`GET ${opt.url}: ${resp && resp.status()}`);
  // The login address set the cookie and left the token out of the
  // address bar; a browser without the cookie gets nothing.
  if (new URL(page.url()).searchParams.has("token")) problems.push(`token left in the address: ${page.url()}`);
  const anon = await browser.newContext();
  for (const p of ["/", "/api/state", "/events"]) {
    const r = await anon.request.get(origin + p, { timeout: 5_000 });
    if (r.status() !== 401) problems.push(`GET ${p} without the cookie: ${r.status()}, want 401`);
  }
  await anon.close();

  await page.waitForFunction(
    (names) => {
      const peers = document.querySelector("#peers tbody");
      const conn = document.getElementById("conn");
      return conn && conn.dataset.state === "live" && peers &&
        names.every((n) => [...peers.querySelectorAll("td.name")].some((td) => td.textContent === n));
    },
    names,
    { timeout: 20_000 },
  );
  console.log("READY");

  const line = await nextLine(30_000);
  if (line !== "SENT") throw new Error(`expected SENT on stdin, got ${JSON.stringify(line)}`);
  const sentAt = Date.now();
  await page.waitForFunction(
    (body) => [...document.querySelectorAll("#tail li.item .body")].some((e) => e.textContent === body),
    opt.body,
    { timeout: TAIL_WITHIN_MS },
  ).catch(() => {
    throw new Error(`message body not in the live tail within ${TAIL_WITHIN_MS}ms`);
  });
  const took = Date.now() - sentAt;

  // The body was shown as text: nothing in it became an element, and no
  // handler in it ran.
  const markup = await page.evaluate(() => ({
    elements: document.querySelectorAll("#tail .body *").length,
    xss: window.__meshXSS === true,
  }));
  if (markup.elements !== 0 || markup.xss) problems.push(`message body became markup: ${JSON.stringify(markup)}`);

  // The rest of the page is there: a node in the graph for every member,
  // and no form or button to act with.
  const shape = await page.evaluate(() => ({
    graphNodes: document.querySelectorAll("#graph .gnode").length,
    rosterRows: document.querySelectorAll("#roster tbody tr").length,
    channels: [...document.querySelectorAll("#channels td.name")].map((e) => e.textContent),
    controls: document.querySelectorAll("form, button, input, textarea, select").length,
  }));
  if (shape.graphNodes < names.length + 1) problems.push(`graph shows ${shape.graphNodes} nodes`);
  if (shape.rosterRows < names.length + 1) problems.push(`roster shows ${shape.rosterRows} members`);
  if (shape.channels.length === 0) problems.push("no channels shown");
  if (shape.controls !== 0) problems.push(`${shape.controls} form controls on a read-only page`);

  if (opt.screenshot) {
    await page.waitForTimeout(300);
    await page.screenshot({ path: opt.screenshot, fullPage: true });
  }
  if (problems.length === 0) {
    console.log(`OK (message in the tail ${took}ms after it was sent)`);
    code = 0;
  }
} catch (e) {
  problems.push(e.message);
} finally {
  await browser.close();
}
for (const p of problems) console.error("FAIL: " + p);
clearTimeout(guard);
process.exit(code);
