// serve_load.mjs — the client side of bench/serve.sh (Node 20, no packages):
// times a running `petrel serve` from outside, with timestamps taken in-process
// (a shell loop that forks `date` per chunk measures the fork, not the server).
//
//   node bench/serve_load.mjs URL rps N          -> "rps SEQ PAR": tiny requests
//        (max_tokens 1) per second, N one after another, then N over 4 clients
//   node bench/serve_load.mjs URL stream PROMPT TOKENS
//        -> "stream TOKENS TOK_S": a greedy /v1/completions stream; TOK_S is
//        (tokens - 1) / (last text chunk - first text chunk), the same quantity
//        as `petrel generate --json`'s decode_tok_s ((tokens - 1) / decode
//        time). TOKENS comes from the stream's usage chunk, not from counting
//        chunks: a token that ends inside a UTF-8 sequence has its text sent
//        with the next one.
import http from "node:http";

const [url, mode, ...args] = process.argv.slice(2);
if (!url || !mode) {
    console.error("usage: serve_load.mjs URL rps N | URL stream PROMPT TOKENS");
    process.exit(2);
}

async function post(path, body) {
    const r = await fetch(url + path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}: ${await r.text()}`);
    return r;
}

async function tiny() {
    const r = await post("/v1/chat/completions", {
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1,
        temperature: 0,
    });
    await r.json();
}

async function rps(n) {
    let t0 = performance.now();
    for (let i = 0; i < n; i++) await tiny();
    const seq = n / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    const client = async (k) => {
        for (let i = 0; i < k; i++) await tiny();
    };
    await Promise.all([0, 1, 2, 3].map(() => client(Math.ceil(n / 4))));
    const par = (4 * Math.ceil(n / 4)) / ((performance.now() - t0) / 1000);
    console.log(`rps ${seq.toFixed(2)} ${par.toFixed(2)}`);
}

// The stream is read with node:http, whose per-chunk cost is a fraction of
// fetch's: on a 2-core machine the client's CPU time is taken from the engine.
function stream(prompt, maxTokens) {
    return new Promise((resolve, reject) => {
        const body = JSON.stringify({
            prompt,
            max_tokens: maxTokens,
            temperature: 0,
            stream: true,
            stream_options: { include_usage: true },
        });
        const u = new URL(url + "/v1/completions");
        const rq = http.request(
            { host: u.hostname, port: u.port, path: u.pathname, method: "POST",
              headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } },
            (res) => {
                if (res.statusCode !== 200) return reject(new Error(`/v1/completions: HTTP ${res.statusCode}`));
                res.setEncoding("utf8");
                let tokens = 0, first = 0, last = 0, buf = "";
                res.on("data", (part) => {
                    const now = performance.now();
                    buf += part;
                    let i;
                    while ((i = buf.indexOf("\n\n")) >= 0) {
                        const ev = buf.slice(0, i);
                        buf = buf.slice(i + 2);
                        if (!ev.startsWith("data: {")) continue;
                        const d = JSON.parse(ev.slice(6));
                        if (d.choices && d.choices.length && d.choices[0].text) {
                            if (!first) first = now;
                            last = now;
                        }
                        if (d.usage) tokens = d.usage.completion_tokens;
                    }
                });
                res.on("end", () => {
                    const tps = tokens > 1 && last > first ? (tokens - 1) / ((last - first) / 1000) : 0;
                    console.log(`stream ${tokens} ${tps.toFixed(3)}`);
                    resolve();
                });
                res.on("error", reject);
            });
        rq.on("error", reject);
        rq.end(body);
    });
}

try {
    if (mode === "rps") await rps(parseInt(args[0] || "40", 10));
    else if (mode === "stream") await stream(args[0], parseInt(args[1] || "64", 10));
    else throw new Error(`unknown mode ${mode}`);
} catch (e) {
    console.error(`serve_load.mjs: ${e.message}`);
    process.exit(1);
}
