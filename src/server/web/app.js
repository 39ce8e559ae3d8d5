// app.js — petrel's web chat: talks to the server's OpenAI endpoints (/v1/models,
// /v1/chat/completions streamed, /health for the statistics line), keeps conversations in
// localStorage and an API key, when the server wants one, in sessionStorage (this tab only).
// Model output is untrusted: it is HTML-escaped before any markdown is applied, so no HTML
// from the model reaches the DOM (the server's Content-Security-Policy also forbids inline
// script).
"use strict";

const $ = (id) => document.getElementById(id);
const store = {
  load() {
    try { return JSON.parse(localStorage.getItem("petrel.chats") || "[]"); } catch { return []; }
  },
  save(chats) { localStorage.setItem("petrel.chats", JSON.stringify(chats.slice(-50))); },
};
let chats = store.load();
let chat = null;          // the conversation shown: {id, title, system, messages: [{role, content, reasoning}]}
let controller = null;    // the running request's AbortController
let nCtx = 0;

function key() { return sessionStorage.getItem("petrel.key") || ""; }
function headers() {
  const h = { "Content-Type": "application/json" };
  if (key()) h.Authorization = "Bearer " + key();
  return h;
}

// ---- rendering: escape first, then a small markdown subset on the escaped text ----
function esc(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function inline(s) { // s is already escaped
  return s
    .replace(/`([^`\n]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\n]+)\*/g, "$1<em>$2</em>")
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()<>]+)\)/g,
      '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
}
function blocks(text) {
  const out = [];
  for (const para of text.split(/\n{2,}/)) {
    const lines = para.split("\n").filter((l, i, a) => l.trim() || a.length === 1);
    if (!lines.length || !lines.join("").trim()) continue;
    const h = /^(#{1,6})\s+(.*)$/.exec(lines[0]);
    if (h && lines.length === 1) {
      const lv = Math.min(h[1].length + 2, 6);
      out.push(`<h${lv}>${inline(esc(h[2]))}</h${lv}>`);
    } else if (lines.every((l) => /^\s*[-*+]\s+/.test(l))) {
      out.push("<ul>" + lines.map((l) => "<li>" + inline(esc(l.replace(/^\s*[-*+]\s+/, ""))) + "</li>").join("") + "</ul>");
    } else if (lines.every((l) => /^\s*\d+[.)]\s+/.test(l))) {
      out.push("<ol>" + lines.map((l) => "<li>" + inline(esc(l.replace(/^\s*\d+[.)]\s+/, ""))) + "</li>").join("") + "</ol>");
    } else {
      out.push("<p>" + lines.map((l) => inline(esc(l))).join("<br>") + "</p>");
    }
  }
  return out.join("");
}
function markdown(src) {
  // fenced code blocks first (an unclosed fence while streaming is code to the end)
  return src.split("```").map((part, i) => {
    if (i % 2 === 0) return blocks(part);
    const nl = part.indexOf("\n");
    const lang = nl >= 0 ? part.slice(0, nl).trim() : "";
    const code = nl >= 0 ? part.slice(nl + 1) : part;
    const cls = /^[\w+#-]{1,20}$/.test(lang) ? ` class="lang-${lang}"` : "";
    return `<pre><code${cls}>${esc(code)}</code></pre>`;
  }).join("");
}

function copyText(text, button) {
  const done = () => { button.textContent = "Copied"; setTimeout(() => (button.textContent = "Copy"), 1200); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, () => {});
  else {
    const t = document.createElement("textarea");
    t.value = text;
    document.body.appendChild(t);
    t.select();
    try { document.execCommand("copy"); done(); } catch { /* nothing to do */ }
    t.remove();
  }
}

// One message element; returns an updater for streamed text.
function addMessage(m) {
  const div = document.createElement("div");
  div.className = "msg " + m.role;
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = m.role === "user" ? "You" : m.role === "error" ? "Error" : "Assistant";
  div.appendChild(who);
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = "Reasoning";
  const reasoning = document.createElement("div");
  reasoning.className = "reasoning";
  details.append(summary, reasoning);
  details.hidden = true;
  div.appendChild(details);
  const body = document.createElement("div");
  body.className = "body";
  div.appendChild(body);
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy";
  copy.textContent = "Copy";
  copy.addEventListener("click", () => copyText(m.content || "", copy));
  div.appendChild(copy);
  $("log").appendChild(div);
  const update = () => {
    if (m.role === "user" || m.role === "error") body.textContent = m.content;
    else body.innerHTML = markdown(m.content || "");
    reasoning.textContent = m.reasoning || "";
    details.hidden = !m.reasoning;
    $("log").scrollTop = $("log").scrollHeight;
  };
  update();
  return { div, update };
}

function showChat() {
  $("log").replaceChildren();
  for (const m of chat.messages) addMessage(m).div.dataset.done = "1";
  $("system").value = chat.system || "";
  const sel = $("history");
  sel.replaceChildren();
  for (const c of chats.slice().reverse()) {
    const o = document.createElement("option");
    o.value = c.id;
    o.textContent = c.title || "(new chat)";
    o.selected = c.id === chat.id;
    sel.appendChild(o);
  }
}

function newChat() {
  chat = { id: String(Date.now()), title: "", system: $("system").value, messages: [] };
  chats.push(chat);
  store.save(chats);
  showChat();
  $("stats").textContent = "";
}

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: headers() });
  if (r.status === 401) {
    $("key").hidden = false;
    $("key-input").focus();
    throw new Error("this server needs an API key");
  }
  return r;
}

async function loadModel() {
  try {
    const r = await api("/v1/models");
    const j = await r.json();
    const m = j.data && j.data[0];
    $("model").textContent = m ? m.id : "";
    nCtx = (m && m.meta && m.meta.n_ctx) || 0;
    $("key").hidden = true;
  } catch (e) {
    $("model").textContent = "(" + e.message + ")";
  }
}

// The line under the conversation: decode speed and prefill as the server measured them (the
// browser's own clock when the server's figures are missing), expert cache, context used.
async function showStats(usage, t0, tFirst, tEnd) {
  const parts = [];
  const gen = usage ? usage.completion_tokens : 0;
  try {
    const h = await (await fetch("/health")).json();
    const l = h.last || {};
    const tps = l.decode_tok_s > 0 ? l.decode_tok_s
              : gen > 1 && tEnd > tFirst ? (gen - 1) / ((tEnd - tFirst) / 1000) : 0;
    if (tps > 0) parts.push(tps.toFixed(1) + " tok/s");
    if (l.prefill_s > 0) parts.push("prefill " + l.prefill_s.toFixed(2) + " s");
    else if (tFirst > t0) parts.push("first token " + ((tFirst - t0) / 1000).toFixed(2) + " s");
    if (l.expert_requests > 0)
      parts.push("experts " + (100 * l.expert_hits / l.expert_requests).toFixed(0) + "% hit, " +
                 (l.bytes_read / 1e9).toFixed(3) + " GB read");
  } catch { /* statistics are best effort */ }
  if (usage && nCtx) parts.push("context " + (usage.prompt_tokens + usage.completion_tokens) + " / " + nCtx);
  $("stats").textContent = parts.join(" · ");
}

async function send(text) {
  if (!chat) newChat();
  chat.system = $("system").value;
  if (!chat.title) chat.title = text.slice(0, 60);
  chat.messages.push({ role: "user", content: text });
  addMessage(chat.messages[chat.messages.length - 1]).div.dataset.done = "1";
  const answer = { role: "assistant", content: "", reasoning: "" };
  chat.messages.push(answer);
  const view = addMessage(answer);
  const messages = [];
  if (chat.system.trim()) messages.push({ role: "system", content: chat.system });
  for (const m of chat.messages.slice(0, -1)) if (m.role === "user" || m.role === "assistant")
    messages.push({ role: m.role, content: m.content });
  const body = {
    model: $("model").textContent || "petrel",
    messages, stream: true, stream_options: { include_usage: true },
    temperature: Number($("temperature").value), top_p: Number($("top_p").value),
    max_tokens: Number($("max_tokens").value) || undefined,
    chat_template_kwargs: { enable_thinking: $("think").checked },
  };
  controller = new AbortController();
  $("send").textContent = "Stop";
  $("send").classList.add("stop");
  const t0 = performance.now();
  let tFirst = 0, usage = null, pending = false;
  const redraw = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; view.update(); }); } };
  try {
    const r = await api("/v1/chat/completions", { method: "POST", body: JSON.stringify(body), signal: controller.signal });
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { msg = (await r.json()).error.message; } catch { /* keep the status */ }
      throw new Error(msg);
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, at);
        buf = buf.slice(at + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
          const j = JSON.parse(line.slice(6));
          if (j.error) throw new Error(j.error.message);
          if (j.usage) usage = j.usage;
          const d = j.choices && j.choices[0] && j.choices[0].delta;
          if (!d) continue;
          if (!tFirst && (d.content || d.reasoning_content)) tFirst = performance.now();
          if (d.reasoning_content) answer.reasoning += d.reasoning_content;
          if (d.content) answer.content += d.content;
          redraw();
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") answer.content += "\n\n*(stopped)*";
    else {
      chat.messages.push({ role: "error", content: e.message });
      addMessage(chat.messages[chat.messages.length - 1]).div.dataset.done = "1";
    }
  }
  const tEnd = performance.now();
  controller = null;
  view.update();
  view.div.dataset.done = "1";
  $("send").textContent = "Send";
  $("send").classList.remove("stop");
  store.save(chats);
  await showStats(usage, t0, tFirst, tEnd);
}

$("ask").addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (controller) { controller.abort(); return; }
  const text = $("input").value.trim();
  if (!text) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("ask").requestSubmit(); }
});
$("new").addEventListener("click", () => { if (!controller) newChat(); });
$("settings-toggle").addEventListener("click", () => {
  const s = $("settings");
  s.hidden = !s.hidden;
  $("settings-toggle").setAttribute("aria-expanded", String(!s.hidden));
});
$("history").addEventListener("change", () => {
  const c = chats.find((x) => x.id === $("history").value);
  if (c && !controller) { chat = c; showChat(); }
});
$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("petrel.key", $("key-input").value);
  $("key-input").value = "";
  loadModel();
});

chat = chats.length ? chats[chats.length - 1] : null;
if (chat) showChat(); else newChat();
loadModel();
