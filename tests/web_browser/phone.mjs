// A phone-sized headless Chromium on loopx web's page, through playwright-core: what the browser
// test (driver.mjs) and the benchmark (benches/web.mjs) share.
// Needs LOOPX_CHROMIUM (the browser) and LOOPX_PLAYWRIGHT (a dir with node_modules/playwright-core).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/// The launch flags known to work on a machine without a display or outside network.
export const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
  "--no-first-run", "--disable-background-networking", "--disable-component-update",
  "--disable-sync"];

/// A fresh browser profile with one 390x844 page; `close()` ends it and removes the profile.
export async function launch() {
  const dir = process.env.LOOPX_PLAYWRIGHT;
  const exe = process.env.LOOPX_CHROMIUM;
  if (!dir || !exe) throw new Error("set LOOPX_CHROMIUM and LOOPX_PLAYWRIGHT");
  const url = pathToFileURL(join(dir, "node_modules", "playwright-core", "index.mjs"));
  const { chromium } = await import(url.href);
  const profile = mkdtempSync(join(tmpdir(), "loopx-phone-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: exe, headless: true, args: ARGS,
    viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const close = async () => {
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { ctx, page, errors, close };
}

/// Opens the pairing URL; resolves to the fingerprint the page shows.
export async function openPairing(page, url) {
  await page.goto(url);
  const fp = page.locator("#fingerprint");
  await fp.filter({ hasText: /SHA256:/ }).waitFor({ timeout: 30000 });
  // The key went to the server once the page waits for the terminal.
  await page.locator("#pair-state").filter({ hasText: /./ }).waitFor({ timeout: 30000 });
  return (await fp.textContent()).trim();
}

/// Waits until the page is signed in and follows the server's events; the device's name.
/// From then on, each gate element's first appearance is timed in the page (`__seen`).
export async function loggedIn(page, timeout = 30000) {
  await page.locator("#live").filter({ hasText: /^live$/ }).waitFor({ timeout });
  await page.evaluate(() => {
    window.__seen = window.__seen || {};
    const mark = () => {
      for (const e of document.querySelectorAll("[data-gate]")) {
        if (!(e.dataset.gate in window.__seen)) window.__seen[e.dataset.gate] = Date.now();
      }
    };
    mark();
    new MutationObserver(mark).observe(document.body, { childList: true, subtree: true });
  });
  return (await page.locator("#who").textContent()).trim();
}

/// Waits for gate `id` on the page (no reload); the time (ms since the epoch) it first showed.
export async function seen(page, id, timeout = 30000) {
  await page.locator(`[data-gate="${id}"]`).waitFor({ timeout });
  return page.evaluate((g) => window.__seen[g], id);
}

/// Clicks a decision's button of gate `id` (`option` picks an approve button, `reason` is typed
/// first) and waits until the gate is gone. Timed in the page: `ms` from the click to the end of
/// the server's answer (signing included), `server_ms` the request alone.
export async function decide(page, id, action, { option, reason } = {}) {
  const card = page.locator(`[data-gate="${id}"]`);
  if (reason !== undefined) await card.locator("input.reason").fill(reason);
  let sel = `button[data-action="${action}"]`;
  if (option !== undefined) sel += `[data-option="${option}"]`;
  await page.evaluate(() => {
    window.__click = null;
    addEventListener("click", () => { window.__click = performance.now(); },
      { capture: true, once: true });
  });
  const answer = page.waitForResponse((r) => r.url().includes(`/${id}/decide`), { timeout: 30000 });
  await card.locator(sel).click();
  const r = await answer;
  if (!r.ok()) throw new Error(`the decision of ${id} was refused: ${r.status()} ${await r.text()}`);
  await card.waitFor({ state: "detached", timeout: 30000 });
  const t = await page.evaluate((g) => {
    const e = performance.getEntriesByType("resource").filter((x) => x.name.includes(`/${g}/decide`)).pop();
    return { ms: e.responseEnd - window.__click, server_ms: e.responseEnd - e.startTime };
  }, id);
  return { status: r.status(), ...t };
}
