// fakehub.mjs — a stand-in for the Hugging Face Hub that `petrel pull` is tested against
// (tests/test_pull.c). Plain Node (no npm packages). Written from the Hub's public API
// documentation: the file listing of a repository, GET /api/models/{repo}/tree/main?recursive=true
// (entries {type, oid, size, path, lfs: {oid: sha256, size, pointerSize}}, paginated by a
// `Link: <...>; rel="next"` header), and the file route GET /{repo}/resolve/main/{path}, which
// answers 302 to a signed URL on a second host (the CDN) with X-Linked-Size / X-Linked-Etag.
// The model search, GET /api/models?search=TEXT&filter=gguf&limit=N, lists repositories by id.
// Errors carry X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo) as the Hub's do.
//
// Usage: node fakehub.mjs ROOT
// Repositories are the folders ROOT/repos/OWNER/NAME (every file under one is served).
// ROOT/repos/OWNER/NAME.json, when present, makes that repository misbehave on purpose:
//   {"token": "T"}            gated: /api and /resolve need "Authorization: Bearer T"
//                             (none: 401 GatedRepo; another token: 403)
//   {"cut": N, "cuts": K}     the CDN closes the connection after N body bytes, the first K
//                             requests of each file (default K = 1)
//   {"badsum": ["PATH"]}      the listing gives PATH a wrong sha256
//   {"size": {"PATH": N}}     the listing says PATH has N bytes
//   {"rate": B}               the CDN sends B bytes a second (in 10 chunks a second)
//   {"norange": true}         the CDN ignores Range headers (200, the whole file)
//   {"errors": K}             the CDN answers 503 to the first K requests of each file
//   {"page": N}               the listing gives N entries a page
// The two ports go to stdout as one JSON line {"api": P, "cdn": P}; every request is appended to
// ROOT/log.txt as "HOST METHOD PATH range=RANGE auth=yes|no status=S".
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const root = process.argv[2];
if (!root) {
  console.error("usage: node fakehub.mjs ROOT");
  process.exit(2);
}
const repos = path.join(root, "repos");
const logFile = path.join(root, "log.txt");
const served = new Map(); // "repo/path" -> requests the CDN has seen (for "cuts")
let cdnPort = 0;

function log(host, req, status) {
  const line = `${host} ${req.method} ${decodeURI(req.url.split("?")[0])} range=${
    req.headers.range || "-"} auth=${req.headers.authorization ? "yes" : "no"} status=${status}\n`;
  fs.appendFileSync(logFile, line);
}

function safeRepo(owner, name) {
  const ok = (s) => /^[A-Za-z0-9._-]+$/.test(s) && s !== "." && s !== "..";
  return ok(owner) && ok(name);
}

function config(repo) {
  try {
    return JSON.parse(fs.readFileSync(path.join(repos, repo + ".json"), "utf8"));
  } catch {
    return {};
  }
}

function fail(host, req, res, status, code, message) {
  log(host, req, status);
  const h = { "Content-Type": "application/json" };
  if (code) h["X-Error-Code"] = code;
  res.writeHead(status, h);
  res.end(JSON.stringify({ error: message }));
}

// 0: allowed; otherwise the status the Hub gives (401 without a token, 403 with a wrong one).
function authStatus(cfg, req) {
  if (!cfg.token) return 0;
  const a = req.headers.authorization;
  if (!a) return 401;
  return a === `Bearer ${cfg.token}` ? 0 : 403;
}

function walk(dir, rel, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name < b.name ? -1 : 1)) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      out.push({ type: "directory", oid: createHash("sha1").update(r).digest("hex"), size: 0,
                 path: r });
      walk(path.join(dir, e.name), r, out);
    } else {
      const data = fs.readFileSync(path.join(dir, e.name));
      const blob = createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
      const entry = { type: "file", oid: blob, size: data.length, path: r };
      if (e.name.endsWith(".gguf")) {
        // an LFS file: the listing's size and oid are the pointer's, lfs has the real ones
        entry.oid = createHash("sha1").update(r + ":pointer").digest("hex");
        entry.size = 134;
        entry.lfs = { oid: createHash("sha256").update(data).digest("hex"), size: data.length,
                      pointerSize: 134 };
      }
      out.push(entry);
    }
  }
}

function listing(req, res, owner, name, url) {
  const repo = `${owner}/${name}`, dir = path.join(repos, owner, name);
  if (!safeRepo(owner, name) || !fs.existsSync(dir))
    return fail("api", req, res, 404, "RepoNotFound", "Repository not found");
  const cfg = config(repo), st = authStatus(cfg, req);
  if (st === 401)
    return fail("api", req, res, 401, "GatedRepo",
                `Access to model ${repo} is restricted. You must be authenticated to access it.`);
  if (st === 403)
    return fail("api", req, res, 403, "GatedRepo",
                `Access to model ${repo} is restricted and you are not in the authorized list.`);
  const entries = [];
  walk(dir, "", entries);
  for (const e of entries) {
    if (!e.lfs) continue;
    if ((cfg.badsum || []).includes(e.path)) e.lfs.oid = "0".repeat(64);
    if (cfg.size && cfg.size[e.path] !== undefined) e.lfs.size = cfg.size[e.path];
  }
  const page = cfg.page || 1000, start = Number(url.searchParams.get("cursor") || 0);
  const h = { "Content-Type": "application/json" };
  if (start + page < entries.length) {
    const next = new URL(url);
    next.searchParams.set("cursor", String(start + page));
    h.Link = `<http://${req.headers.host}${next.pathname}${next.search}>; rel="next"`;
  }
  log("api", req, 200);
  res.writeHead(200, h);
  res.end(JSON.stringify(entries.slice(start, start + page)));
}

function resolve(req, res, owner, name, file) {
  const repo = `${owner}/${name}`, dir = path.join(repos, owner, name);
  if (!safeRepo(owner, name) || !fs.existsSync(dir))
    return fail("api", req, res, 404, "RepoNotFound", "Repository not found");
  const st = authStatus(config(repo), req);
  if (st) return fail("api", req, res, st, "GatedRepo", `Access to model ${repo} is restricted.`);
  const full = path.join(dir, file);
  if (file.split("/").includes("..") || !fs.existsSync(full) || !fs.statSync(full).isFile())
    return fail("api", req, res, 404, "EntryNotFound", `${file} does not exist on "main"`);
  const data = fs.readFileSync(full);
  log("api", req, 302);
  res.writeHead(302, {
    Location: `http://127.0.0.1:${cdnPort}/repos/${repo}/${file}?X-Signature=fake`,
    "X-Linked-Size": String(data.length),
    "X-Linked-Etag": `"${createHash("sha256").update(data).digest("hex")}"`,
    "X-Repo-Commit": "0123456789abcdef0123456789abcdef01234567",
  });
  res.end();
}

const api = http.createServer((req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
  // /api/models?search=TEXT&filter=gguf&limit=N: the repositories whose id contains TEXT
  if (req.method === "GET" && url.pathname === "/api/models") {
    const q = (url.searchParams.get("search") || "").toLowerCase();
    const limit = Number(url.searchParams.get("limit") || 1000), found = [];
    for (const owner of fs.readdirSync(repos).sort())
      if (fs.statSync(path.join(repos, owner)).isDirectory())
        for (const name of fs.readdirSync(path.join(repos, owner)).sort()) {
          const id = `${owner}/${name}`;
          if (fs.statSync(path.join(repos, owner, name)).isDirectory() &&
              id.toLowerCase().includes(q) && found.length < limit)
            found.push({ _id: createHash("sha1").update(id).digest("hex").slice(0, 24), id,
                         modelId: id, tags: ["gguf"] });
        }
    log("api", req, 200);
    res.writeHead(200, { "Content-Type": "application/json" });
    return res.end(JSON.stringify(found));
  }
  // /api/models/OWNER/NAME/tree/main
  if (req.method === "GET" && parts[0] === "api" && parts[1] === "models" && parts.length === 6 &&
      parts[4] === "tree" && parts[5] === "main")
    return listing(req, res, parts[2], parts[3], url);
  // /OWNER/NAME/resolve/main/PATH...
  if ((req.method === "GET" || req.method === "HEAD") && parts.length >= 5 &&
      parts[2] === "resolve" && parts[3] === "main")
    return resolve(req, res, parts[0], parts[1], parts.slice(4).join("/"));
  fail("api", req, res, 404, null, "Not Found");
});

const cdn = http.createServer((req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
  if (parts[0] !== "repos" || parts.length < 4 || !safeRepo(parts[1], parts[2]) ||
      parts.includes("..") || url.searchParams.get("X-Signature") !== "fake")
    return fail("cdn", req, res, 403, null, "AccessDenied");
  // a signed URL carries its own authorisation: a second one is refused, as S3 does
  if (req.headers.authorization)
    return fail("cdn", req, res, 400, null, "Only one auth mechanism allowed");
  const repo = `${parts[1]}/${parts[2]}`, file = parts.slice(3).join("/");
  const full = path.join(repos, parts[1], parts[2], file);
  if (!fs.existsSync(full)) return fail("cdn", req, res, 404, null, "NoSuchKey");
  const cfg = config(repo), data = fs.readFileSync(full);
  let start = 0, end = data.length - 1, status = 200;
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || "");
  if (m && !cfg.norange) {
    start = Number(m[1]);
    if (m[2]) end = Math.min(Number(m[2]), end);
    if (start >= data.length) {
      log("cdn", req, 416);
      res.writeHead(416, { "Content-Range": `bytes */${data.length}` });
      return res.end();
    }
    status = 206;
  }
  const key = `${repo}/${file}`, seen = served.get(key) || 0;
  served.set(key, seen + 1);
  if (seen < (cfg.errors || 0)) return fail("cdn", req, res, 503, null, "SlowDown");
  const cutAt = cfg.cut !== undefined && seen < (cfg.cuts || 1) ? cfg.cut : -1;
  const body = data.subarray(start, end + 1);
  const h = { "Content-Length": String(body.length), "Accept-Ranges": "bytes",
              "Content-Type": "application/octet-stream" };
  if (status === 206) h["Content-Range"] = `bytes ${start}-${end}/${data.length}`;
  log("cdn", req, status);
  res.writeHead(status, h);
  if (req.method === "HEAD") return res.end();
  const limit = cutAt >= 0 ? Math.min(cutAt, body.length) : body.length;
  const chunk = cfg.rate ? Math.max(1, Math.floor(cfg.rate / 10)) : 1 << 20;
  let off = 0;
  const pump = () => {
    while (off < limit) {
      const n = Math.min(chunk, limit - off);
      const more = res.write(body.subarray(off, off + n));
      off += n;
      if (cfg.rate) return setTimeout(pump, 100);
      if (!more) return res.once("drain", pump);
    }
    if (limit < body.length) res.socket.destroy(); // the cut: a short body, then nothing
    else res.end();
  };
  pump();
});

api.listen(0, "127.0.0.1", () => {
  cdn.listen(0, "127.0.0.1", () => {
    cdnPort = cdn.address().port;
    process.stdout.write(JSON.stringify({ api: api.address().port, cdn: cdnPort }) + "\n");
  });
});
process.on("SIGTERM", () => process.exit(0));
