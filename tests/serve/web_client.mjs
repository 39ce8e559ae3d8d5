// web_client.mjs — drives petrel's web chat (served at / by `petrel serve`) in headless
// Chromium through puppeteer-core: a two-turn conversation, the stop button, the statistics
// line, conversations kept across a reload, model output that tries to inject HTML, and (with
// a second server that has --api-key) the key prompt. Saves screenshots into OUT_DIR.
// Usage: [NO_EOG=id,id] node web_client.mjs BASE_URL OUT_DIR [KEYED_BASE_URL KEY]
// Prints one line per check; exits 1 on the first failure. Run by tests/test_serve.c.
import puppeteer from "puppeteer-core";
import fs from "node:fs";

const [base, outDir, keyedBase, key] = process.argv.slice(2);
if (!base || !outDir) {
  console.error("usage: node web_client.mjs BASE_URL OUT_DIR [KEYED_BASE_URL KEY]");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
let n = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
  n++;
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const page = await browser.newPage();
await page.setViewport({ width: 1000, height: 760 });
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

const done = () => page.$$eval(".msg.assistant[data-done]", (a) => a.length);
async function ask(text, wantDone) {
  await page.type("#input", text);
  await page.keyboard.press("Enter");
  await page.waitForFunction((k) => document.querySelectorAll(".msg.assistant[data-done]").length >= k,
                             { timeout: 120000 }, wantDone);
}

await page.goto(base + "/", { waitUntil: "load" });
await page.waitForFunction(() => document.getElementById("model").textContent !== "…", { timeout: 20000 });
check((await page.$eval("#model", (e) => e.textContent)).length > 0, "the page names the model");
await page.evaluate(() => { document.getElementById("max_tokens").value = "24"; });

// two turns
await ask("In the beginning God created", 1);
const a1 = await page.$$eval(".msg.assistant .body", (a) => a.map((x) => x.textContent));
check(a1.length === 1 && a1[0].trim().length > 0, `turn 1 answered (${JSON.stringify(a1[0].slice(0, 60))})`);
await page.waitForFunction(() => document.getElementById("stats").textContent.includes("tok/s"), { timeout: 10000 });
const stats = await page.$eval("#stats", (e) => e.textContent);
check(/tok\/s/.test(stats) && /context \d+ \/ \d+/.test(stats) && /experts \d+% hit/.test(stats),
      `the statistics line (${stats})`);
await page.screenshot({ path: `${outDir}/turn1.png` });
await ask("And the earth was without form", 2);
const a2 = await page.$$eval(".msg.assistant .body", (a) => a.map((x) => x.textContent));
check(a2.length === 2 && a2[1].trim().length > 0, "turn 2 answered");
check((await page.$$eval(".msg.user", (a) => a.length)) === 2, "both questions shown");
await page.screenshot({ path: `${outDir}/turn2.png` });

// the conversation survives a reload (localStorage)
await page.reload({ waitUntil: "load" });
await page.waitForFunction(() => document.querySelectorAll(".msg").length >= 4, { timeout: 10000 });
check((await page.$$eval(".msg", (a) => a.length)) === 4, "the conversation is kept across a reload");

// stop: a long answer (the model's end-of-turn tokens banned, ids in NO_EOG, so it cannot end
// on its own before the click), stopped once it streams
const noEog = (process.env.NO_EOG || "").split(",").filter(Boolean);
if (noEog.length) {
  await page.setRequestInterception(true);
  const ban = (req) => {
    if (!req.url().endsWith("/v1/chat/completions") || req.method() !== "POST") return req.continue();
    const body = JSON.parse(req.postData());
    body.logit_bias = Object.fromEntries(noEog.map((id) => [id, -100]));
    req.continue({ postData: JSON.stringify(body) });
  };
  page.on("request", ban);
  page.once("close", () => page.off("request", ban));
  globalThis.__ban = ban;
}
await page.evaluate(() => { document.getElementById("max_tokens").value = "4000"; });
await page.type("#input", "Tell me everything");
await page.keyboard.press("Enter");
await page.waitForFunction(() => {
  const a = document.querySelectorAll(".msg.assistant .body");
  return a.length === 3 && a[2].textContent.length > 20;
}, { timeout: 60000 });
check((await page.$eval("#send", (e) => e.textContent)) === "Stop", "Send becomes Stop while generating");
await page.click("#send");
await page.waitForFunction(() => document.querySelectorAll(".msg.assistant[data-done]").length === 3, { timeout: 20000 });
const a3 = await page.$$eval(".msg.assistant .body", (a) => a[2].textContent);
check(/\(stopped\)/.test(a3), "stop ends the answer");
let fin = "";
for (let i = 0; i < 50 && fin !== "cancelled"; i++) {
  fin = (await (await fetch(base + "/health")).json()).last.finish_reason;
  if (fin !== "cancelled") await new Promise((r) => setTimeout(r, 100));
}
check(fin === "cancelled", `the server stopped generating (${fin})`);
await page.screenshot({ path: `${outDir}/stopped.png` });
if (globalThis.__ban) {
  page.off("request", globalThis.__ban);
  await page.setRequestInterception(false);
}

// model output is untrusted: a reply with HTML is shown as text, nothing runs
await page.setRequestInterception(true);
const evil = "Look: <img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script> **bold** and\n\n```html\n<b>code</b>\n```";
page.on("request", (req) => {
  if (!req.url().endsWith("/v1/chat/completions")) return req.continue();
  const chunk = (delta) => `data: ${JSON.stringify({ choices: [{ index: 0, delta }] })}\n\n`;
  req.respond({
    status: 200, contentType: "text/event-stream",
    body: chunk({ reasoning_content: "<script>window.__xss=3</script>" }) + chunk({ content: evil }) +
          `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } })}\n\ndata: [DONE]\n\n`,
  });
});
await page.evaluate(() => { document.getElementById("new").click(); });
await ask("show me html", 1);
const shown = await page.$eval(".msg.assistant .body", (e) => e.textContent);
check(shown.includes("<img src=x onerror=") && shown.includes("<script>"), "the HTML is shown as text");
check(await page.evaluate(() => window.__xss === undefined), "no injected script or handler ran");
check((await page.$$eval(".msg img, .msg script", (a) => a.length)) === 0, "no element from the model's text");
check((await page.$$eval(".msg strong, .msg pre code", (a) => a.length)) === 2, "markdown still renders");
await page.screenshot({ path: `${outDir}/escaped.png` });
await page.setRequestInterception(false);
check(errors.length === 0, `no page errors (${errors.join("; ")})`);

// a server with --api-key: the page asks for the key and keeps it for this tab only
if (keyedBase) {
  const p2 = await browser.newPage();
  await p2.goto(keyedBase + "/", { waitUntil: "load" });
  await p2.waitForFunction(() => !document.getElementById("key").hidden, { timeout: 10000 });
  await p2.screenshot({ path: `${outDir}/key.png` });
  await p2.type("#key-input", key);
  await p2.click("#key-form button");
  await p2.waitForFunction(() => document.getElementById("key").hidden, { timeout: 10000 });
  await p2.evaluate(() => { document.getElementById("max_tokens").value = "8"; });
  await p2.type("#input", "Hello");
  await p2.keyboard.press("Enter");
  await p2.waitForFunction(() => document.querySelectorAll(".msg.assistant[data-done]").length >= 1, { timeout: 60000 });
  check((await p2.$$eval(".msg.error", (a) => a.length)) === 0, "with the key the answer comes");
  const kept = await p2.evaluate(() => [sessionStorage.getItem("petrel.key"), JSON.stringify(localStorage)]);
  check(kept[0] === key && !kept[1].includes(key), "the key is in sessionStorage only");
}
await browser.close();
console.log(`${n} checks passed`);
