// The phone of tests/web_browser.rs: reads one JSON command a line on stdin, acts on the page,
// answers one JSON line on stdout ({"ok":true,...} or {"ok":false,"error":...}).
//   {"do":"pair","url":U}                 -> {"fingerprint":F}
//   {"do":"logged_in"}                    -> {"device":NAME}
//   {"do":"see","gate":ID}                -> {"at_ms":T}  (when it first showed, page clock)
//   {"do":"decide","gate":ID,"action":A,"option":O?,"reason":R?} -> {"ms":..,"server_ms":..}
//   {"do":"goto","url":U}                 -> {}  (a load of the page, as a link opens it)
//   {"do":"attr","selector":S,"name":N}   -> {"value":...}
//   {"do":"text","selector":S}            -> {"text":...}
//   {"do":"shot","path":P}                -> {}
//   {"do":"close"}                        -> {} and exits
import { createInterface } from "node:readline";
import { launch, openPairing, loggedIn, seen, decide } from "./phone.mjs";

const phone = await launch();
const { page } = phone;

const acts = {
  pair: async (c) => ({ fingerprint: await openPairing(page, c.url) }),
  logged_in: async () => ({ device: await loggedIn(page) }),
  see: async (c) => ({ at_ms: await seen(page, c.gate) }),
  decide: async (c) => decide(page, c.gate, c.action, { option: c.option, reason: c.reason }),
  goto: async (c) => { await page.goto("about:blank"); await page.goto(c.url); return {}; },
  attr: async (c) => ({ value: await page.locator(c.selector).first().getAttribute(c.name) }),
  text: async (c) => ({ text: await page.locator(c.selector).first().textContent() }),
  shot: async (c) => { await page.screenshot({ path: c.path }); return {}; },
  close: async () => { await phone.close(); return {}; },
};

const answer = (v) => process.stdout.write(JSON.stringify(v) + "\n");
answer({ ok: true, ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  let c;
  try {
    c = JSON.parse(line);
    const act = acts[c.do];
    if (!act) throw new Error(`no such command: ${c.do}`);
    answer({ ok: true, ...(await act(c)), page_errors: phone.errors.splice(0) });
  } catch (e) {
    answer({ ok: false, error: String(e && e.message || e), page_errors: phone.errors.splice(0) });
  }
  if (c && c.do === "close") process.exit(0);
}
await phone.close();
