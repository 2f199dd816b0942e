// The web face measured (benches/web.sh runs it in a fresh project, with a release build):
// page weight; a gate on a real phone-sized page after an agent's command exits; a decision's
// round trip from the click; the server's memory with 50 phones signed in and following events.
// Env: LOOPX_BIN, LOOPX_CHROMIUM, LOOPX_PLAYWRIGHT; RUNS (20), PHONES (50).
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createInterface } from "node:readline";
import zlib from "node:zlib";
import { launch, openPairing, loggedIn, seen, decide } from "../tests/web_browser/phone.mjs";

const BIN = process.env.LOOPX_BIN;
const RUNS = Number(process.env.RUNS || 20);
const PHONES = Number(process.env.PHONES || 50);

/// A child with its stdout as awaited lines; `next()` is the next line as JSON.
function run(args) {
  const child = spawn(BIN, args, { stdio: ["pipe", "pipe", "inherit"] });
  const it = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await it.next()).value);
  const exited = new Promise((ok) => child.on("exit", (code) => ok({ code, at: Date.now() })));
  return { child, next, exited };
}

/// Runs a loopx command to its end; its JSON and the time it exited.
async function loopx(args) {
  const p = run([...args, "--json"]);
  const v = await p.next();
  const { code, at } = await p.exited;
  if (code !== 0) throw new Error(`loopx ${args.join(" ")}: exit ${code}: ${JSON.stringify(v)}`);
  return { v, at };
}

/// One HTTP request to the server: status, headers, body.
function req(base, method, path, { cookie, body } = {}) {
  const u = new URL(path, base);
  const headers = { Host: u.host };
  if (cookie) headers.Cookie = cookie;
  if (method === "POST") Object.assign(headers, { Origin: base, "Content-Type": "application/json" });
  return new Promise((ok, fail) => {
    const r = http.request(u, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => ok({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    r.on("error", fail);
    r.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x) => Math.round(x * 10) / 10;

/// VmRSS and VmHWM of a process, in KiB.
function memory(pid) {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (k) => Number(s.match(new RegExp(`^${k}:\\s+(\\d+) kB`, "m"))[1]);
  return { rss_kib: kib("VmRSS"), hwm_kib: kib("VmHWM") };
}

/// Pairs one device through `loopx web pair --json`: `send(url)` gives the key to the server and
/// resolves to the fingerprint its side shows, which must be the terminal's.
async function pair(name, send) {
  const p = run(["web", "pair", "--name", name, "--json"]);
  const { url } = await p.next();
  const shown = await send(url);
  const asked = await p.next();
  if (asked.fingerprint !== shown) throw new Error(`fingerprints differ: ${shown} ${asked.fingerprint}`);
  p.child.stdin.end("y\n");
  const done = await p.next();
  if (!done.ok) throw new Error(JSON.stringify(done));
  await p.exited;
}

/// The bytes of the page, its script and its style, as served (and gzipped, for reference).
async function weight(base) {
  const out = {};
  for (const path of ["/", "/app.js", "/app.css"]) {
    const r = await req(base, "GET", path);
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
    out[path] = { bytes: r.body.length, gzip: zlib.gzipSync(r.body, { level: 9 }).length,
      encoding: r.headers["content-encoding"] || "identity" };
  }
  const sum = (k) => Object.values(out).reduce((n, x) => n + x[k], 0);
  return { files: out, total_bytes: sum("bytes"), total_gzip: sum("gzip") };
}

/// The browser phone: pairs, then RUNS times an agent opens a gate and the phone approves it.
async function browserRuns(base) {
  const phone = await launch();
  try {
    await pair("phone", (url) => openPairing(phone.page, url));
    await loggedIn(phone.page);
    // When the page hears each `change` (its EventSource is app.js's `events`).
    await phone.page.evaluate(() => {
      window.__heard = [];
      events.addEventListener("change", () => window.__heard.push(Date.now()));
    });
    const shown = [], shownFromStart = [], heard = [], click = [], server = [];
    for (let i = 0; i < RUNS; i++) {
      await phone.page.evaluate(() => { window.__heard = []; });
      const start = Date.now();
      const { v, at } = await loopx(["--agent", "a1", "gate", "open", `Run ${i}: ship it?`,
        "--option", "yes", "--option", "no"]);
      const id = v.gate.id;
      const on = await seen(phone.page, id);
      shown.push(on - at);
      shownFromStart.push(on - start);
      heard.push(await phone.page.evaluate(() => window.__heard[0]) - at);
      const d = await decide(phone.page, id, "approve", { option: "yes" });
      click.push(d.ms);
      server.push(d.server_ms);
    }
    if (phone.errors.some((e) => !e.includes("status of 404"))) throw new Error(phone.errors.join("\n"));
    return { runs: RUNS, gate_on_screen_ms: { after_exit: median(shown), after_start: median(shownFromStart),
      max_after_exit: Math.max(...shown), change_heard_after_exit: median(heard) }, decision_ms: { click_to_answer: round(median(click)),
      request_only: round(median(server)), max_click_to_answer: round(Math.max(...click)) } };
  } finally {
    await phone.close();
  }
}

// kernel::device::fields, for a simulated phone's signatures.
function fields(list) {
  return Buffer.concat(list.flatMap((f) => {
    const b = Buffer.from(String(f), "utf8");
    const n = Buffer.alloc(4);
    n.writeUInt32BE(b.length);
    return [n, b];
  }));
}

/// A phone without a browser: its own Ed25519 key, paired, signed in, following `/api/events`,
/// and reading `/api/state` at each change as the page does.
async function simPhone(base, name, stats) {
  const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x, "base64url");
  await pair(name, async (url) => {
    const token = new URL(url).hash.replace("#t=", "");
    const r = await req(base, "POST", "/api/pair", { body: { token, key: raw.toString("hex"), label: "bench" } });
    if (r.status !== 200) throw new Error(`pair: ${r.status} ${r.body}`);
    return JSON.parse(r.body).fingerprint;
  });
  const { challenge } = JSON.parse((await req(base, "GET", "/api/challenge")).body);
  const signature = crypto.sign(null, fields(["loopx-web-session-v1", challenge, base, name]), privateKey).toString("hex");
  const s = await req(base, "POST", "/api/session", { body: { device: name, challenge, signature } });
  if (s.status !== 200) throw new Error(`session: ${s.status} ${s.body}`);
  const cookie = String(s.headers["set-cookie"]).split(";")[0];
  await new Promise((ok, fail) => {
    const u = new URL("/api/events", base);
    http.get(u, { headers: { Host: u.host, Cookie: cookie }, agent: false }, (res) => {
      if (res.statusCode !== 200) return fail(new Error(`events: ${res.statusCode}`));
      let buf = "";
      res.on("data", async (c) => {
        buf += c;
        let at;
        while ((at = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, at);
          buf = buf.slice(at + 2);
          if (ev.includes("event: ready")) ok();
          if (ev.includes("event: change")) {
            const st = await req(base, "GET", "/api/state", { cookie });
            if (st.status === 200) stats.states++;
          }
        }
      });
    }).on("error", fail);
  });
}

async function phones(base, pid) {
  const idle = memory(pid);
  const stats = { states: 0 };
  for (let i = 1; i <= PHONES; i++) await simPhone(base, `bench-${i}`, stats);
  await new Promise((ok) => setTimeout(ok, 500));
  const open = memory(pid);
  stats.states = 0;
  await loopx(["--agent", "a1", "gate", "open", "One more for every phone?"]);
  const until = Date.now() + 20000;
  while (stats.states < PHONES && Date.now() < until) await new Promise((ok) => setTimeout(ok, 50));
  await new Promise((ok) => setTimeout(ok, 500));
  return { phones: PHONES, states_read_after_a_change: stats.states, idle_before: idle,
    connected: open, after_a_change: memory(pid) };
}

const web = run(["web", "--listen", "127.0.0.1:0", "--json"]);
try {
  const { url: base } = await web.next();
  const out = { page: await weight(base), start: memory(web.child.pid) };
  Object.assign(out, await browserRuns(base));
  out.memory = await phones(base, web.child.pid);
  console.log(JSON.stringify(out, null, 1));
} finally {
  web.child.kill("SIGTERM");
}
process.exit(0);
