// openai_client.mjs — drives a running `petrel serve` with the official `openai` npm client,
// the way apps and agents do: models, chat (plain, streamed with usage, a tool-call round trip),
// completions, the Responses API stream, and errors surfacing as the SDK's typed exceptions.
// Usage: node openai_client.mjs BASE_URL   (e.g. http://127.0.0.1:8080/v1)
// Prints one line per check; exits 1 on the first failure. Run by tests/test_serve.c.
import OpenAI from "openai";

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node openai_client.mjs BASE_URL");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: "not-needed", timeout: 30000, maxRetries: 0 });

let n = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  n++;
}

const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Tell me about SSDs" },
];

// models
const models = await client.models.list();
check(models.data.length === 1 && typeof models.data[0].id === "string", "models.list");

// non-streaming chat
const c1 = await client.chat.completions.create({ model: "any", messages, max_tokens: 8, temperature: 0 });
check(c1.object === "chat.completion", "chat object");
check(typeof c1.choices[0].message.content === "string", "chat content");
check(c1.usage.prompt_tokens > 5 && c1.usage.completion_tokens > 0, "chat usage");

// streamed chat with usage: same text as the non-streamed one (greedy), KV prefix reused
const stream = await client.chat.completions.create({
  model: "any", messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = "", usage = null, finish = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  const ch = chunk.choices[0];
  if (ch?.delta?.content) text += ch.delta.content;
  if (ch?.finish_reason) finish = ch.finish_reason;
}
check(text === c1.choices[0].message.content, `streamed text equals the non-streamed one ('${text}')`);
check(chunks >= 3 && finish !== null, "stream chunks and finish_reason");
check(usage && usage.prompt_tokens_details.cached_tokens === usage.prompt_tokens - 1, "cached_tokens on a repeated prompt");

// a tool-call round trip: the assistant's call and the tool's result go back in
const tools = [{
  type: "function",
  function: { name: "get_weather", description: "Weather of a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}];
const c2 = await client.chat.completions.create({
  model: "any", tools, tool_choice: "auto", max_tokens: 6, temperature: 0,
  messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: "18 C, sunny" },
  ],
});
check(["stop", "length", "tool_calls"].includes(c2.choices[0].finish_reason), "tool round trip");
if (c2.choices[0].message.tool_calls)
  for (const tc of c2.choices[0].message.tool_calls) JSON.parse(tc.function.arguments);

// completions
const c3 = await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 4 });
check(typeof c3.choices[0].text === "string" && c3.usage.completion_tokens === 4, "completions");

// Responses API stream, as Codex reads it
const rs = await client.responses.create({
  model: "any", instructions: "You are a coding agent.", input: "List the files", max_output_tokens: 8,
  temperature: 0, stream: true,
  tools: [{ type: "function", name: "shell", description: "run", parameters: { type: "object", properties: {} } }],
});
const types = [];
let deltaText = "", final = null;
for await (const ev of rs) {
  types.push(ev.type);
  if (ev.type === "response.output_text.delta") deltaText += ev.delta;
  if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
}
check(types[0] === "response.created" && types[1] === "response.in_progress", `responses start (${types.slice(0, 2)})`);
check(types.includes("response.output_item.added") && types.includes("response.output_item.done"), "responses items");
check(final && final.id.startsWith("resp_") && final.usage.output_tokens > 0, "responses final event");
const msg = final.output.find((o) => o.type === "message");
if (msg) check(msg.content[0].text === deltaText, "responses deltas add up to the final text");

// errors are the SDK's typed exceptions with the server's message
try {
  await client.chat.completions.create({ model: "any", messages: [{ role: "wizard", content: "x" }] });
  check(false, "a bad role must fail");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /unknown role/.test(e.message), `BadRequestError (${e.message})`);
}

console.log(`openai client: ${n} checks passed`);
