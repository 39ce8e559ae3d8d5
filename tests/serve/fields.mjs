// fields.mjs — prints, as JSON, the top-level request fields of Chat Completions,
// Completions and Responses as the installed `openai` package's type definitions
// list them ({"chat": [...], "completions": [...], "responses": [...]}).
// Run by tests/test_serve.c (test_serve_request_fields), which checks each field
// against the README's request-field table and a live server.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules/openai/resources');

// The property names declared at the top level of `export interface NAME {...}`.
function fields(file, iface) {
  const src = fs.readFileSync(path.join(root, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
  const at = src.indexOf(`export interface ${iface} {`);
  if (at < 0) throw new Error(`${iface} is not in ${file}`);
  let depth = 1, top = '';
  for (let i = src.indexOf('{', at) + 1; i < src.length && depth > 0; i++) {
    const c = src[i];
    if ('{(['.includes(c)) depth++;
    else if ('})]'.includes(c)) depth--;
    top += depth === 1 ? c : c === '\n' ? '\n' : ' ';
  }
  const names = [...top.matchAll(/^\s*(?:readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)\??\s*:/gm)].map((m) => m[1]);
  if (names.length < 5) throw new Error(`${iface}: only ${names.length} fields found`);
  return names;
}

const version = JSON.parse(fs.readFileSync(path.join(root, '../package.json'), 'utf8')).version;
console.log(JSON.stringify({
  version,
  chat: fields('chat/completions/completions.d.ts', 'ChatCompletionCreateParamsBase'),
  completions: fields('completions.d.ts', 'CompletionCreateParamsBase'),
  responses: fields('responses/responses.d.ts', 'ResponseCreateParamsBase'),
}));
