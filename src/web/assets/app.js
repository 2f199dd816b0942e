// loopx web: the owner's page. It pairs this browser as a device (an Ed25519 key that never
// leaves it), signs in with that key, shows the projects and signs each decision.
// Every text from the server goes into the page through textContent, never as HTML.
"use strict";

const enc = new TextEncoder();
const $ = (id) => document.getElementById(id);

// ---- bytes, as src/kernel/device.rs builds them ----

// Each field: its UTF-8 length as 4 bytes big endian, then its bytes.
function fields(list) {
  const parts = list.map((f) => enc.encode(String(f)));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, p.length, false);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256hex(bytes) {
  return hex(await crypto.subtle.digest("SHA-256", bytes));
}

// kernel::gate_action::GateAction::digest: each argument and a NUL, or the payload's text.
async function actionDigest(a) {
  const enc = new TextEncoder();
  if (a.kind !== "cmd") return sha256hex(enc.encode(a.text || ""));
  const parts = a.argv.map((x) => enc.encode(x));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length + 1, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length + 1;
  }
  return sha256hex(out);
}

// kernel::device::gate_digest, from the fields the page shows.
async function gateDigest(g) {
  const f = ["loopx-gate-digest-v1", g.id, g.question, String(g.options.length)];
  f.push(...g.options, String(g.blocks.length), ...g.blocks, g.global ? "1" : "0");
  f.push(g.action ? g.action.kind : "", g.action ? g.action.sha256 : "");
  return sha256hex(fields(f));
}

// kernel::device::Decided::message.
function decidedMessage(d) {
  return fields(["loopx-device-decision-v1", d.goal, d.gate, d.digest, d.status, d.option, d.reason,
    String(d.decided_at), d.device]);
}

// kernel::device::session_message.
function sessionMessage(challenge, origin, device) {
  return fields(["loopx-web-session-v1", challenge, origin, device]);
}

// ---- the key, kept in IndexedDB (not extractable) ----

function idb() {
  return new Promise((ok, fail) => {
    const r = indexedDB.open("loopx", 1);
    r.onupgradeneeded = () => r.result.createObjectStore("keys");
    r.onsuccess = () => ok(r.result);
    r.onerror = () => fail(r.error);
  });
}

async function idbDo(mode, f) {
  const db = await idb();
  return new Promise((ok, fail) => {
    const t = db.transaction("keys", mode);
    const r = f(t.objectStore("keys"));
    t.oncomplete = () => ok(r.result);
    t.onerror = () => fail(t.error);
  });
}

const loadDevice = () => idbDo("readonly", (s) => s.get("device"));
const saveDevice = (d) => idbDo("readwrite", (s) => s.put(d, "device"));

async function sign(keys, bytes) {
  return hex(await crypto.subtle.sign({ name: "Ed25519" }, keys.privateKey, bytes));
}

// ---- talking to the server ----

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  };
  init.credentials = "same-origin";
  const r = await fetch(path, init);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error(data.error || r.statusText);
    e.status = r.status;
    e.hint = data.hint || "";
    throw e;
  }
  return data;
}

function say(text, error) {
  const m = $("message");
  m.textContent = text;
  m.className = error ? "error" : "";
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// ---- pairing ----

async function fingerprint(raw) {
  return "SHA256:" + (await sha256hex(raw)).slice(0, 16);
}

async function keyStillEnrolled() {
  const old = await loadDevice();
  if (!old) return null;
  device = old;
  try {
    await signIn();
    return old.keys;
  } catch (e) {
    return null;
  }
}

async function pair(token) {
  $("pairing").hidden = false;
  // One key per browser: paired again (another project of `loopx web --all`), it offers the
  // same key while that key still signs in somewhere; a revoked one is never enrolled again.
  const keys = (await keyStillEnrolled()) ||
    await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
  const raw = await crypto.subtle.exportKey("raw", keys.publicKey);
  $("fingerprint").textContent = await fingerprint(raw);
  const label = (navigator.platform || "browser").slice(0, 64);
  await api("/api/pair", { token, key: hex(raw), label });
  $("pair-state").textContent = "Waiting for the terminal's confirmation...";
  for (;;) {
    await new Promise((ok) => setTimeout(ok, 1000));
    const s = await api("/api/pair/status?t=" + encodeURIComponent(token));
    if (s.state === "enrolled" && s.device) {
      await saveDevice({ name: s.device, keys });
      history.replaceState(null, "", "/");
      $("pairing").hidden = true;
      say("Paired as " + s.device + ".");
      return start();
    }
    if (s.state === "declined") {
      $("pair-state").textContent = "Declined or expired: run `loopx web pair` again.";
      return;
    }
  }
}

// ---- signing in, showing, deciding ----

let device = null;
let events = null;

async function signIn() {
  const { challenge } = await api("/api/challenge");
  const signature = await sign(device.keys, sessionMessage(challenge, location.origin, device.name));
  await api("/api/session", { device: device.name, challenge, signature });
}

async function start() {
  device = await loadDevice();
  if (!device) {
    say("This browser is not paired: run `loopx web pair` in the terminal and open its URL here.");
    return;
  }
  $("who").textContent = device.name;
  await signIn();
  await refresh();
  follow();
}

function follow() {
  if (events) events.close();
  events = new EventSource("/api/events");
  events.addEventListener("ready", () => { $("live").textContent = "live"; refresh(); });
  events.addEventListener("change", () => refresh());
  events.onerror = () => {
    $("live").textContent = "reconnecting";
    // A refused stream (the server restarted and forgot the session, or is full) is not
    // retried by the browser: sign in again and follow anew.
    if (events.readyState === EventSource.CLOSED) {
      setTimeout(() => signIn().then(follow).catch((e) => {
        say(e.message, true);
        setTimeout(follow, 5000);
      }), 2000);
    }
  };
}

let busy = false;
let again = false;

async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  try {
    let s;
    try {
      s = await api("/api/state");
    } catch (e) {
      if (e.status !== 401) throw e;
      await signIn();
      s = await api("/api/state");
    }
    render(s);
  } catch (e) {
    say(e.message + (e.hint ? " (" + e.hint + ")" : ""), true);
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}

function render(s) {
  const kept = {};
  for (const i of document.querySelectorAll("[data-gate] input.reason")) {
    kept[i.closest("[data-gate]").dataset.gate] = i.value;
  }
  const active = document.activeElement;
  const typing = active && active.matches("input.reason") ? active.closest("[data-gate]").dataset.gate : null;
  const root = $("projects");
  root.replaceChildren(...s.projects.map((p) => project(p, kept)));
  if (typing) {
    for (const g of document.querySelectorAll("[data-gate]")) {
      if (g.dataset.gate === typing) g.querySelector("input.reason").focus();
    }
  }
  wanted();
}

// A link to one gate (`/#gate=ID`, as a push notification sends): it is marked, and scrolled
// to once.
let scrolledTo = null;
function wanted() {
  const id = new URLSearchParams(location.hash.slice(1)).get("gate");
  const card = id && document.querySelector(`[data-gate="${CSS.escape(id)}"]`);
  if (!card) return;
  card.classList.add("wanted");
  if (scrolledTo !== id) card.scrollIntoView({ block: "center" });
  scrolledTo = id;
}
window.onhashchange = wanted;

function project(p, kept) {
  const sec = el("section");
  sec.dataset.project = p.name;
  sec.append(el("h2", p.name), el("p", p.objective, "dim"));
  if (p.headline) sec.append(headline(p.headline));
  sec.append(el("h3", "Gates (" + p.gates.length + ")"));
  if (p.gates.length === 0) sec.append(el("p", "Nothing to decide.", "dim"));
  for (const g of p.gates) sec.append(gate(p.name, g, kept[g.id] || ""));
  sec.append(el("h3", "Claimed"));
  for (const t of p.claimed) {
    sec.append(el("div", t.id + " " + t.title + " — " + t.holder + ", lease until " + t.expires_at, "row"));
  }
  if (p.claimed.length === 0) sec.append(el("p", "No todo is claimed.", "dim"));
  const q = p.quota;
  sec.append(el("h3", "Quota"), el("p", q.used + " of " + q.limit + " slots used, " + q.left + " left, window " + q.window));
  sec.append(el("h3", "Activity"));
  for (const a of p.activity) {
    sec.append(el("div", a.at + "  " + a.actor + "  " + a.action + "  " + a.target, "row dim"));
  }
  return sec;
}

function headline(h) {
  const bars = "▁▂▃▄▅▆▇█";
  const lo = Math.min(...h.values), hi = Math.max(...h.values);
  const spark = h.values.map((v) => bars[hi > lo ? Math.round(((v - lo) / (hi - lo)) * 7) : 3]).join("");
  const p = el("p");
  p.append(el("strong", h.name + " "), el("span", spark, "spark"),
    el("span", "  last " + h.last + ", best " + h.best, "dim"));
  return p;
}

function gate(projectName, g, reasonText) {
  const card = el("div", null, "gate");
  card.dataset.gate = g.id;
  const shown = g.shown || { question: g.question, options: g.options };
  card.append(el("div", shown.question, "question"));
  card.append(el("div", g.id + " · asked by " + g.opened_by + " · " + g.opened_at + (g.global ? " · blocks every agent" : ""), "dim"));
  if (g.blocked.length) {
    const ul = el("ul");
    for (const b of g.blocked) {
      const li = el("li", b.id + " " + (b.title || ""));
      for (const e of b.evidence) li.append(el("div", e.at + " " + e.agent + ": " + e.summary, "dim"));
      ul.append(li);
    }
    card.append(el("div", "Blocks:", "dim"), ul);
  }
  if (g.action) {
    card.append(el("div", "Approving runs this " + g.action.kind + " (sha256 " + g.action.sha256.slice(0, 12) + "):", "dim"), el("pre", g.action.shown));
    if (!g.action.intact) card.append(el("div", "The action no longer matches its sha256: it cannot be approved.", "error"));
  }
  const reason = el("input", null, "reason");
  reason.placeholder = "Reason (needed to reject)";
  reason.maxLength = 1000;
  reason.value = reasonText;
  const buttons = el("div", null, "buttons");
  const choices = g.options.length ? g.options : [null];
  for (const [i, o] of choices.entries()) {
    if (g.action && !g.action.intact) break;
    const b = el("button", o === null ? "Approve" : "Approve: " + shown.options[i]);
    b.dataset.action = "approve";
    if (o !== null) b.dataset.option = o;
    b.addEventListener("click", () => decide(projectName, g, "approved", o || "", reason, card));
    buttons.append(b);
  }
  const r = el("button", "Reject");
  r.dataset.action = "reject";
  r.addEventListener("click", () => decide(projectName, g, "rejected", "", reason, card));
  buttons.append(r);
  card.append(reason, buttons);
  return card;
}

async function decide(projectName, g, status, option, reasonInput, card) {
  const reason = reasonInput.value.trim();
  if (status === "rejected" && !reason) {
    say("A rejection needs a reason.", true);
    reasonInput.focus();
    return;
  }
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    // An approval is of the action as shown: its text must hash to the digest signed.
    if (status === "approved" && g.action && (await actionDigest(g.action)) !== g.action.sha256) {
      throw new Error("the action shown does not match its sha256: not approved");
    }
    const digest = await gateDigest(g);
    const d = { goal: g.goal, gate: g.id, digest, status, option, reason, decided_at: Date.now(), device: device.name };
    const signature = await sign(device.keys, decidedMessage(d));
    const path = "/api/gates/" + encodeURIComponent(projectName) + "/" + encodeURIComponent(g.id) + "/decide";
    await api(path, { device: d.device, status, option, reason, digest, decided_at: d.decided_at, signature });
    say(g.id + " " + status + ".");
  } catch (e) {
    say(e.message + (e.hint ? " (" + e.hint + ")" : ""), true);
  }
  refresh();
}

function main() {
  const token = new URLSearchParams(location.hash.slice(1)).get("t");
  if (!window.crypto || !crypto.subtle) {
    say("This page needs a secure context (HTTPS or localhost) to sign.", true);
    return;
  }
  const run = location.pathname === "/pair" && token ? pair(token) : start();
  run.catch((e) => say(e.message + (e.hint ? " (" + e.hint + ")" : ""), true));
}

main();
